//! The store's MAC key, `key`: 32 random bytes, 0600, made once. Two servers opening a new
//! store at once each write a temporary file and publish it with a no-replace rename: one
//! wins, the other discards its own and reads the winner's, so both end with one key.
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::Path;

use airlock_jail::dirfd::{self, DirFd, FileKind};

use crate::error::{Result, SnapshotError};
use crate::mac::{Key, KEY_LEN};
use crate::random::random_bytes;
use crate::store_dir::{check_own, sync_dir, unsafe_store};
use crate::temp::TempFile;

/// The key file's name in the store directory.
const KEY_NAME: &str = "key";

/// Reads the store's key, making it first if there is none.
pub(crate) fn load_or_create(root: &DirFd, dir: &Path) -> Result<Key> {
    let path = dir.join(KEY_NAME);
    if let Some(key) = load(root, &path)? {
        return Ok(key);
    }
    create(root, &path)?;
    load(root, &path)?.ok_or_else(|| unsafe_store(&path, "vanished as it was made"))
}

/// The key, if the file exists: a regular 0600-ish file of ours, of exactly 32 bytes.
fn load(root: &DirFd, path: &Path) -> Result<Option<Key>> {
    let mut f = match root.open_read_at(KEY_NAME) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(unsafe_store(path, "is a symbolic link"));
        }
        Err(e) => return Err(SnapshotError::io(format!("open {}", path.display()))(e)),
    };
    let meta = dirfd::fstat(f.as_fd()).map_err(SnapshotError::io("stat the key"))?;
    check_own(&meta, path, FileKind::Regular)?;
    let mut buf = Vec::with_capacity(KEY_LEN + 1);
    (&mut f)
        .take(KEY_LEN as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(SnapshotError::io(format!("read {}", path.display())))?;
    let key: [u8; KEY_LEN] = buf
        .try_into()
        .map_err(|b: Vec<u8>| unsafe_store(path, format!("holds {} bytes, not 32", b.len())))?;
    Ok(Some(Key(key)))
}

/// Writes a new key under a temporary name, then publishes it unless another has been.
fn create(root: &DirFd, path: &Path) -> Result<()> {
    let mut tmp = TempFile::create(root)?;
    let key = random_bytes::<KEY_LEN>()?;
    tmp.file
        .write_all(&key)
        .and_then(|()| tmp.file.sync_all())
        .map_err(SnapshotError::io(format!("write {}", path.display())))?;
    match root.rename_at(&tmp.name, KEY_NAME, true) {
        Ok(()) => tmp.keep(),
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => return Ok(()),
        Err(e) => return Err(SnapshotError::io(format!("publish {}", path.display()))(e)),
    }
    sync_dir(root).map_err(SnapshotError::io("sync the store directory"))
}
