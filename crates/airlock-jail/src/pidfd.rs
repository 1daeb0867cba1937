//! Process file descriptors: a handle on one process that a reused pid can never redirect.
//!
//! The broker holds one for each stage a zygote forked on its behalf (the stage is the
//! broker's child, but not one its async runtime spawned): it polls it for the exit, signals
//! through it and reaps through it.
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::sys::check_long;
use crate::{JailError, Result};

/// `pidfd_open(pid, 0)`: the caller must make sure `pid` is still the process it means (for
/// a child: not yet reaped).
pub fn open(pid: i32) -> Result<OwnedFd> {
    if pid <= 0 {
        return Err(JailError::InvalidInput(format!("bad pid {pid}")));
    }
    // SAFETY: pidfd_open only takes integers.
    let fd = check_long(
        unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) },
        "pidfd_open",
    )?;
    let fd = i32::try_from(fd).map_err(|_| JailError::InvalidInput("fd out of range".into()))?;
    // SAFETY: pidfd_open returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `pidfd_getfd(fd, target, 0)`: a duplicate of the process's fd `target`, close-on-exec
/// (needs ptrace-attach rights over it: its uid and dumpable, or `CAP_SYS_PTRACE` over its
/// user namespace). How the broker takes a forkable kernel's seccomp listener.
pub fn take_fd(fd: BorrowedFd<'_>, target: i32) -> Result<OwnedFd> {
    // SAFETY: pidfd_getfd only takes integers; it returns a new fd.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_getfd, fd.as_raw_fd(), target, 0u32) };
    let got = check_long(r, "pidfd_getfd")?;
    let got = i32::try_from(got).map_err(|_| JailError::InvalidInput("fd out of range".into()))?;
    // SAFETY: pidfd_getfd returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(got) })
}

/// `pidfd_send_signal(fd, signal)`.
pub fn send_signal(fd: BorrowedFd<'_>, signal: i32) -> Result<()> {
    check_long(
        // SAFETY: integers and a null siginfo (the kernel fills in a SI_USER one).
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd.as_raw_fd(),
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            )
        },
        "pidfd_send_signal",
    )?;
    Ok(())
}

/// Reap the process behind `fd` if it has exited (`waitid(P_PIDFD, WEXITED | WNOHANG)`); it
/// must be a child of the caller. Returns its wait status in `waitpid(2)`'s encoding (for
/// `ExitStatus::from_raw`), or None while it runs.
pub fn try_reap(fd: BorrowedFd<'_>) -> Result<Option<i32>> {
    let id = libc::id_t::try_from(fd.as_raw_fd())
        .map_err(|_| JailError::InvalidInput("negative fd".into()))?;
    loop {
        // SAFETY: siginfo_t is plain old data; all-zero is valid before the kernel fills it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid out pointer for the duration of the call.
        let r =
            unsafe { libc::waitid(libc::P_PIDFD, id, &mut info, libc::WEXITED | libc::WNOHANG) };
        if r == -1 {
            if crate::sys::errno() == libc::EINTR {
                continue;
            }
            return Err(JailError::last_os("waitid(P_PIDFD)"));
        }
        // SAFETY: waitid filled `info` (si_pid stays 0 when nothing had exited yet).
        let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
        if pid == 0 {
            return Ok(None);
        }
        return Ok(Some(match info.si_code {
            libc::CLD_EXITED => (status & 0xff) << 8,
            libc::CLD_DUMPED => (status & 0x7f) | 0x80,
            _ => status & 0x7f,
        }));
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, ExitStatus};

    fn reap(fd: &OwnedFd) -> ExitStatus {
        loop {
            match super::try_reap(fd.as_fd()).unwrap() {
                Some(s) => return ExitStatus::from_raw(s),
                None => std::thread::sleep(std::time::Duration::from_millis(2)),
            }
        }
    }

    #[test]
    #[allow(
        clippy::zombie_processes,
        reason = "reaped through its pidfd, which is the point"
    )]
    fn a_child_is_reaped_through_its_pidfd_with_its_status() {
        let child = Command::new("sh").args(["-c", "exit 7"]).spawn().unwrap();
        let fd = super::open(i32::try_from(child.id()).unwrap()).unwrap();
        assert_eq!(reap(&fd).code(), Some(7));
        // Reaped: the pid is gone, not a zombie waiting for another wait.
        assert!(!std::path::Path::new(&format!("/proc/{}", child.id())).exists());
    }

    #[test]
    #[allow(
        clippy::zombie_processes,
        reason = "reaped through its pidfd, which is the point"
    )]
    fn a_signal_through_the_pidfd_is_the_status() {
        let child = Command::new("sleep").arg("30").spawn().unwrap();
        let fd = super::open(i32::try_from(child.id()).unwrap()).unwrap();
        assert!(
            super::try_reap(fd.as_fd()).unwrap().is_none(),
            "still running"
        );
        super::send_signal(fd.as_fd(), libc::SIGKILL).unwrap();
        assert_eq!(reap(&fd).signal(), Some(libc::SIGKILL));
    }
}
