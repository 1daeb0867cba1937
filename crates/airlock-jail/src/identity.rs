//! Host identities: a root broker's sandboxes run as an unprivileged host uid/gid that owns
//! nothing, and the broker acts on a sandbox's files with that identity's filesystem ids.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::sys::check;
use crate::{JailError, Result};

/// A host uid/gid pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HostId {
    /// The host uid.
    pub uid: u32,
    /// The host gid.
    pub gid: u32,
}

/// Becomes `id` for good: no supplementary groups, real/effective/saved ids all `id`, and
/// dumpable again (a uid change clears it; the user-namespace map writes need it).
/// Single-threaded callers only (the set*id calls here are per thread).
pub fn become_id(id: HostId) -> Result<()> {
    // SAFETY: setgroups with a zero-length list reads no memory.
    check(unsafe { libc::setgroups(0, std::ptr::null()) }, "setgroups")?;
    check(
        // SAFETY: plain id arguments.
        unsafe { libc::setresgid(id.gid, id.gid, id.gid) },
        "setresgid",
    )?;
    check(
        // SAFETY: plain id arguments.
        unsafe { libc::setresuid(id.uid, id.uid, id.uid) },
        "setresuid",
    )?;
    check(
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) },
        "prctl(PR_SET_DUMPABLE)",
    )?;
    // SAFETY: getuid/geteuid cannot fail.
    if unsafe { libc::getuid() != id.uid || libc::geteuid() != id.uid } {
        return Err(JailError::InvalidInput("uid change did not hold".into()));
    }
    Ok(())
}

/// Runs `f` on this thread with the filesystem ids of `id` (`setfsuid`/`setfsgid`, which are
/// per thread), then restores the previous ones, even if `f` panics.
pub fn with_fs_ids<T>(id: Option<HostId>, f: impl FnOnce() -> T) -> T {
    struct Restore(u32, u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: setfsuid/setfsgid take plain ids and cannot fail in a way that matters
            // here (they return the previous id).
            unsafe {
                libc::setfsgid(self.1);
                libc::setfsuid(self.0);
            }
        }
    }
    let Some(id) = id else { return f() };
    // SAFETY: as above; -1 (u32::MAX) only queries.
    let (old_uid, old_gid) = unsafe { (libc::setfsuid(u32::MAX), libc::setfsgid(u32::MAX)) };
    let restore = Restore(
        u32::try_from(old_uid).unwrap_or(0),
        u32::try_from(old_gid).unwrap_or(0),
    );
    // SAFETY: plain ids.
    unsafe {
        libc::setfsgid(id.gid);
        libc::setfsuid(id.uid);
    }
    let out = f();
    drop(restore);
    out
}

/// `setns(2)`: joins the namespace `fd` refers to (`nstype` one `CLONE_NEW*` flag).
pub fn join_namespace(fd: BorrowedFd<'_>, nstype: libc::c_int) -> Result<()> {
    // SAFETY: setns takes an open fd and a flag.
    check(unsafe { libc::setns(fd.as_raw_fd(), nstype) }, "setns")?;
    Ok(())
}

/// Opens one of the caller's own namespaces (`"user"`, `"mnt"`, ...) as an fd.
pub fn own_namespace(kind: &str) -> Result<OwnedFd> {
    let path = crate::sys::cstr(&format!("/proc/self/ns/{kind}"))?;
    let fd = check(
        // SAFETY: a valid NUL-terminated path; flags only.
        unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) },
        "open /proc/self/ns",
    )?;
    // SAFETY: open returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Joins the user namespace `fd` refers to (single-threaded callers only).
pub fn join_user_namespace(fd: BorrowedFd<'_>) -> Result<()> {
    join_namespace(fd, libc::CLONE_NEWUSER)
}

/// Joins the network namespace `fd` refers to.
pub fn join_net_namespace(fd: BorrowedFd<'_>) -> Result<()> {
    join_namespace(fd, libc::CLONE_NEWNET)
}

/// Joins the mount namespace `fd` refers to; root and cwd become that namespace's root.
pub fn join_mount_namespace(fd: BorrowedFd<'_>) -> Result<()> {
    join_namespace(fd, libc::CLONE_NEWNS)
}

/// The calling process's effective uid.
#[must_use]
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// True when the calling process's effective uid is 0.
pub fn effective_root() -> bool {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}
