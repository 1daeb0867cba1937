//! Owned file descriptors at fixed numbers (the guest expects its socket at fd 3).
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::error::{JailError, Result};

/// Duplicate `src` onto the exact descriptor number `target` (closing whatever was there) and
/// return ownership of it. The new descriptor does not have `FD_CLOEXEC` set.
pub fn dup_to(src: BorrowedFd<'_>, target: RawFd) -> Result<OwnedFd> {
    if target < 0 {
        return Err(JailError::InvalidInput(format!("negative fd {target}")));
    }
    // SAFETY: dup2 only touches the descriptor table; `src` is a valid open descriptor for the
    // lifetime of the borrow, and `target` is a plain number that dup2 validates itself.
    let rc = unsafe { libc::dup2(src.as_raw_fd(), target) };
    if rc < 0 {
        return Err(JailError::Sys {
            op: "dup2",
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: dup2 succeeded, so `rc` (== target) is an open descriptor that nothing else in
    // this process owns: either it was free, or dup2 just closed what was there. The caller
    // gives up any other handle to that number by calling this function.
    Ok(unsafe { OwnedFd::from_raw_fd(rc) })
}

/// Make the pipe `fd` hold at least `bytes` (`F_SETPIPE_SZ`; the kernel rounds up to a power of
/// two of pages); its new capacity. Fails past `/proc/sys/fs/pipe-max-size` for an
/// unprivileged caller, or past the user's pipe-buffer allowance.
pub fn set_pipe_capacity(fd: BorrowedFd<'_>, bytes: usize) -> Result<usize> {
    let want = libc::c_int::try_from(bytes)
        .map_err(|_| JailError::InvalidInput(format!("pipe capacity {bytes} too large")))?;
    // SAFETY: F_SETPIPE_SZ takes an int and touches only the pipe behind the borrowed, open fd.
    let rc = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, want) };
    if rc < 0 {
        return Err(JailError::Sys {
            op: "fcntl(F_SETPIPE_SZ)",
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(usize::try_from(rc).unwrap_or(0))
}

/// `poll(2)` on one descriptor for input (or hang-up) for at most `timeout_ms` (-1: no limit);
/// whether it became readable. `EINTR` counts as not yet readable.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout_ms: i32) -> Result<bool> {
    Ok(poll_input(fd, timeout_ms)? != 0)
}

/// `poll(2)` on one descriptor for input for at most `timeout_ms` (-1: no limit): the events
/// that came back (`revents`: `POLLIN`, `POLLHUP`, ...), 0 when none did or on `EINTR`.
pub fn poll_input(fd: BorrowedFd<'_>, timeout_ms: i32) -> Result<libc::c_short> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pfd` is one valid pollfd for the duration of the call.
    let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(JailError::Sys {
            op: "poll",
            source: e,
        });
    }
    Ok(if rc > 0 { pfd.revents } else { 0 })
}

/// Sets `O_NONBLOCK` on `fd` (for a descriptor an async runtime polls).
pub fn set_nonblocking(fd: BorrowedFd<'_>) -> Result<()> {
    // SAFETY: fcntl with F_GETFL on a valid descriptor touches no memory.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    let set = if flags < 0 {
        flags
    } else {
        // SAFETY: fcntl with F_SETFL and integer flags on a valid descriptor touches no memory.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) }
    };
    if set < 0 {
        return Err(JailError::Sys {
            op: "fcntl(O_NONBLOCK)",
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// `F_GETOWN_EX` (Linux 2.6.32); not in the `libc` crate for glibc targets.
const F_GETOWN_EX: libc::c_int = 16;

/// `struct f_owner_ex`: who an open file's `O_ASYNC` signals go to.
#[repr(C)]
struct OwnerEx {
    _kind: libc::c_int,
    pid: libc::pid_t,
}

/// The process or group that `fd`'s open file signals when it becomes ready (`F_SETOWN`), as
/// this process's pid namespace names it: `None` when there is none. A file's owner is part of
/// the open file, shared by every process holding it, and shown nowhere in `/proc`.
pub fn signal_owner(fd: BorrowedFd<'_>) -> Result<Option<i32>> {
    let mut owner = OwnerEx { _kind: 0, pid: 0 };
    // SAFETY: F_GETOWN_EX writes one `struct f_owner_ex` (two ints, `OwnerEx`'s layout) into
    // the live, writable `owner`, for the borrowed, open fd.
    let rc = unsafe { libc::fcntl(fd.as_raw_fd(), F_GETOWN_EX, &mut owner as *mut OwnerEx) };
    if rc < 0 {
        return Err(JailError::Sys {
            op: "fcntl(F_GETOWN_EX)",
            source: std::io::Error::last_os_error(),
        });
    }
    // Whether a thread, a process or a group: any owner is one.
    Ok((owner.pid != 0).then_some(owner.pid))
}
