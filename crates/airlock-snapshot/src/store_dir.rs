//! The store's directories: made 0700, then held open and checked to be the caller's own,
//! closed to group and others, and not links. Everything after goes through these handles.
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use airlock_jail::dirfd::{DirFd, FileKind, Meta};
use airlock_jail::identity::effective_uid;

use crate::error::{Result, SnapshotError};

/// The refusal for `path`.
pub(crate) fn unsafe_store(path: &Path, why: impl Into<String>) -> SnapshotError {
    SnapshotError::UnsafeStore {
        path: path.to_owned(),
        why: why.into(),
        uid: effective_uid(),
    }
}

/// Checks that `meta` (of `path`) is a `kind` of the caller's own that group and others
/// cannot reach.
pub(crate) fn check_own(meta: &Meta, path: &Path, kind: FileKind) -> Result<()> {
    if meta.kind != kind {
        return Err(unsafe_store(
            path,
            format!("is a {:?}, not a {kind:?}", meta.kind),
        ));
    }
    let uid = effective_uid();
    if meta.uid != uid {
        return Err(unsafe_store(path, format!("is owned by uid {}", meta.uid)));
    }
    if meta.mode & 0o077 != 0 {
        return Err(unsafe_store(
            path,
            format!("has mode {:04o}, open to group or others", meta.mode),
        ));
    }
    Ok(())
}

/// The refusal for an open that met a link (or a non-directory) at `path`.
fn open_error(path: &Path, e: io::Error) -> SnapshotError {
    match e.raw_os_error() {
        Some(libc::ELOOP) => unsafe_store(path, "is a symbolic link"),
        Some(libc::ENOTDIR) => unsafe_store(path, "is not a directory"),
        _ => SnapshotError::io(format!("open {}", path.display()))(e),
    }
}

/// Makes `dir` (and its parents) 0700 if missing, opens it without following a final link,
/// and checks it.
pub(crate) fn open_root(dir: &Path) -> Result<DirFd> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(SnapshotError::io(format!("create {}", dir.display())))?;
    let fd = DirFd::open(dir).map_err(|e| open_error(dir, e))?;
    let meta = fd
        .meta()
        .map_err(SnapshotError::io(format!("stat {}", dir.display())))?;
    check_own(&meta, dir, FileKind::Directory)?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        // Its own name, durable (it may just have been made).
        let _ = DirFd::open(parent).and_then(|p| sync_dir(&p));
    }
    Ok(fd)
}

/// Makes `root/name` 0700 if missing, opens it without following a link, and checks it.
pub(crate) fn open_sub(root: &DirFd, name: &str, path: &Path) -> Result<DirFd> {
    match root.mkdir_at(name, 0o700) {
        // A new directory's name is made durable before anything is published in it.
        Ok(()) => sync_dir(root).map_err(SnapshotError::io("sync the store directory"))?,
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
        Err(e) => return Err(SnapshotError::io(format!("create {}", path.display()))(e)),
    }
    let fd = root.open_dir_at(name).map_err(|e| open_error(path, e))?;
    let meta = fd
        .meta()
        .map_err(SnapshotError::io(format!("stat {}", path.display())))?;
    check_own(&meta, path, FileKind::Directory)?;
    Ok(fd)
}

/// `fsync` of a directory, so the names made or removed in it are durable.
pub(crate) fn sync_dir(dir: &DirFd) -> io::Result<()> {
    File::from(OwnedFd::from(dir.reopen()?)).sync_all()
}
