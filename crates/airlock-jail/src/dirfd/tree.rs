//! A directory as the root of a tree: lookups that resolve the way they would after a chroot
//! into it (`openat2(2)` with `RESOLVE_IN_ROOT`), and the link primitives an image unpacker
//! needs.
//!
//! Under `RESOLVE_IN_ROOT` a symlink met on the way is followed, but an absolute target starts
//! again at this directory and `..` never climbs above it, so a link written by an attacker
//! (`etc -> /etc`, `x -> ../../../../etc/shadow`) lands inside the tree, never outside; magic
//! links (`/proc/self/fd/N`) and crossing onto another filesystem are refused. Creating a link
//! (`symlink_at`, `link_at`) touches one name inside an already-open directory and follows
//! nothing.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use super::{cvt, name_cstring, openat, openat2_with, DirFd};

/// The resolve flags of every in-root lookup.
const IN_ROOT: u64 = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_XDEV;

/// Longest symlink target read back (`PATH_MAX`).
const MAX_LINK_TARGET: usize = 4096;

impl DirFd {
    /// Opens the directory at `rel` (`.` for this one), resolved with this directory as `/`.
    pub fn open_dir_in_root(&self, rel: impl AsRef<OsStr>) -> io::Result<DirFd> {
        openat2_with(
            self.as_fd(),
            rel.as_ref().as_bytes(),
            libc::O_RDONLY | libc::O_DIRECTORY,
            IN_ROOT,
        )
        .map(DirFd)
    }

    /// An `O_PATH` handle on what `rel` names, resolved with this directory as `/` (a final
    /// symlink is followed, inside the tree too); [`super::fstat`] it to learn its kind.
    pub fn open_path_in_root(&self, rel: impl AsRef<OsStr>) -> io::Result<OwnedFd> {
        openat2_with(self.as_fd(), rel.as_ref().as_bytes(), libc::O_PATH, IN_ROOT)
    }

    /// Opens `rel` for reading, resolved with this directory as `/`, without blocking on a
    /// FIFO; [`super::fstat`] it and refuse anything that is not a regular file.
    pub fn open_read_in_root(&self, rel: impl AsRef<OsStr>) -> io::Result<std::fs::File> {
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
        openat2_with(self.as_fd(), rel.as_ref().as_bytes(), flags, IN_ROOT).map(std::fs::File::from)
    }

    /// Creates the symlink `name` with `target` as its text (never resolved here).
    pub fn symlink_at(&self, target: &OsStr, name: impl AsRef<OsStr>) -> io::Result<()> {
        let t = std::ffi::CString::new(target.as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "target contains NUL"))?;
        let c = name_cstring(name.as_ref())?;
        // SAFETY: both strings are NUL-terminated and outlive the call; the fd is open.
        cvt(unsafe { libc::symlinkat(t.as_ptr(), self.0.as_raw_fd(), c.as_ptr()) })?;
        Ok(())
    }

    /// Makes `name` here a hard link to the entry `from_name` of `from` (a symlink there is
    /// linked as itself, never followed).
    pub fn link_at(
        &self,
        from: &DirFd,
        from_name: impl AsRef<OsStr>,
        name: impl AsRef<OsStr>,
    ) -> io::Result<()> {
        let a = name_cstring(from_name.as_ref())?;
        let b = name_cstring(name.as_ref())?;
        // SAFETY: both fds are open, both names NUL-terminated; flags 0 follows no link.
        cvt(unsafe {
            libc::linkat(
                from.0.as_raw_fd(),
                a.as_ptr(),
                self.0.as_raw_fd(),
                b.as_ptr(),
                0,
            )
        })?;
        Ok(())
    }

    /// Opens the entry `name` for reading, following no symlink and never blocking on a FIFO;
    /// [`super::fstat`] it and refuse anything that is not a regular file.
    pub fn open_read_at(&self, name: impl AsRef<OsStr>) -> io::Result<std::fs::File> {
        let c = name_cstring(name.as_ref())?;
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
        openat(self.as_fd(), &c, flags, 0).map(std::fs::File::from)
    }

    /// The target of the symlink `name` (at most `PATH_MAX` bytes).
    pub fn read_link_at(&self, name: impl AsRef<OsStr>) -> io::Result<OsString> {
        let c = name_cstring(name.as_ref())?;
        let mut buf = vec![0u8; MAX_LINK_TARGET + 1];
        // SAFETY: the fd is open, `c` is NUL-terminated, and `buf` is writable for its length.
        let n = unsafe {
            libc::readlinkat(
                self.0.as_raw_fd(),
                c.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
        if n > MAX_LINK_TARGET {
            return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        }
        buf.truncate(n);
        Ok(OsString::from_vec(buf))
    }
}
