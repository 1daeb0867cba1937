//! The local sandbox's file operations, on an open handle to the work dir.
//!
//! Nothing here takes a host path: every operation starts from the work dir's [`DirFd`] and
//! resolves beneath it without following a link (`airlock_jail::dirfd`). Parents are walked one
//! segment at a time, each opened with `O_NOFOLLOW | O_DIRECTORY` relative to the previous
//! handle, so a guest that swaps a component for a symlink between two steps makes the step
//! fail rather than land elsewhere. All functions are synchronous (callers use
//! `spawn_blocking`) and every read is bounded.
//!
//! What each operation promises:
//!
//! - `write_file` refuses a symlinked or non-directory parent, a link or directory at the
//!   leaf; creates missing parents (`0700`); writes the exact bytes to a fresh `O_EXCL` temp
//!   file and renames it over the leaf, so a hard link at the leaf is replaced, never written
//!   through.
//! - `stat` is lstat-like (the leaf is not followed). It reports a size only for what
//!   `read_file` would serve, a regular file with one link; anything else has an unknown size,
//!   and collection fails closed on it.
//! - `read_file` opens with `O_NONBLOCK` (a FIFO cannot block it), `fstat`s the open file and
//!   refuses anything not regular or with more than one hard link (it may be shared with a
//!   host file), refuses above the bound from `fstat` *and* from the bytes actually read.
//! - `list` is bounded ([`MAX_LIST_ENTRIES`]); `remove` unlinks (a link is removed, not
//!   followed); `reclaim` removes a tree by directory handle.

use std::ffi::OsStr;
use std::io::{self, Read, Write};

use airlock_jail::dirfd::{fstat, DirFd, FileKind, Meta};
use airlock_router::{DirEntry, EntryKind, FileStat, SandboxError};

/// Most entries one `list` returns; a directory holding more is an error, not a partial list.
pub const MAX_LIST_ENTRIES: usize = 10_000;

/// Most entries one `reclaim` visits.
pub const MAX_RECLAIM_ENTRIES: usize = 1_000_000;

fn shown(rel: &str) -> String {
    rel.to_owned()
}

/// Maps an errno to the trait's error, naming only the guest-relative path.
pub(crate) fn map_err(op: &'static str, rel: &str, e: &io::Error) -> SandboxError {
    match e.raw_os_error() {
        Some(ENOENT) => SandboxError::NotFound { path: shown(rel) },
        Some(ELOOP | EXDEV | ENOTDIR) => SandboxError::NotConfined { path: shown(rel) },
        // The sandbox's disk (one size- and inode-bounded tmpfs for /work, /tmp and /dev/shm)
        // is full: said plainly, since it is what bounds what files.write can land.
        Some(ENOSPC | EDQUOT) => SandboxError::Backend {
            detail: format!(
                "{op} of guest path {rel:?}: the sandbox's disk is full (its /work, /tmp and \
                 /dev/shm share one bounded filesystem, the host policy's disk_mb)"
            ),
        },
        _ => SandboxError::Backend {
            detail: format!("{op} of guest path {rel:?}: {}", e.kind()),
        },
    }
}

/// Refuses anything but a regular file with one link (a shared inode may be a host file's).
pub(crate) fn plain_file(rel: &str, m: &Meta) -> Result<(), SandboxError> {
    if m.kind != FileKind::Regular {
        return Err(SandboxError::Backend {
            detail: format!("guest path {rel:?} is not a regular file ({:?})", m.kind),
        });
    }
    if m.nlink != 1 {
        return Err(SandboxError::Backend {
            detail: format!(
                "guest file {rel:?} has {} hard links; it is not served",
                m.nlink
            ),
        });
    }
    Ok(())
}

// errno values (Linux, all architectures this crate builds for).
const ENOENT: i32 = 2;
const EEXIST: i32 = 17;
const ENOTDIR: i32 = 20;
const EXDEV: i32 = 18;
const ELOOP: i32 = 40;
const EISDIR: i32 = 21;
const ENOTEMPTY: i32 = 39;
const ENOSPC: i32 = 28;
const EDQUOT: i32 = 122;

fn not_confined(rel: &str) -> SandboxError {
    SandboxError::NotConfined { path: shown(rel) }
}

/// Splits `rel` (already lexically valid) into its parent segments and leaf.
fn split(rel: &str) -> (Vec<&str>, &str) {
    let mut segs: Vec<&str> = rel.split('/').collect();
    let leaf = segs.pop().unwrap_or("");
    (segs, leaf)
}

/// Opens (creating when missing and `create`) each parent segment in turn, refusing a link or
/// a non-directory.
fn walk_parents(
    root: &DirFd,
    rel: &str,
    segs: &[&str],
    create: bool,
) -> Result<DirFd, SandboxError> {
    let mut dir = root.reopen().map_err(|e| map_err("open", rel, &e))?;
    for seg in segs {
        let meta = match dir.stat_at(seg) {
            Ok(m) => Some(m),
            Err(e) if e.raw_os_error() == Some(ENOENT) => None,
            Err(e) => return Err(map_err("stat", rel, &e)),
        };
        match meta.map(|m| m.kind) {
            Some(FileKind::Directory) => {}
            Some(_) => return Err(not_confined(rel)),
            None if create => match dir.mkdir_at(seg, 0o700) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(EEXIST) => {}
                Err(e) => return Err(map_err("mkdir", rel, &e)),
            },
            None => return Err(SandboxError::NotFound { path: shown(rel) }),
        }
        // O_NOFOLLOW | O_DIRECTORY: whatever was checked above, a link swapped in since fails.
        dir = dir.open_dir_at(seg).map_err(|e| map_err("open", rel, &e))?;
    }
    Ok(dir)
}

fn temp_name() -> Result<String, SandboxError> {
    let mut buf = [0u8; 8];
    getrandom::fill(&mut buf).map_err(|e| SandboxError::Backend {
        detail: format!("no entropy for a temp name: {e}"),
    })?;
    Ok(format!(".airlock-write-{}", hex::encode(buf)))
}

/// Writes `data` at `rel` beneath `root` (see the module docs).
pub fn write_file(root: &DirFd, rel: &str, data: &[u8]) -> Result<(), SandboxError> {
    let (segs, leaf) = split(rel);
    let dir = walk_parents(root, rel, &segs, true)?;
    match dir.stat_at(leaf) {
        Ok(m) if m.kind == FileKind::Regular => {}
        Ok(_) => return Err(not_confined(rel)),
        Err(e) if e.raw_os_error() == Some(ENOENT) => {}
        Err(e) => return Err(map_err("stat", rel, &e)),
    }
    let tmp = temp_name()?;
    let mut f = dir
        .create_at(&tmp, 0o600)
        .map_err(|e| map_err("create", rel, &e))?;
    let written = f.write_all(data).and_then(|()| f.sync_data());
    drop(f);
    if let Err(e) = written {
        let _ = dir.unlink_at(&tmp);
        return Err(map_err("write", rel, &e));
    }
    // rename(2) replaces the directory entry (a link or hard link there is replaced, never
    // followed); it fails over a directory that appeared since the check.
    if let Err(e) = dir.rename_at(&tmp, leaf, false) {
        let _ = dir.unlink_at(&tmp);
        return Err(match e.raw_os_error() {
            Some(EISDIR | ENOTEMPTY) => not_confined(rel),
            _ => map_err("rename", rel, &e),
        });
    }
    Ok(())
}

/// The size `stat` reports: only for a regular file with one link.
fn served_size(m: &Meta) -> Option<u64> {
    (m.kind == FileKind::Regular && m.nlink == 1).then_some(m.size)
}

fn file_stat(m: &Meta) -> FileStat {
    let kind = match m.kind {
        FileKind::Regular => EntryKind::File,
        FileKind::Directory => EntryKind::Directory,
        FileKind::Symlink => EntryKind::Symlink,
        _ => EntryKind::Other,
    };
    let modified_ms = u64::try_from(m.mtime)
        .ok()
        .map(|s| s.saturating_mul(1000) + u64::from(m.mtime_nsec / 1_000_000));
    FileStat {
        size: served_size(m),
        is_dir: kind == EntryKind::Directory,
        kind,
        mode: Some(m.mode & 0o7777),
        modified_ms,
    }
}

/// What is at `rel` (lstat-like), `None` when nothing is.
pub fn stat(root: &DirFd, rel: &str) -> Result<Option<FileStat>, SandboxError> {
    match root.open_path(rel) {
        Ok(fd) => {
            use std::os::fd::AsFd;
            let m = fstat(fd.as_fd()).map_err(|e| map_err("stat", rel, &e))?;
            Ok(Some(file_stat(&m)))
        }
        Err(e) if e.raw_os_error() == Some(ENOENT) => Ok(None),
        Err(e) => Err(map_err("stat", rel, &e)),
    }
}

/// Reads the regular file at `rel`, refusing (never truncating) one above `max_bytes`.
pub fn read_file(root: &DirFd, rel: &str, max_bytes: u64) -> Result<Vec<u8>, SandboxError> {
    use std::os::fd::AsFd;
    let f = root.open_read(rel).map_err(|e| map_err("open", rel, &e))?;
    let m = fstat(f.as_fd()).map_err(|e| map_err("stat", rel, &e))?;
    plain_file(rel, &m)?;
    if m.size > max_bytes {
        return Err(SandboxError::TooLarge {
            path: shown(rel),
            size: m.size,
            max: max_bytes,
        });
    }
    let mut out = Vec::new();
    f.take(max_bytes.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| map_err("read", rel, &e))?;
    let read = out.len() as u64;
    if read > max_bytes {
        // It grew between fstat and read: refuse rather than return a prefix.
        return Err(SandboxError::TooLarge {
            path: shown(rel),
            size: read,
            max: max_bytes,
        });
    }
    Ok(out)
}

/// The entries of `rel` (`None`: the work dir itself), sorted by name.
pub fn list(root: &DirFd, rel: Option<&str>) -> Result<Vec<DirEntry>, SandboxError> {
    let shown_rel = rel.unwrap_or(".");
    let dir = match rel {
        Some(r) => root.open_dir(r),
        None => root.reopen(),
    }
    .map_err(|e| map_err("open", shown_rel, &e))?;
    let names = dir
        .entries(MAX_LIST_ENTRIES)
        .map_err(|e| map_err("list", shown_rel, &e))?;
    let mut out = Vec::with_capacity(names.len());
    for n in names {
        let Some(name) = n.to_str() else {
            return Err(SandboxError::Backend {
                detail: format!("an entry of guest directory {shown_rel:?} is not UTF-8"),
            });
        };
        match dir.stat_at(&n) {
            Ok(m) => out.push(DirEntry {
                name: name.to_owned(),
                stat: file_stat(&m),
            }),
            Err(e) if e.raw_os_error() == Some(ENOENT) => {}
            Err(e) => return Err(map_err("stat", shown_rel, &e)),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Makes the directory `rel` (and, with `parents`, each missing parent), walking every
/// existing parent by handle and refusing a link on the way. `Ok(true)` when it was made,
/// `Ok(false)` when a directory was already there; anything else there is an error.
pub fn make_dir(root: &DirFd, rel: &str, parents: bool) -> Result<bool, SandboxError> {
    let (segs, leaf) = split(rel);
    let dir = walk_parents(root, rel, &segs, parents)?;
    match dir.mkdir_at(leaf, 0o755) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(EEXIST) => {
            let m = dir.stat_at(leaf).map_err(|e| map_err("stat", rel, &e))?;
            match m.kind {
                FileKind::Directory => Ok(false),
                FileKind::Symlink => Err(not_confined(rel)),
                _ => Err(SandboxError::Backend {
                    detail: format!("guest path {rel:?} exists and is not a directory"),
                }),
            }
        }
        Err(e) => Err(map_err("mkdir", rel, &e)),
    }
}

/// Renames the entry `from` to `to` (replacing a file or an empty directory there, as
/// rename(2) does), each end's parents walked by
/// handle (a link on the way is refused; a link at `from` is moved as the link it is).
pub fn rename(root: &DirFd, from: &str, to: &str) -> Result<(), SandboxError> {
    let (from_segs, from_leaf) = split(from);
    let from_dir = walk_parents(root, from, &from_segs, false)?;
    let (to_segs, to_leaf) = split(to);
    let to_dir = walk_parents(root, to, &to_segs, false)?;
    from_dir
        .rename_into(from_leaf, &to_dir, to_leaf, false)
        .map_err(|e| match e.raw_os_error() {
            Some(ENOENT) => SandboxError::NotFound { path: shown(from) },
            Some(EISDIR | ENOTEMPTY) => SandboxError::Backend {
                detail: format!("guest path {to:?} is a directory that cannot be replaced"),
            },
            _ => map_err("rename", to, &e),
        })
}

/// Removes the entry at `rel`: a file or link is unlinked (never followed), an empty
/// directory removed. Nothing there is [`SandboxError::NotFound`].
pub fn remove(root: &DirFd, rel: &str) -> Result<(), SandboxError> {
    // Missing (the leaf or a parent) is success; a link in the way is still refused.
    match remove_present(root, rel) {
        Err(SandboxError::NotFound { .. }) => Ok(()),
        other => other,
    }
}

fn remove_present(root: &DirFd, rel: &str) -> Result<(), SandboxError> {
    let (segs, leaf) = split(rel);
    let dir = walk_parents(root, rel, &segs, false)?;
    let m = dir.stat_at(leaf).map_err(|e| map_err("stat", rel, &e))?;
    let done = if m.kind == FileKind::Directory {
        dir.rmdir_at(leaf)
    } else {
        dir.unlink_at(leaf)
    };
    done.map_err(|e| map_err("remove", rel, &e))
}

/// Removes the tree at `rel` by directory handle; missing is success.
pub fn reclaim(root: &DirFd, rel: &str) -> Result<(), SandboxError> {
    let (segs, leaf) = split(rel);
    let dir = match walk_parents(root, rel, &segs, false) {
        Ok(d) => d,
        Err(SandboxError::NotFound { .. }) => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut budget = MAX_RECLAIM_ENTRIES;
    dir.remove_tree_at(OsStr::new(leaf), &mut budget)
        .map_err(|e| map_err("reclaim", rel, &e))
}
