//! A forkable kernel's seccomp listener: the one door through which a stateful kernel may
//! clone itself into new namespaces (a copy-on-write branch), held by the broker.
//!
//! The kernel's filter ([`super::compile_forkable`]) turns a `clone` with exactly
//! [`super::BRANCH_CLONE_FLAGS`] into a user notification; every other namespace flag is
//! `EPERM` in the filter itself and never reaches here. The broker reads each notification
//! and answers: [`Listener::allow`] lets the very call go on (the flags are a register, read
//! by the filter — nothing the caller can change between the check and the clone), anything
//! else fails it. A filter stack has at most one listener (`EBUSY` for a second), so code in
//! the sandbox cannot take the door for itself.
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use super::{assemble_rules, install_program, rules_forkable, Network};
use crate::{JailError, Result};

/// One waiting syscall: which process asked, and what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notification {
    /// The kernel's cookie for the answer.
    pub id: u64,
    /// The caller, as the listener's owner's pid namespace sees it (0 when it has none there).
    pub pid: u32,
    /// The syscall number.
    pub nr: i32,
    /// The syscall's six arguments.
    pub args: [u64; 6],
}

impl Notification {
    /// A `clone` with exactly the branch flags (the only call the forkable filter hands over;
    /// checked again here, so an answer never rests on the filter alone).
    #[must_use]
    pub fn is_branch_clone(&self) -> bool {
        i64::from(self.nr) == libc::SYS_clone
            && self.args[0] & 0xffff_ffff == u64::from(super::BRANCH_CLONE_FLAGS)
    }
}

/// What waiting on a listener found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// A notification waits to be read.
    Notified,
    /// Nothing within the time.
    Quiet,
    /// No process holds the filter any more: nothing will ever come.
    Gone,
}

/// A seccomp filter's listener.
#[derive(Debug)]
pub struct Listener(OwnedFd);

impl Listener {
    /// A listener received from its installer (over a unix socket).
    #[must_use]
    pub fn from_fd(fd: OwnedFd) -> Self {
        Listener(fd)
    }

    /// The listener's fd (to poll it: readable while a notification waits; `POLLHUP` once no
    /// process holds the filter any more).
    #[must_use]
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.0.as_fd()
    }

    /// Wait at most `timeout_ms` for a notification.
    pub fn wait(&self, timeout_ms: i32) -> Result<Waited> {
        let revents = crate::fd::poll_input(self.as_fd(), timeout_ms)?;
        Ok(if revents & libc::POLLIN != 0 {
            Waited::Notified
        } else if revents != 0 {
            Waited::Gone
        } else {
            Waited::Quiet
        })
    }

    /// The next notification (blocks until one waits, unless the fd is non-blocking). `ENOENT`
    /// when the caller went away before it was read.
    pub fn recv(&self) -> Result<Notification> {
        // SAFETY: an all-zero `seccomp_notif` is valid, and the kernel requires it zeroed.
        let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: `n` is a live, correctly sized `seccomp_notif` the kernel fills in.
        let r = unsafe {
            libc::ioctl(
                self.0.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut n as *mut libc::seccomp_notif,
            )
        };
        if r != 0 {
            return Err(JailError::last_os("ioctl(SECCOMP_IOCTL_NOTIF_RECV)"));
        }
        Ok(Notification {
            id: n.id,
            pid: n.pid,
            nr: n.data.nr,
            args: n.data.args,
        })
    }

    /// Let the waiting call go on as if no filter had noticed it.
    pub fn allow(&self, id: u64) -> Result<()> {
        self.send(id, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE)
    }

    /// Put a duplicate of `src` into the waiting caller at fd number `at` (replacing whatever
    /// was there), inheritable: a branch's channel, placed in the kernel just before the clone
    /// it is for goes on, so the child is born holding it.
    pub fn add_fd(&self, id: u64, src: BorrowedFd<'_>, at: i32) -> Result<()> {
        let req = libc::seccomp_notif_addfd {
            id,
            flags: u32::try_from(libc::SECCOMP_ADDFD_FLAG_SETFD).unwrap_or(1),
            srcfd: u32::try_from(src.as_raw_fd())
                .map_err(|_| JailError::InvalidInput("negative fd".into()))?,
            newfd: u32::try_from(at).map_err(|_| JailError::InvalidInput("negative fd".into()))?,
            newfd_flags: 0,
        };
        // SAFETY: `req` is a live, correctly sized `seccomp_notif_addfd` the kernel reads.
        let r = unsafe {
            libc::ioctl(
                self.0.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ADDFD,
                &req as *const libc::seccomp_notif_addfd,
            )
        };
        if r < 0 {
            return Err(JailError::last_os("ioctl(SECCOMP_IOCTL_NOTIF_ADDFD)"));
        }
        Ok(())
    }

    /// Fail the waiting call with `EPERM`.
    pub fn refuse(&self, id: u64) -> Result<()> {
        self.deny(id, libc::EPERM)
    }

    /// Fail the waiting call with `errno`.
    pub fn deny(&self, id: u64, errno: i32) -> Result<()> {
        self.send(id, errno, 0)
    }

    fn send(&self, id: u64, errno: i32, flags: libc::c_ulong) -> Result<()> {
        let resp = libc::seccomp_notif_resp {
            id,
            val: 0,
            error: -errno,
            flags: u32::try_from(flags).unwrap_or(0),
        };
        // SAFETY: `resp` is a live, correctly sized `seccomp_notif_resp` the kernel reads.
        let r = unsafe {
            libc::ioctl(
                self.0.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &resp as *const libc::seccomp_notif_resp,
            )
        };
        if r != 0 {
            return Err(JailError::last_os("ioctl(SECCOMP_IOCTL_NOTIF_SEND)"));
        }
        Ok(())
    }
}

/// Installs the forkable Run profile on every thread of this process (`TSYNC`, with
/// `TSYNC_ESRCH` as the kernel requires beside a listener) and returns its listener. Requires
/// `no_new_privs`. (A guest kernel installs the same program itself, from
/// [`super::compile_forkable`]; this is for a process of ours.)
pub fn install_forkable(n: Network) -> Result<Listener> {
    let flags = libc::SECCOMP_FILTER_FLAG_TSYNC
        | libc::SECCOMP_FILTER_FLAG_TSYNC_ESRCH
        | libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
    let fd = install_program(&assemble_rules(&rules_forkable(n))?, flags)?;
    let fd = i32::try_from(fd)
        .ok()
        .filter(|fd| *fd > 0)
        .ok_or_else(|| JailError::InvalidInput(format!("seccomp gave no listener ({fd})")))?;
    // SAFETY: the kernel just returned this fd for the new listener; nothing else owns it.
    Ok(Listener(unsafe { OwnedFd::from_raw_fd(fd) }))
}
