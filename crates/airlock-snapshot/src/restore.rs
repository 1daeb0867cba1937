//! Restore: parses the payload's tree records and recreates them beneath a data root.
//!
//! Defence in depth, even though the body was verified before this runs: every name is one
//! path segment (checked by the parser); every operation is on one name inside a directory
//! this restore opened itself, with airlock-jail's no-follow primitives, so a symlink in the
//! tree (written by the snapshot or by the sandbox) is never followed; modes are masked
//! (files `& 0o777`, directories `& 0o1777`: no set-id bit ever); the format has no record
//! for a device, FIFO, socket or hard link, so none is ever made; the [`Bounds`] hold.
//!
//! An existing name is replaced: a directory where the snapshot has a directory is kept and
//! restored into (what it held and the snapshot does not stays); anything else in the way (a
//! file, a link, a directory where the snapshot has a file or link) is removed first.
use std::fs::{File, FileTimes, Permissions};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, SystemTime};

use airlock_jail::dirfd::{DirFd, FileKind};

use crate::bounds::{Bounds, Budget};
use crate::error::{Result, SnapshotError};
use crate::payload::{tag, EntryMeta, Input, KernelAt, CHUNK_LEN};

/// What a restore made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestoreInfo {
    /// Directories (the top-level ones included).
    pub dirs: u64,
    /// Regular files.
    pub files: u64,
    /// Symbolic links.
    pub symlinks: u64,
    /// Bytes of file content written.
    pub bytes: u64,
    /// Existing names removed to make room.
    pub replaced: u64,
}

/// A directory being restored into, and what to give it when it closes.
struct Open {
    dir: DirFd,
    meta: EntryMeta,
}

/// The restore's state.
struct Restore<'a, R> {
    input: Input<R>,
    root: &'a DirFd,
    stack: Vec<Open>,
    budget: Budget,
    info: RestoreInfo,
    buf: Vec<u8>,
}

/// Restores the payload `input` holds beneath `root`: passes over the manifest and the
/// kernel state, then restores the tree.
pub(crate) fn restore_payload<R: Read>(
    mut input: Input<R>,
    root: &DirFd,
    bounds: &Bounds,
) -> Result<RestoreInfo> {
    input.manifest()?;
    let at = input.kernel_at()?;
    if at == KernelAt::Here {
        input.skip_chunks()?;
    }
    restore_tree(input, root, bounds, at == KernelAt::AfterTree)
}

/// Restores the tree records `input` holds (positioned at them) beneath `root`; with
/// `then_kernel`, kernel state follows the tree (unread), else the payload ends with it.
pub(crate) fn restore_tree<R: Read>(
    input: Input<R>,
    root: &DirFd,
    bounds: &Bounds,
    then_kernel: bool,
) -> Result<RestoreInfo> {
    let mut r = Restore {
        input,
        root,
        stack: Vec::new(),
        budget: Budget::new(*bounds),
        info: RestoreInfo::default(),
        buf: Vec::new(),
    };
    loop {
        let t = r.input.u8()?;
        if t == tag::END {
            return r.end(then_kernel);
        }
        r.record(t)?;
    }
}

fn io_err(what: &str, name: &[u8]) -> impl FnOnce(io::Error) -> SnapshotError {
    SnapshotError::io(format!(
        "restore: {what} {:?}",
        String::from_utf8_lossy(name)
    ))
}

fn times(m: EntryMeta) -> FileTimes {
    let secs = Duration::from_secs(m.mtime.unsigned_abs());
    let nanos = Duration::from_nanos(u64::from(m.mtime_nsec));
    let t = if m.mtime >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(secs)
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(secs)
    };
    let t = t
        .and_then(|t| t.checked_add(nanos))
        .unwrap_or(SystemTime::UNIX_EPOCH);
    FileTimes::new().set_modified(t)
}

impl<R: Read> Restore<'_, R> {
    fn parent(&self) -> Result<&DirFd> {
        self.stack
            .last()
            .map(|o| &o.dir)
            .ok_or_else(|| SnapshotError::malformed("a file or link at the top level"))
    }

    fn record(&mut self, t: u8) -> Result<()> {
        match t {
            tag::DIR => self.dir(),
            tag::UP => self.up(),
            tag::FILE => self.file(),
            tag::LINK => self.link(),
            other => Err(SnapshotError::malformed(format!(
                "unknown record kind {other}"
            ))),
        }
    }

    /// The 'E' record: the counts must match and nothing may follow.
    fn end(mut self, then_kernel: bool) -> Result<RestoreInfo> {
        if !self.stack.is_empty() {
            return Err(SnapshotError::malformed("the tree ends inside a directory"));
        }
        let (entries, bytes) = (self.input.u64()?, self.input.u64()?);
        let i = self.info;
        if entries != i.dirs + i.files + i.symlinks || bytes != self.budget.bytes {
            return Err(SnapshotError::malformed(
                "the tree's counts do not match its records",
            ));
        }
        if !then_kernel {
            self.input.expect_end()?;
        }
        Ok(self.info)
    }

    /// Makes room for `name` in `parent`: removes whatever is there (a link is unlinked,
    /// never followed). With `keep_dir`, an existing directory stays.
    fn clear(&mut self, name: &[u8], keep_dir: bool) -> Result<bool> {
        let parent = self.parent_or_root();
        let n = std::ffi::OsStr::from_bytes(name);
        let kind = match parent.stat_at(n) {
            Ok(m) => m.kind,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(false),
            Err(e) => return Err(io_err("stat", name)(e)),
        };
        if kind == FileKind::Directory && keep_dir {
            return Ok(true);
        }
        let mut budget = usize::try_from(self.budget.bounds.max_entries).unwrap_or(usize::MAX);
        parent
            .remove_tree_at(n, &mut budget)
            .map_err(io_err("remove", name))?;
        self.info.replaced += 1;
        Ok(false)
    }

    fn parent_or_root(&self) -> &DirFd {
        self.stack.last().map_or(self.root, |o| &o.dir)
    }

    /// A 'D' record: opens (making it if need be) the directory and pushes it.
    fn dir(&mut self) -> Result<()> {
        let name = self.input.name()?;
        let meta = self.input.meta()?;
        self.budget.entry()?;
        self.budget.depth(self.stack.len())?;
        let exists = self.clear(&name, true)?;
        let parent = self.parent_or_root();
        let n = std::ffi::OsStr::from_bytes(&name);
        if !exists {
            parent.mkdir_at(n, 0o700).map_err(io_err("mkdir", &name))?;
        }
        let dir = parent.open_dir_at(n).map_err(io_err("open", &name))?;
        self.stack.push(Open { dir, meta });
        self.info.dirs += 1;
        Ok(())
    }

    /// A 'U' record: the innermost directory gets its mode and mtime, and closes.
    fn up(&mut self) -> Result<()> {
        let open = self
            .stack
            .pop()
            .ok_or_else(|| SnapshotError::malformed("an up record at the top level"))?;
        let f = File::from(OwnedFd::from(open.dir));
        f.set_permissions(Permissions::from_mode(open.meta.mode & 0o1777))
            .map_err(SnapshotError::io("restore: chmod a directory"))?;
        f.set_times(times(open.meta))
            .map_err(SnapshotError::io("restore: set a directory's mtime"))
    }

    /// An 'F' record: a new file (created exclusively, never through a link), its content
    /// chunk by chunk, then its masked mode and mtime.
    fn file(&mut self) -> Result<()> {
        self.parent()?;
        let name = self.input.name()?;
        let meta = self.input.meta()?;
        self.budget.entry()?;
        self.clear(&name, false)?;
        let n = std::ffi::OsStr::from_bytes(&name);
        let mut f = self
            .parent()?
            .create_at(n, 0o600)
            .map_err(io_err("create", &name))?;
        self.content(&mut f, &name)?;
        f.set_permissions(Permissions::from_mode(meta.mode & 0o777))
            .map_err(io_err("chmod", &name))?;
        f.set_times(times(meta))
            .map_err(io_err("set the mtime of", &name))?;
        self.info.files += 1;
        Ok(())
    }

    /// The file's chunks; a chunk of zeros becomes a hole (the file is extended to its length
    /// at the end), so a sparse file takes no more of the sandbox's disk than it did.
    fn content(&mut self, f: &mut File, name: &[u8]) -> Result<()> {
        use std::io::{Seek, SeekFrom};
        if self.buf.len() < CHUNK_LEN {
            self.buf.resize(CHUNK_LEN, 0);
        }
        let mut at: u64 = 0;
        loop {
            let len = self.input.chunk_len()?;
            if len == 0 {
                return f.set_len(at).map_err(io_err("write", name));
            }
            self.budget.bytes(len as u64)?;
            self.input.read_some(&mut self.buf[..len])?;
            let chunk = &self.buf[..len];
            if chunk.iter().all(|&b| b == 0) {
                f.seek(SeekFrom::Current(len as i64))
                    .map_err(io_err("write", name))?;
            } else {
                f.write_all(chunk).map_err(io_err("write", name))?;
            }
            at += len as u64;
            self.info.bytes += len as u64;
        }
    }

    /// An 'L' record: a symlink, made as a link (its target is never resolved here).
    fn link(&mut self) -> Result<()> {
        self.parent()?;
        let name = self.input.name()?;
        let target = self.input.target()?;
        self.budget.entry()?;
        self.budget.bytes(target.len() as u64)?;
        self.clear(&name, false)?;
        let n = std::ffi::OsStr::from_bytes(&name);
        self.parent()?
            .symlink_at(std::ffi::OsStr::from_bytes(&target), n)
            .map_err(io_err("symlink", &name))?;
        self.info.symlinks += 1;
        Ok(())
    }
}
