//! Temporary files (`.tmp-<random>`): made exclusively, 0600, and held under an exclusive
//! `flock` for as long as they are being written, so the sweep a later [`crate::Store::open`]
//! does removes only what a dead writer left (a kernel-released lock), never a live one's.
use std::fs::{File, Permissions};
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;

use airlock_jail::dirfd::{self, DirFd};

use crate::error::{Result, SnapshotError};
use crate::random::temp_name;

/// The prefix of every temporary name; no snapshot id starts with it.
pub(crate) const TEMP_PREFIX: &str = ".tmp-";

/// Most names a sweep looks at.
const MAX_SWEEP: usize = 1_000_000;

/// A temporary file in a store directory, removed when dropped unless [`TempFile::keep`]
/// was called.
#[derive(Debug)]
pub(crate) struct TempFile<'a> {
    dir: &'a DirFd,
    pub(crate) name: String,
    pub(crate) file: File,
    kept: bool,
}

impl<'a> TempFile<'a> {
    /// Makes a fresh `.tmp-<random>` in `dir`, 0600, locked.
    pub(crate) fn create(dir: &'a DirFd) -> Result<TempFile<'a>> {
        for _ in 0..8 {
            let name = temp_name()?;
            let file = match dir.create_at(&name, 0o600) {
                Ok(f) => f,
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
                Err(e) => return Err(SnapshotError::io("create a temporary file")(e)),
            };
            let mut tmp = TempFile {
                dir,
                name,
                file,
                kept: false,
            };
            tmp.file
                .set_permissions(Permissions::from_mode(0o600))
                .map_err(SnapshotError::io("chmod a temporary file"))?;
            tmp.file
                .lock()
                .map_err(SnapshotError::io("lock a temporary file"))?;
            // A sweep may have taken the lock (and the name) between create and lock.
            let meta = dirfd::fstat(tmp.file.as_fd())
                .map_err(SnapshotError::io("stat a temporary file"))?;
            if meta.nlink > 0 {
                return Ok(tmp);
            }
            tmp.kept = true;
        }
        Err(SnapshotError::io("create a temporary file")(
            std::io::Error::from_raw_os_error(libc::EEXIST),
        ))
    }

    /// The file has been renamed (or is to stay): do not remove it.
    pub(crate) fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if !self.kept {
            let _ = self.dir.unlink_at(&self.name);
        }
    }
}

/// Removes every `.tmp-*` in `dir` that no live writer holds: the leftovers of a writer
/// killed mid-write. The count removed.
pub(crate) fn sweep(dir: &DirFd) -> Result<usize> {
    let names = dir
        .entries(MAX_SWEEP)
        .map_err(SnapshotError::io("list the store"))?;
    let mut removed = 0;
    for name in names {
        if !name.as_encoded_bytes().starts_with(TEMP_PREFIX.as_bytes()) {
            continue;
        }
        // Held (locked) until the name is gone: a link is removed as it is.
        let held = match dir.open_read_at(&name) {
            Ok(f) => f.try_lock().is_ok().then_some(Some(f)),
            Err(e) => (e.raw_os_error() == Some(libc::ELOOP)).then_some(None),
        };
        if let Some(_lock) = held {
            if dir.unlink_at(&name).is_ok() {
                removed += 1;
            }
        }
    }
    Ok(removed)
}
