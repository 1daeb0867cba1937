//! Mount primitives for assembling a sandbox's own root: detached bind trees with their
//! attributes set before they are attached (`open_tree` + `mount_setattr` + `move_mount`),
//! size-bounded tmpfs, `pivot_root`, and `fstatfs` usage of a filesystem.
//!
//! All of these need `CAP_SYS_ADMIN` in the user namespace owning the caller's mount namespace.
//! Attributes are only ever *added* (read-only, nosuid, nodev, noexec); a tree is never visible
//! at its target before they are in force.

use std::ffi::CStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

use crate::sys::{check, check_long, cpath, cstr};
use crate::{JailError, Result};

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// Mount attributes to add.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attrs {
    /// `MOUNT_ATTR_RDONLY`.
    pub read_only: bool,
    /// `MOUNT_ATTR_NOSUID`.
    pub nosuid: bool,
    /// `MOUNT_ATTR_NODEV`.
    pub nodev: bool,
    /// `MOUNT_ATTR_NOEXEC`.
    pub noexec: bool,
}

impl Attrs {
    /// Read-only, nosuid, nodev: what every system directory gets.
    pub const SYSTEM: Attrs = Attrs {
        read_only: true,
        nosuid: true,
        nodev: true,
        noexec: false,
    };
    /// Read-only, nosuid, noexec (device nodes keep dev; writing to a node is not a change to
    /// its inode, so /dev/null still takes writes, but its times and mode cannot change).
    pub const DEVICE: Attrs = Attrs {
        read_only: true,
        nosuid: true,
        nodev: false,
        noexec: true,
    };

    pub(crate) fn bits(self) -> u64 {
        let mut b = 0;
        for (on, bit) in [
            (self.read_only, 0x1),
            (self.nosuid, 0x2),
            (self.nodev, 0x4),
            (self.noexec, 0x8),
        ] {
            if on {
                b |= bit;
            }
        }
        b
    }
}

/// Opens `path` as an `O_PATH` descriptor (never following a final symlink).
pub fn open_path(path: &Path) -> Result<OwnedFd> {
    let c = cpath(path)?;
    let fd = check(
        // SAFETY: `c` is a valid NUL-terminated path for the call; flags only.
        unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        },
        "open(O_PATH)",
    )?;
    // SAFETY: open returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A detached recursive copy of the mount tree at `src` (an `O_PATH` fd), with `attrs` added to
/// every mount of it, ready for [`attach`].
pub fn detached_copy(src: BorrowedFd<'_>, attrs: Attrs) -> Result<OwnedFd> {
    let empty = c"";
    let flags = OPEN_TREE_CLONE | AT_RECURSIVE | libc::AT_EMPTY_PATH as libc::c_uint;
    let fd = check_long(
        // SAFETY: open_tree takes a dirfd, a valid empty C string and flags; it returns a new fd.
        unsafe {
            libc::syscall(
                libc::SYS_open_tree,
                src.as_raw_fd(),
                empty.as_ptr(),
                flags | libc::O_CLOEXEC as libc::c_uint,
            )
        },
        "open_tree(OPEN_TREE_CLONE)",
    )?;
    let fd = libc::c_int::try_from(fd)
        .map_err(|_| JailError::InvalidInput("open_tree returned a bad fd".into()))?;
    // SAFETY: open_tree returned a fresh descriptor that nothing else owns.
    let tree = unsafe { OwnedFd::from_raw_fd(fd) };
    set_attrs_fd(tree.as_fd(), attrs, true)?;
    Ok(tree)
}

fn set_attrs_fd(fd: BorrowedFd<'_>, attrs: Attrs, recursive: bool) -> Result<()> {
    let attr = MountAttr {
        attr_set: attrs.bits(),
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let mut flags = libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= AT_RECURSIVE;
    }
    check_long(
        // SAFETY: the pointer and size describe `attr`, which outlives the call; the path is a valid
        // empty C string.
        unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                fd.as_raw_fd(),
                c"".as_ptr(),
                flags,
                &attr as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            )
        },
        "mount_setattr",
    )?;
    Ok(())
}

/// Adds `attrs` to the mount at `path` (not to mounts beneath it).
pub fn set_attrs(path: &Path, attrs: Attrs) -> Result<()> {
    let fd = open_path(path)?;
    set_attrs_fd(fd.as_fd(), attrs, false)
}

/// Attaches a detached tree at `target` (an existing file or directory).
pub fn attach(tree: BorrowedFd<'_>, target: &Path) -> Result<()> {
    let t = cpath(target)?;
    check_long(
        // SAFETY: both path arguments are valid NUL-terminated strings; the fds are open.
        unsafe {
            libc::syscall(
                libc::SYS_move_mount,
                tree.as_raw_fd(),
                c"".as_ptr(),
                libc::AT_FDCWD,
                t.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            )
        },
        "move_mount",
    )?;
    Ok(())
}

/// Bind-mounts `target` onto itself (so it is a mount point, as `pivot_root` needs).
pub fn bind_self(target: &Path) -> Result<()> {
    let src = open_path(target)?;
    let tree = detached_copy(src.as_fd(), Attrs::default())?;
    attach(tree.as_fd(), target)
}

/// Size and entry bounds of a tmpfs, and its root's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tmpfs {
    /// `size=` in bytes (the kernel rounds up to pages).
    pub bytes: u64,
    /// `nr_inodes=`.
    pub inodes: u64,
    /// The root directory's mode.
    pub mode: u32,
    /// Added mount attributes.
    pub attrs: Attrs,
}

/// Mounts a bounded tmpfs on `target`.
pub fn mount_tmpfs(target: &Path, fs: Tmpfs) -> Result<()> {
    if fs.bytes == 0 || fs.inodes == 0 {
        return Err(JailError::InvalidInput("tmpfs bound 0".into()));
    }
    let src = cstr("tmpfs")?;
    let t = cpath(target)?;
    let data = cstr(&format!(
        "size={},nr_inodes={},mode={:o}",
        fs.bytes, fs.inodes, fs.mode
    ))?;
    let mut flags = libc::MS_NOSUID;
    if fs.attrs.nodev {
        flags |= libc::MS_NODEV;
    }
    if fs.attrs.noexec {
        flags |= libc::MS_NOEXEC;
    }
    if fs.attrs.read_only {
        flags |= libc::MS_RDONLY;
    }
    check(
        // SAFETY: all pointers are valid NUL-terminated strings that outlive the call.
        unsafe {
            libc::mount(
                src.as_ptr(),
                t.as_ptr(),
                src.as_ptr(),
                flags,
                data.as_ptr().cast(),
            )
        },
        "mount tmpfs",
    )?;
    Ok(())
}

/// Mounts a fresh procfs of the caller's pid namespace on `target`, nosuid, nodev, noexec.
pub fn mount_proc_at(target: &Path) -> Result<()> {
    let src = cstr("proc")?;
    let t = cpath(target)?;
    check(
        // SAFETY: all pointers are valid NUL-terminated strings or null.
        unsafe {
            libc::mount(
                src.as_ptr(),
                t.as_ptr(),
                src.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            )
        },
        "mount proc",
    )?;
    Ok(())
}

/// Lazily detaches the mount at `target`.
pub fn detach(target: &Path) -> Result<()> {
    let t = cpath(target)?;
    check(
        // SAFETY: `t` is a valid NUL-terminated path.
        unsafe { libc::umount2(t.as_ptr(), libc::MNT_DETACH) },
        "umount2(MNT_DETACH)",
    )?;
    Ok(())
}

/// Makes `new_root` (a mount point) the root of the caller's mount namespace and detaches the
/// old root entirely, so nothing of the host's tree stays reachable; the cwd becomes `/`.
pub fn pivot_into(new_root: &Path) -> Result<()> {
    std::env::set_current_dir(new_root).map_err(|e| JailError::io("chdir new root", e))?;
    let dot: &CStr = c".";
    check_long(
        // SAFETY: pivot_root(".", ".") stacks the old root on top of the new one; both pointers
        // are valid NUL-terminated strings.
        unsafe { libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) },
        "pivot_root",
    )?;
    check(
        // SAFETY: `dot` is valid; the old root sits on "." and is detached with everything below.
        unsafe { libc::umount2(dot.as_ptr(), libc::MNT_DETACH) },
        "umount2(old root)",
    )?;
    std::env::set_current_dir("/").map_err(|e| JailError::io("chdir /", e))
}

/// What a filesystem holds and may hold, from `fstatfs(2)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Bytes in use.
    pub bytes_used: u64,
    /// Bytes in all.
    pub bytes_total: u64,
    /// Inodes in use.
    pub inodes_used: u64,
    /// Inodes in all.
    pub inodes_total: u64,
}

impl Usage {
    /// True when no byte or no inode is left.
    pub fn full(&self) -> bool {
        self.bytes_used >= self.bytes_total || self.inodes_used >= self.inodes_total
    }
}

/// The usage of the filesystem `fd` is on.
pub fn usage(fd: BorrowedFd<'_>) -> Result<Usage> {
    // SAFETY: statfs is plain old data; zeroed is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable statfs for the call.
    check(unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) }, "fstatfs")?;
    let bsize = u64::try_from(st.f_bsize).unwrap_or(4096);
    Ok(Usage {
        bytes_used: (st.f_blocks.saturating_sub(st.f_bfree)).saturating_mul(bsize),
        bytes_total: st.f_blocks.saturating_mul(bsize),
        inodes_used: st.f_files.saturating_sub(st.f_ffree),
        inodes_total: st.f_files,
    })
}
