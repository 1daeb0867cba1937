//! Capture: walks a sandbox's directories with airlock-jail's no-follow primitives and writes
//! the payload's tree records.
//!
//! The sandbox may be running: a name that vanishes between listing and opening is skipped
//! (counted in [`Captured::vanished`]); a file is read up to the size it had when opened, so
//! one that grows is clipped there and one that shrinks ends early, and its chunks say exactly
//! what was read. Symlinks are recorded, never followed; FIFOs, sockets and devices are
//! skipped ([`Captured::skipped`]). A file linked twice is stored twice.
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;

use airlock_jail::dirfd::{self, DirFd, FileKind, Meta};

use crate::bounds::{too_large, Budget};
use crate::encode::write_err;
use crate::error::{Result, SnapshotError};
use crate::payload::{self, tag, EntryMeta, CHUNK_LEN};

/// The directories a snapshot takes: `dirs` (single names, e.g. `work`, `tmp`, `shm`)
/// beneath `root`.
#[derive(Debug, Clone, Copy)]
pub struct Tree<'a> {
    /// The data root.
    pub root: &'a DirFd,
    /// The directories beneath it to take, each one path segment.
    pub dirs: &'a [&'a str],
}

/// What a write took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Captured {
    /// Directories (the top-level ones included).
    pub dirs: u64,
    /// Regular files.
    pub files: u64,
    /// Symbolic links.
    pub symlinks: u64,
    /// FIFOs, sockets and devices left out.
    pub skipped: u64,
    /// Names that were gone (or changed kind) by the time they were opened.
    pub vanished: u64,
    /// Bytes of file content and link targets stored.
    pub bytes: u64,
    /// Bytes of kernel state stored.
    pub kernel_bytes: u64,
}

/// The walk's state: the budget, the counts, one read buffer.
struct Walk<'w, W> {
    out: &'w mut W,
    budget: &'w mut Budget,
    stats: Captured,
    buf: Vec<u8>,
}

/// Writes the tree records of `tree` (and the 'E' record) to `out`.
pub(crate) fn capture_tree<W: Write>(
    tree: Option<Tree<'_>>,
    out: &mut W,
    budget: &mut Budget,
) -> Result<Captured> {
    let mut walk = Walk {
        out,
        budget,
        stats: Captured::default(),
        buf: vec![0u8; CHUNK_LEN],
    };
    if let Some(t) = tree {
        for name in t.dirs {
            if !payload::valid_name(name.as_bytes()) {
                return Err(SnapshotError::io(format!("capture {name:?}"))(
                    invalid_name(),
                ));
            }
            let dir = t
                .root
                .open_dir_at(name)
                .map_err(SnapshotError::io(format!("open {name}")))?;
            walk.budget.entry()?;
            walk.dir(&dir, name.as_bytes(), 0)?;
        }
    }
    let s = walk.stats;
    payload::put_end(walk.out, s.dirs + s.files + s.symlinks, s.bytes).map_err(write_err)?;
    Ok(s)
}

fn invalid_name() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "not a single path segment")
}

fn entry_meta(m: &Meta) -> EntryMeta {
    EntryMeta {
        mode: m.mode,
        mtime: m.mtime,
        mtime_nsec: m.mtime_nsec,
    }
}

/// Whether an error means the name went away or changed kind under us.
fn vanished(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ELOOP | libc::ENOTDIR | libc::EINVAL)
    )
}

impl<W: Write> Walk<'_, W> {
    /// Records the open directory `dir` (called `name`, at `depth`) and everything in it.
    fn dir(&mut self, dir: &DirFd, name: &[u8], depth: usize) -> Result<()> {
        let meta = dir.meta().map_err(SnapshotError::io("stat a directory"))?;
        payload::put_entry(self.out, tag::DIR, name, entry_meta(&meta)).map_err(write_err)?;
        self.stats.dirs += 1;
        let mut names =
            dir.entries(self.budget.listing_limit())
                .map_err(|e| match e.raw_os_error() {
                    Some(libc::E2BIG) => too_large("entries", self.budget.bounds.max_entries),
                    _ => SnapshotError::io("list a directory")(e),
                })?;
        names.sort();
        for child in names {
            self.budget.entry()?;
            self.child(dir, &child, depth)?;
        }
        self.out.write_all(&[tag::UP]).map_err(write_err)
    }

    /// Records one name of `dir`.
    fn child(&mut self, dir: &DirFd, name: &OsString, depth: usize) -> Result<()> {
        let meta = match dir.stat_at(name) {
            Ok(m) => m,
            Err(e) if vanished(&e) => return self.gone(),
            Err(e) => return Err(SnapshotError::io("stat an entry")(e)),
        };
        match meta.kind {
            FileKind::Directory => {
                self.budget.depth(depth + 1)?;
                match dir.open_dir_at(name) {
                    Ok(sub) => self.dir(&sub, name.as_bytes(), depth + 1),
                    Err(e) if vanished(&e) => self.gone(),
                    Err(e) => Err(SnapshotError::io("open a directory")(e)),
                }
            }
            FileKind::Regular => self.file(dir, name),
            FileKind::Symlink => self.link(dir, name),
            FileKind::Fifo
            | FileKind::Socket
            | FileKind::CharDevice
            | FileKind::BlockDevice
            | FileKind::Other => {
                self.stats.skipped += 1;
                Ok(())
            }
        }
    }

    fn gone(&mut self) -> Result<()> {
        self.stats.vanished += 1;
        Ok(())
    }

    /// Records a symlink's target.
    fn link(&mut self, dir: &DirFd, name: &OsString) -> Result<()> {
        let target = match dir.read_link_at(name) {
            Ok(t) => t,
            Err(e) if vanished(&e) => return self.gone(),
            Err(e) => return Err(SnapshotError::io("read a symlink")(e)),
        };
        let target = target.as_bytes();
        self.budget.bytes(target.len() as u64)?;
        payload::put_link(self.out, name.as_bytes(), target).map_err(write_err)?;
        self.stats.symlinks += 1;
        self.stats.bytes += target.len() as u64;
        Ok(())
    }

    /// Records a regular file and its content, read up to the size it had when opened.
    fn file(&mut self, dir: &DirFd, name: &OsString) -> Result<()> {
        let mut f = match dir.open_read_at(name) {
            Ok(f) => f,
            Err(e) if vanished(&e) => return self.gone(),
            Err(e) => return Err(SnapshotError::io("open a file")(e)),
        };
        let meta = dirfd::fstat(f.as_fd()).map_err(SnapshotError::io("stat a file"))?;
        if meta.kind != FileKind::Regular {
            self.stats.skipped += 1;
            return Ok(());
        }
        self.budget.bytes(meta.size)?;
        payload::put_entry(self.out, tag::FILE, name.as_bytes(), entry_meta(&meta))
            .map_err(write_err)?;
        let read = self.content(&mut f, meta.size)?;
        payload::put_chunks_end(self.out).map_err(write_err)?;
        self.stats.files += 1;
        self.stats.bytes += read;
        Ok(())
    }

    /// Copies at most `size` bytes of `f` as chunks; the bytes copied.
    fn content(&mut self, f: &mut std::fs::File, size: u64) -> Result<u64> {
        let mut left = size;
        while left > 0 {
            let want = usize::try_from(left).map_or(CHUNK_LEN, |l| l.min(CHUNK_LEN));
            let n = match f.read(&mut self.buf[..want]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(SnapshotError::io("read a file")(e)),
            };
            payload::put_chunk(self.out, &self.buf[..n]).map_err(write_err)?;
            left -= n as u64;
        }
        Ok(size - left)
    }
}

#[cfg(test)]
#[path = "capture_tests.rs"]
mod tests;
