//! Entering a fresh user namespace with a single-entry uid/gid map.
//!
//! The calling process must be single-threaded (`unshare(CLONE_NEWUSER)` fails with `EINVAL`
//! otherwise). After the call the process holds a full capability set *inside* the new
//! namespace, which the later namespace and mount steps need; the caps are lost at `execve`
//! because the inside id is non-zero (the caller should pass e.g. 1000) and are dropped
//! explicitly by [`crate::caps::drop_all`] before that.
//!
//! The process must be *dumpable* when this runs: a non-dumpable process's `/proc/self` files
//! belong to root, so the map writes fail with `EACCES`. Call `process::set_dumpable(false)`
//! after, not before (a process that changed uid without an `execve` is non-dumpable too).

use std::path::Path;

use crate::sys::{check, write_file};
use crate::{JailError, Result};

/// `unshare(CLONE_NEWUSER)`, deny `setgroups(2)`, and map `inside_uid`/`inside_gid` to the
/// caller's effective uid/gid outside (one entry each, nothing else is mapped).
pub fn enter_user_namespace(inside_uid: u32, inside_gid: u32) -> Result<()> {
    if inside_uid == u32::MAX || inside_gid == u32::MAX {
        return Err(JailError::InvalidInput(
            "id 4294967295 cannot be mapped".into(),
        ));
    }
    // SAFETY: geteuid/getegid cannot fail and touch no memory.
    let (outer_uid, outer_gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    check(
        // SAFETY: unshare only takes flags; failure is reported through errno.
        unsafe { libc::unshare(libc::CLONE_NEWUSER) },
        "unshare(CLONE_NEWUSER)",
    )?;
    // "deny" must be written before gid_map when the writer lacks CAP_SETGID outside.
    write_file(Path::new("/proc/self/setgroups"), b"deny")
        .map_err(|e| JailError::io("write /proc/self/setgroups", e))?;
    write_file(
        Path::new("/proc/self/uid_map"),
        format!("{inside_uid} {outer_uid} 1\n").as_bytes(),
    )
    .map_err(|e| JailError::io("write /proc/self/uid_map", e))?;
    write_file(
        Path::new("/proc/self/gid_map"),
        format!("{inside_gid} {outer_gid} 1\n").as_bytes(),
    )
    .map_err(|e| JailError::io("write /proc/self/gid_map", e))?;
    Ok(())
}

/// Join the user namespace of `pid` (a forkable kernel's branch, whose maps nobody wrote yet)
/// and map its `inside` uid and gid to the same ids of its parent namespace, which must be
/// the caller's own effective ids seen from there (the single-entry rule: no capability
/// outside is needed). The caller ends up in that namespace with every capability in it.
pub fn join_and_map_branch(pid: i32, inside: u32) -> Result<()> {
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/user"))
        .map_err(|e| JailError::io("open the branch's user namespace", e))?;
    crate::identity::join_user_namespace(std::os::fd::AsFd::as_fd(&ns))?;
    let proc = Path::new("/proc").join(pid.to_string());
    write_file(&proc.join("setgroups"), b"deny")
        .map_err(|e| JailError::io("write the branch's setgroups", e))?;
    let line = format!("{inside} {inside} 1\n");
    write_file(&proc.join("uid_map"), line.as_bytes())
        .map_err(|e| JailError::io("write the branch's uid_map", e))?;
    write_file(&proc.join("gid_map"), line.as_bytes())
        .map_err(|e| JailError::io("write the branch's gid_map", e))?;
    Ok(())
}
