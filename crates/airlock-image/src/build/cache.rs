//! Where built presets are kept between builds (`--cache DIR`): `<preset>-<recipe key>.tar`,
//! world-readable, so one machine builds a recipe once and every user imports the same file.
//! One build per cache at a time (the directory is locked); a newer recipe's file replaces the
//! older ones of the same preset.
use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{ImageError, Result};

/// A locked cache directory (unlocked on drop).
#[derive(Debug)]
pub struct Cache {
    dir: PathBuf,
    _lock: File,
}

impl Cache {
    /// Opens (creating it, mode 0755) and locks `dir`.
    pub fn open(dir: &Path) -> Result<Cache> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(ImageError::io(format!(
                "create the cache {}",
                dir.display()
            )))?;
        let lock = File::open(dir).map_err(ImageError::io(format!("open {}", dir.display())))?;
        lock.lock()
            .map_err(ImageError::io(format!("lock {}", dir.display())))?;
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

    /// The kept build, if there is one (a plain file, not a link).
    #[must_use]
    pub fn get(&self, preset: &str, key: &str) -> Option<PathBuf> {
        let p = self.path(preset, key);
        std::fs::symlink_metadata(&p)
            .is_ok_and(|m| m.is_file())
            .then_some(p)
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
