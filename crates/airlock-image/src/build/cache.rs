//! Where built presets are kept between builds (`--cache DIR`): `<preset>-<recipe key>.tar`,
//! world-readable, so one machine builds a recipe once and every user imports the same file.
//! One build per cache at a time (the owner's lock file, which no one else can open); a newer
//! recipe's file replaces the older ones of the same preset.
//!
//! A kept build is taken only from a cache nobody else could have written: the file, the cache
//! directory and every directory above it owned by the caller or root, none writable by others
//! (a world-writable directory on the way only if it is sticky), no link on the way that is not
//! the caller's or root's; the file is opened without following a link and checked on its
//! descriptor. Nobody else can replace it afterwards: no one else may write its directory.
use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{ImageError, Result};

/// A cache directory, locked while open when it is the caller's own.
#[derive(Debug)]
pub struct Cache {
    dir: PathBuf,
    _lock: Option<File>,
}

impl Cache {
    /// Opens `dir` (creating it, mode 0755); the caller's own is locked (`DIR/.lock`, mode
    /// 0600: another user can neither take nor hold the lock).
    pub fn open(dir: &Path) -> Result<Cache> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(ImageError::io(format!(
                "create the cache {}",
                dir.display()
            )))?;
        let uid = airlock_jail::identity::effective_uid();
        let own = std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == uid);
        let lock = if own {
            let path = dir.join(".lock");
            let lock = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
                .map_err(ImageError::io(format!("open {}", path.display())))?;
            lock.lock()
                .map_err(ImageError::io(format!("lock {}", path.display())))?;
            Some(lock)
        } else {
            None
        };
        Ok(Cache {
            dir: dir.to_path_buf(),
            _lock: lock,
        })
    }

    /// The file a build of `preset` with recipe `key` is kept in.
    #[must_use]
    pub fn path(&self, preset: &str, key: &str) -> PathBuf {
        self.dir.join(format!("{preset}-{key}.tar"))
    }

    /// The kept build, if there is one nobody but the caller or root could have written
    /// (see the module's doc); anything else is as good as absent.
    #[must_use]
    pub fn get(&self, preset: &str, key: &str) -> Option<PathBuf> {
        let uid = airlock_jail::identity::effective_uid();
        if !trusted_dir(&self.dir, uid) {
            return None;
        }
        let path = self.path(preset, key);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .ok()?;
        let m = file.metadata().ok()?;
        let mine = m.uid() == uid || m.uid() == 0;
        (m.is_file() && mine && m.mode() & 0o022 == 0).then_some(path)
    }

    /// A directory for a build that [`Cache::keep`] can move from without copying. Only a
    /// cache of the caller's own is written: another user's could hold links planted for the
    /// caller to write through.
    pub fn scratch(&self) -> Result<tempfile::TempDir> {
        let uid = airlock_jail::identity::effective_uid();
        let m = std::fs::symlink_metadata(&self.dir)
            .map_err(ImageError::io(format!("stat {}", self.dir.display())))?;
        if !m.is_dir() || m.uid() != uid {
            return Err(ImageError::NotOwnCache {
                path: self.dir.clone(),
                owner: m.uid(),
                uid,
            });
        }
        tempfile::Builder::new()
            .prefix(".build-")
            .tempdir_in(&self.dir)
            .map_err(ImageError::io(format!(
                "a build directory in {}",
                self.dir.display()
            )))
    }

    /// Moves the built `file` in as the build of `preset` with `key`, readable by everyone,
    /// and removes that preset's older builds.
    pub fn keep(&self, file: &Path, preset: &str, key: &str) -> Result<PathBuf> {
        let to = self.path(preset, key);
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644))
            .map_err(ImageError::io(format!("chmod {}", file.display())))?;
        std::fs::rename(file, &to).map_err(ImageError::io(format!("keep {}", to.display())))?;
        let keep = to.file_name().map(std::ffi::OsStr::to_os_string);
        let prefix = format!("{preset}-");
        for e in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let name = e.file_name();
            let n = name.to_string_lossy();
            let stale =
                n.starts_with(&prefix) && n.ends_with(".tar") && Some(&name) != keep.as_ref();
            if stale {
                let _ = std::fs::remove_file(e.path());
            }
        }
        Ok(to)
    }
}

/// `dir` and every directory above it owned by `uid` or root and writable by no one else (a
/// world-writable one only if sticky), no link on the way owned by anyone else; `dir` itself
/// writable by no one else at all.
fn trusted_dir(dir: &Path, uid: u32) -> bool {
    let Ok(abs) = std::path::absolute(dir) else {
        return false;
    };
    let mut at = Some(abs.as_path());
    let mut first = true;
    while let Some(p) = at {
        let Ok(m) = std::fs::symlink_metadata(p) else {
            return false;
        };
        let owner_ok = m.uid() == uid || m.uid() == 0;
        let mode = m.mode();
        let ok = if m.file_type().is_symlink() {
            owner_ok
        } else if first {
            m.is_dir() && owner_ok && mode & 0o022 == 0
        } else {
            m.is_dir() && owner_ok && (mode & 0o002 == 0 || mode & 0o1000 != 0) && mode & 0o020 == 0
        };
        if !ok {
            return false;
        }
        first = false;
        at = p.parent();
    }
    true
}
