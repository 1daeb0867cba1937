//! The non-user namespaces: unshare, hostname, private mounts, a fresh procfs, tmpfs.
//!
//! All of these need `CAP_SYS_ADMIN` in the owning user namespace, which the process has right
//! after [`crate::userns::enter_user_namespace`].

use std::path::Path;

use crate::sys::{check, cpath, cstr};
use crate::{JailError, Result};

/// Which namespaces to unshare (the user namespace is entered separately, first).
#[derive(Default, Clone, Copy, Debug)]
pub struct Namespaces {
    /// A network namespace: only a (down) loopback interface.
    pub net: bool,
    /// A System V IPC / POSIX message queue namespace.
    pub ipc: bool,
    /// A hostname namespace.
    pub uts: bool,
    /// A mount namespace (copy of the current mounts).
    pub mount: bool,
    /// A pid namespace: the *next child* becomes its pid 1.
    pub pid: bool,
    /// A cgroup namespace: the current cgroup becomes the root of the view.
    pub cgroup: bool,
}

impl Namespaces {
    /// Every namespace on.
    pub fn all() -> Self {
        Namespaces {
            net: true,
            ipc: true,
            uts: true,
            mount: true,
            pid: true,
            cgroup: true,
        }
    }

    /// The `CLONE_NEW*` flags for this set.
    pub fn flags(self) -> libc::c_int {
        let mut f = 0;
        for (on, flag) in [
            (self.net, libc::CLONE_NEWNET),
            (self.ipc, libc::CLONE_NEWIPC),
            (self.uts, libc::CLONE_NEWUTS),
            (self.mount, libc::CLONE_NEWNS),
            (self.pid, libc::CLONE_NEWPID),
            (self.cgroup, libc::CLONE_NEWCGROUP),
        ] {
            if on {
                f |= flag;
            }
        }
        f
    }
}

/// `unshare(2)` the selected namespaces in one call.
pub fn unshare(ns: Namespaces) -> Result<()> {
    let flags = ns.flags();
    if flags == 0 {
        return Err(JailError::InvalidInput("no namespace selected".into()));
    }
    // SAFETY: unshare only takes flags; failure is reported through errno.
    check(unsafe { libc::unshare(flags) }, "unshare")?;
    Ok(())
}

/// `sethostname(2)` in the (new) uts namespace.
pub fn set_hostname(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 64 || name.bytes().any(|b| b == 0) {
        return Err(JailError::InvalidInput(format!("bad hostname {name:?}")));
    }
    check(
        // SAFETY: the pointer and length describe `name`, which outlives the call.
        unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) },
        "sethostname",
    )?;
    Ok(())
}

/// Makes every mount under `/` private (`MS_REC|MS_PRIVATE`), so nothing we mount propagates
/// back to the host and nothing the host mounts propagates in.
pub fn make_mounts_private() -> Result<()> {
    let root = cstr("/")?;
    check(
        // SAFETY: all pointers are valid NUL-terminated strings or null, as mount(2) allows for
        // a propagation change.
        unsafe {
            libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        },
        "mount(MS_REC|MS_PRIVATE, /)",
    )?;
    Ok(())
}

/// Mounts a fresh procfs (of the current pid namespace) on `/proc`, `nosuid,nodev,noexec`.
///
/// Call it from pid 1 (or any member) of the new pid namespace, inside the new mount namespace.
/// The kernel only allows this in a user namespace when the mount namespace already has a fully
/// visible procfs (no locked over-mounts); that holds on this machine (checked by `doctor`).
pub fn mount_proc() -> Result<()> {
    let src = cstr("proc")?;
    let target = cstr("/proc")?;
    check(
        // SAFETY: all pointers are valid NUL-terminated strings or null.
        unsafe {
            libc::mount(
                src.as_ptr(),
                target.as_ptr(),
                src.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            )
        },
        "mount proc on /proc",
    )?;
    Ok(())
}

/// Mounts a `tmpfs` of at most `size_bytes` on `path`, `nosuid,nodev`, mode 0700.
pub fn mount_tmpfs(path: &Path, size_bytes: u64) -> Result<()> {
    if size_bytes == 0 {
        return Err(JailError::InvalidInput("tmpfs size 0".into()));
    }
    let src = cstr("tmpfs")?;
    let target = cpath(path)?;
    let data = cstr(&format!("size={size_bytes},mode=0700"))?;
    check(
        // SAFETY: all pointers are valid NUL-terminated strings that outlive the call.
        unsafe {
            libc::mount(
                src.as_ptr(),
                target.as_ptr(),
                src.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                data.as_ptr().cast(),
            )
        },
        "mount tmpfs",
    )?;
    Ok(())
}
