//! No-follow, directory-handle-relative file primitives.
//!
//! Everything here resolves relative to an open directory descriptor ([`DirFd`]) and never
//! follows a symbolic link: multi-segment paths go through `openat2(2)` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV`, and
//! single-segment operations (`*_at`) use `O_NOFOLLOW`, `O_EXCL`, `AT_SYMLINK_NOFOLLOW` and
//! `unlinkat(2)` on one name inside an already-open directory. A guest that swaps a component
//! for a symlink between two calls therefore makes the second call fail (`ELOOP`, `ENOTDIR`,
//! `EXDEV`), never succeed somewhere else.
//!
//! Reads open with `O_NONBLOCK` so a FIFO planted where a file was expected cannot block the
//! caller; callers `fstat` the open descriptor ([`fstat`]) and refuse anything not regular
//! before reading a byte.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

mod tree;

/// What kind of file an inode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// Anything the kernel reports that is none of the above.
    Other,
}

/// The parts of a `struct stat` the callers decide on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// The file's kind.
    pub kind: FileKind,
    /// Its size in bytes (`st_size`).
    pub size: u64,
    /// Its hard-link count (`st_nlink`).
    pub nlink: u64,
    /// Device and inode, to tell two opens of one file apart from two files.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Permission bits, set-id and sticky bits (`st_mode & 07777`).
    pub mode: u32,
    /// Owner (`st_uid`).
    pub uid: u32,
    /// Modification time, seconds since the epoch (`st_mtime`).
    pub mtime: i64,
    /// The nanoseconds of the modification time (`st_mtime_nsec`, `0..1_000_000_000`).
    pub mtime_nsec: u32,
}

fn meta_of(st: &libc::stat) -> Meta {
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => FileKind::Regular,
        libc::S_IFDIR => FileKind::Directory,
        libc::S_IFLNK => FileKind::Symlink,
        libc::S_IFIFO => FileKind::Fifo,
        libc::S_IFSOCK => FileKind::Socket,
        libc::S_IFCHR => FileKind::CharDevice,
        libc::S_IFBLK => FileKind::BlockDevice,
        _ => FileKind::Other,
    };
    Meta {
        kind,
        size: u64::try_from(st.st_size).unwrap_or(0),
        nlink: st.st_nlink,
        dev: st.st_dev,
        ino: st.st_ino,
        mode: st.st_mode & 0o7777,
        uid: st.st_uid,
        mtime: st.st_mtime,
        mtime_nsec: u32::try_from(st.st_mtime_nsec).unwrap_or(0),
    }
}

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_owned())
}

/// A relative path for `openat2`: non-empty, not absolute, no NUL.
fn rel_cstring(rel: &[u8]) -> io::Result<CString> {
    if rel.is_empty() || rel.starts_with(b"/") {
        return Err(invalid("path must be relative and non-empty"));
    }
    CString::new(rel).map_err(|_| invalid("path contains a NUL byte"))
}

/// One path segment: non-empty, no `/`, not `.` or `..`, no NUL.
fn name_cstring(name: &OsStr) -> io::Result<CString> {
    let b = name.as_bytes();
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') {
        return Err(invalid("not a single path segment"));
    }
    CString::new(b).map_err(|_| invalid("name contains a NUL byte"))
}

/// The resolve flags every multi-segment lookup uses.
const RESOLVE: u64 = libc::RESOLVE_BENEATH
    | libc::RESOLVE_NO_SYMLINKS
    | libc::RESOLVE_NO_MAGICLINKS
    | libc::RESOLVE_NO_XDEV;

fn openat2(dir: BorrowedFd<'_>, rel: &str, flags: libc::c_int) -> io::Result<OwnedFd> {
    openat2_with(dir, rel.as_bytes(), flags, RESOLVE)
}

fn openat2_with(
    dir: BorrowedFd<'_>,
    rel: &[u8],
    flags: libc::c_int,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let path = rel_cstring(rel)?;
    // SAFETY: open_how is a plain C struct of integers; all-zero is its documented default.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = u64::try_from(flags | libc::O_CLOEXEC).map_err(|_| invalid("negative flags"))?;
    how.resolve = resolve;
    // SAFETY: `path` is a valid NUL-terminated string and `how` a valid open_how that both
    // outlive the call; the size passed is exactly the struct's size; `dir` is an open fd.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            std::ptr::addr_of!(how),
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(ret).map_err(|_| invalid("fd out of range"))?;
    // SAFETY: openat2 returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    // SAFETY: `name` is a valid NUL-terminated string; `dir` is an open descriptor; the mode is
    // passed as the variadic unsigned int open(2) expects.
    let fd = cvt(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    })?;
    // SAFETY: openat returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fstat` of an open descriptor.
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<Meta> {
    // SAFETY: an all-zero `struct stat` is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open for the borrow and `st` is a valid, writable stat buffer.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(meta_of(&st))
}

/// An open directory that every operation resolves beneath.
#[derive(Debug)]
pub struct DirFd(OwnedFd);

impl AsFd for DirFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl From<DirFd> for OwnedFd {
    fn from(d: DirFd) -> OwnedFd {
        d.0
    }
}

impl DirFd {
    /// Adopts a directory descriptor received from elsewhere (e.g. a sandbox's work dir
    /// handed over by the stage that assembled it); it must be a directory.
    pub fn from_owned(fd: OwnedFd) -> io::Result<DirFd> {
        if fstat(fd.as_fd())?.kind != FileKind::Directory {
            return Err(invalid("not a directory"));
        }
        Ok(DirFd(fd))
    }

    /// Opens a host directory the caller trusts the path of (its last component must not be a
    /// symlink).
    pub fn open(path: &Path) -> io::Result<DirFd> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| invalid("path contains a NUL byte"))?;
        // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
        let fd = cvt(unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        })?;
        // SAFETY: open returned a fresh descriptor that nothing else owns.
        Ok(DirFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// A second handle on the same directory (a fresh open file description).
    pub fn reopen(&self) -> io::Result<DirFd> {
        let dot = c".";
        openat(
            self.as_fd(),
            dot,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
        .map(DirFd)
    }

    /// Opens the directory at `rel` beneath this one, following no symlink.
    pub fn open_dir(&self, rel: &str) -> io::Result<DirFd> {
        openat2(
            self.as_fd(),
            rel,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        )
        .map(DirFd)
    }

    /// Opens `rel` beneath this one for reading, following no symlink, without blocking on a
    /// FIFO and without acquiring a controlling terminal. The caller must [`fstat`] it and
    /// refuse anything that is not a regular file.
    pub fn open_read(&self, rel: &str) -> io::Result<File> {
        let fd = openat2(
            self.as_fd(),
            rel,
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
        )?;
        Ok(File::from(fd))
    }

    /// Opens an existing `rel` beneath this one for writing, following no symlink, without
    /// blocking on a FIFO and without acquiring a controlling terminal. The caller must
    /// [`fstat`] it and refuse anything that is not a regular file.
    pub fn open_write(&self, rel: &str) -> io::Result<File> {
        let fd = openat2(
            self.as_fd(),
            rel,
            libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
        )?;
        Ok(File::from(fd))
    }

    /// An `O_PATH` handle on `rel` itself (a symlink leaf is returned as the link, not
    /// followed): what an lstat beneath this directory is made of.
    pub fn open_path(&self, rel: &str) -> io::Result<OwnedFd> {
        openat2(self.as_fd(), rel, libc::O_PATH | libc::O_NOFOLLOW)
    }

    /// The metadata of this directory.
    pub fn meta(&self) -> io::Result<Meta> {
        fstat(self.as_fd())
    }

    /// `fstatat(name, AT_SYMLINK_NOFOLLOW)` of one entry.
    pub fn stat_at(&self, name: impl AsRef<OsStr>) -> io::Result<Meta> {
        let c = name_cstring(name.as_ref())?;
        // SAFETY: an all-zero `struct stat` is a valid value to be overwritten.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the fd is open, `c` is NUL-terminated, `st` is writable.
        cvt(unsafe {
            libc::fstatat(
                self.0.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })?;
        Ok(meta_of(&st))
    }

    /// Creates the regular file `name` exclusively (`O_CREAT | O_EXCL | O_NOFOLLOW`): fails
    /// with `EEXIST` when anything, a dangling symlink included, is already there.
    pub fn create_at(&self, name: impl AsRef<OsStr>, mode: u32) -> io::Result<File> {
        let c = name_cstring(name.as_ref())?;
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        openat(self.as_fd(), &c, flags, mode).map(File::from)
    }

    /// Creates the directory `name`.
    pub fn mkdir_at(&self, name: impl AsRef<OsStr>, mode: u32) -> io::Result<()> {
        let c = name_cstring(name.as_ref())?;
        // SAFETY: the fd is open and `c` is NUL-terminated.
        cvt(unsafe { libc::mkdirat(self.0.as_raw_fd(), c.as_ptr(), mode) })?;
        Ok(())
    }

    /// Opens the directory `name` (one segment), following no symlink.
    pub fn open_dir_at(&self, name: impl AsRef<OsStr>) -> io::Result<DirFd> {
        let c = name_cstring(name.as_ref())?;
        openat(
            self.as_fd(),
            &c,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
        .map(DirFd)
    }

    /// Unlinks the non-directory `name` (a symlink is removed, never followed).
    pub fn unlink_at(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        let c = name_cstring(name.as_ref())?;
        // SAFETY: the fd is open and `c` is NUL-terminated.
        cvt(unsafe { libc::unlinkat(self.0.as_raw_fd(), c.as_ptr(), 0) })?;
        Ok(())
    }

    /// Removes the empty directory `name`.
    pub fn rmdir_at(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        let c = name_cstring(name.as_ref())?;
        // SAFETY: the fd is open and `c` is NUL-terminated.
        cvt(unsafe { libc::unlinkat(self.0.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) })?;
        Ok(())
    }

    /// Renames this directory's entry `from` to the entry `to` of `to_dir` (no path is
    /// resolved: both are single names under open directory handles, so neither end can be
    /// redirected by a link). With `no_replace`, fails with `EEXIST` rather than replacing.
    pub fn rename_into(
        &self,
        from: impl AsRef<OsStr>,
        to_dir: &DirFd,
        to: impl AsRef<OsStr>,
        no_replace: bool,
    ) -> io::Result<()> {
        let a = name_cstring(from.as_ref())?;
        let b = name_cstring(to.as_ref())?;
        let flags = if no_replace {
            libc::RENAME_NOREPLACE
        } else {
            0
        };
        // SAFETY: both fds are open and both names are NUL-terminated.
        cvt(unsafe {
            libc::renameat2(
                self.0.as_raw_fd(),
                a.as_ptr(),
                to_dir.0.as_raw_fd(),
                b.as_ptr(),
                flags,
            )
        })?;
        Ok(())
    }

    /// Renames `from` to `to`, both entries of this directory. With `no_replace`, fails with
    /// `EEXIST` rather than replacing (`RENAME_NOREPLACE`); otherwise atomically replaces.
    pub fn rename_at(
        &self,
        from: impl AsRef<OsStr>,
        to: impl AsRef<OsStr>,
        no_replace: bool,
    ) -> io::Result<()> {
        self.rename_into(from, self, to, no_replace)
    }

    /// The names in this directory (without `.` and `..`), at most `limit` of them: a
    /// directory holding more is an error (`E2BIG`), never a silently partial listing.
    pub fn entries(&self, limit: usize) -> io::Result<Vec<OsString>> {
        let fresh = self.reopen()?;
        let raw = fresh.0.as_raw_fd();
        // SAFETY: `raw` is a descriptor we own; on success fdopendir takes ownership of it
        // (closedir below closes it), so forget our owner only after it succeeded.
        let dir = unsafe { libc::fdopendir(raw) };
        if dir.is_null() {
            return Err(io::Error::last_os_error());
        }
        std::mem::forget(fresh);
        let mut out = Vec::new();
        let result = loop {
            // SAFETY: errno is thread-local; resetting it distinguishes end from error.
            unsafe { *libc::__errno_location() = 0 };
            // SAFETY: `dir` is a valid DIR* until closedir below.
            let ent = unsafe { libc::readdir(dir) };
            if ent.is_null() {
                let e = io::Error::last_os_error();
                break if e.raw_os_error() == Some(0) {
                    Ok(())
                } else {
                    Err(e)
                };
            }
            // SAFETY: readdir returned a valid dirent whose d_name is NUL-terminated and
            // stays valid until the next readdir on `dir`.
            let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) };
            let bytes = name.to_bytes();
            if bytes == b"." || bytes == b".." {
                continue;
            }
            if out.len() >= limit {
                break Err(io::Error::from_raw_os_error(libc::E2BIG));
            }
            out.push(OsString::from_vec(bytes.to_vec()));
        };
        // SAFETY: `dir` came from fdopendir and is closed exactly once.
        unsafe { libc::closedir(dir) };
        result.map(|()| out)
    }

    /// Removes `name` and, when it is a directory, everything beneath it, walking by directory
    /// handle and unlinking links rather than following them. A missing `name` is success.
    /// `budget` bounds the entries visited (a guest filling the tree faster than it is removed
    /// cannot hold the caller forever).
    pub fn remove_tree_at(&self, name: impl AsRef<OsStr>, budget: &mut usize) -> io::Result<()> {
        let name = name.as_ref();
        let meta = match self.stat_at(name) {
            Ok(m) => m,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
            Err(e) => return Err(e),
        };
        if meta.kind != FileKind::Directory {
            return match self.unlink_at(name) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
                other => other,
            };
        }
        let child = self.open_dir_at(name)?;
        loop {
            let names = child.entries(4096)?;
            if names.is_empty() {
                break;
            }
            for n in names {
                *budget = budget
                    .checked_sub(1)
                    .ok_or_else(|| io::Error::from_raw_os_error(libc::E2BIG))?;
                child.remove_tree_at(&n, budget)?;
            }
        }
        match self.rmdir_at(name) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            other => other,
        }
    }
}
