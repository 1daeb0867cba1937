//! The store: a directory (0700) holding `key` (the MAC key, 0600) and `snapshots/` (0700),
//! where each snapshot is one file named by its id (0600). A snapshot is written under a
//! temporary name, fsynced, renamed into place and the directory fsynced, so after a kill
//! at any instant a snapshot is whole or absent; temporary leftovers are swept by `open`.
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use airlock_jail::dirfd::{DirFd, FileKind, Meta};

use crate::encode::default_threads;
use crate::error::{Result, SnapshotError};
use crate::id::SnapshotId;
use crate::key;
use crate::mac::Key;
use crate::store_dir::{open_root, open_sub, sync_dir};
use crate::temp::sweep;

/// The directory of snapshot files.
const SNAPSHOTS: &str = "snapshots";
/// Most snapshots [`Store::list`] returns.
const MAX_LIST: usize = 1_000_000;

/// A snapshot store. Every operation goes through directory handles opened and checked by
/// [`Store::open`], never by path again.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    pub(crate) snapshots: DirFd,
    pub(crate) key: Key,
    /// Compression threads a write uses.
    pub(crate) threads: usize,
}

/// A snapshot as listed: cheap facts from the directory, no verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// Its id.
    pub id: SnapshotId,
    /// Its size on disk (header and body).
    pub stored_bytes: u64,
    /// When it was written (the file's mtime).
    pub created: SystemTime,
}

impl SnapshotInfo {
    /// The facts `meta` gives of the snapshot `id`.
    pub(crate) fn of(id: SnapshotId, meta: &Meta) -> SnapshotInfo {
        let secs = Duration::from_secs(u64::try_from(meta.mtime).unwrap_or(0));
        let created = SystemTime::UNIX_EPOCH + secs + Duration::from_nanos(meta.mtime_nsec.into());
        SnapshotInfo {
            id,
            stored_bytes: meta.size,
            created,
        }
    }
}

impl Store {
    /// Opens (making it if need be) the store at `dir`: the directory and `snapshots/` 0700,
    /// `key` 0600 with 32 bytes from the kernel's CSPRNG. Refuses a directory or key that is not
    /// the caller's own, is open to group or others, or is a symbolic link. Sweeps what killed
    /// writers left.
    pub fn open(dir: &Path) -> Result<Store> {
        let root = open_root(dir)?;
        sweep(&root)?;
        let key = key::load_or_create(&root, dir)?;
        let snapshots = open_sub(&root, SNAPSHOTS, &dir.join(SNAPSHOTS))?;
        sweep(&snapshots)?;
        Ok(Store {
            dir: dir.to_owned(),
            snapshots,
            key,
            threads: default_threads(),
        })
    }

    /// Sets how many threads a write compresses on (default: one per core, at most 4;
    /// `<= 1`: on the writing thread). The snapshot is the same whatever the count.
    pub fn set_compression_threads(&mut self, threads: usize) {
        self.threads = threads;
    }

    /// The store's directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The snapshots in the store, oldest first (temporary files never appear).
    pub fn list(&self) -> Result<Vec<SnapshotInfo>> {
        let names = self
            .snapshots
            .entries(MAX_LIST)
            .map_err(SnapshotError::io("list the snapshots"))?;
        let mut out = Vec::new();
        for name in names {
            let Some(id) = name.to_str().and_then(|s| SnapshotId::parse(s).ok()) else {
                continue;
            };
            match self.snapshots.stat_at(id.as_str()) {
                Ok(m) if m.kind == FileKind::Regular => out.push(SnapshotInfo::of(id, &m)),
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) => return Err(SnapshotError::io(format!("stat snapshot {id}"))(e)),
            }
        }
        out.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
        Ok(out)
    }

    /// Removes the snapshot `id` (durably: the directory is fsynced).
    pub fn remove(&self, id: &SnapshotId) -> Result<()> {
        match self.snapshots.unlink_at(id.as_str()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                return Err(SnapshotError::NotFound(id.clone()));
            }
            Err(e) => return Err(SnapshotError::io(format!("remove snapshot {id}"))(e)),
        }
        sync_dir(&self.snapshots).map_err(SnapshotError::io("sync the snapshots directory"))
    }
}
