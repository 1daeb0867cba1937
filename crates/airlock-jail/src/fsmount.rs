//! Filesystems made with the new mount API (`fsopen`, `fsconfig`, `fsmount`): detached until
//! [`crate::mounts::attach`]ed, so nothing is visible anywhere half made.
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::mounts::Attrs;
use crate::sys::check_long;
use crate::{JailError, Result};

const FSOPEN_CLOEXEC: libc::c_uint = 1;
const FSMOUNT_CLOEXEC: libc::c_uint = 1;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_SET_FD: libc::c_uint = 5;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;

/// A procfs of the pid namespace `pidns` (an fd of `/proc/PID/ns/pid` or a pidfd), nosuid,
/// nodev, noexec, detached: a branch's own `/proc`, made from outside its pid namespace
/// (Linux 6.x's `pidns` parameter; the caller needs `CAP_SYS_ADMIN` over the namespace's
/// owner and a fully visible procfs in its mount namespace).
pub fn detached_proc(pidns: BorrowedFd<'_>) -> Result<OwnedFd> {
    // SAFETY: fsopen takes a valid C string and flags; it returns a new fd.
    let ctx = unsafe { libc::syscall(libc::SYS_fsopen, c"proc".as_ptr(), FSOPEN_CLOEXEC) };
    let ctx = owned(check_long(ctx, "fsopen(proc)")?, "fsopen")?;
    check_long(
        // SAFETY: the key is a valid C string; a null value with an fd in `aux`.
        unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                ctx.as_raw_fd(),
                FSCONFIG_SET_FD,
                c"pidns".as_ptr(),
                std::ptr::null::<libc::c_char>(),
                pidns.as_raw_fd(),
            )
        },
        "fsconfig(pidns)",
    )?;
    check_long(
        // SAFETY: the key and value are valid C strings; aux 0.
        unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                ctx.as_raw_fd(),
                FSCONFIG_SET_STRING,
                c"source".as_ptr(),
                c"proc".as_ptr(),
                0,
            )
        },
        "fsconfig(source)",
    )?;
    check_long(
        // SAFETY: integers and null pointers only.
        unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                ctx.as_raw_fd(),
                FSCONFIG_CMD_CREATE,
                std::ptr::null::<libc::c_char>(),
                std::ptr::null::<libc::c_char>(),
                0,
            )
        },
        "fsconfig(create proc)",
    )?;
    let attrs = Attrs {
        read_only: false,
        nosuid: true,
        nodev: true,
        noexec: true,
    };
    // SAFETY: integers only; it returns a new fd.
    let mount = unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            ctx.as_raw_fd(),
            FSMOUNT_CLOEXEC,
            attrs.bits(),
        )
    };
    owned(check_long(mount, "fsmount(proc)")?, "fsmount")
}

fn owned(fd: libc::c_long, op: &str) -> Result<OwnedFd> {
    let fd = libc::c_int::try_from(fd)
        .map_err(|_| JailError::InvalidInput(format!("{op} returned a bad fd")))?;
    // SAFETY: the syscall just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
