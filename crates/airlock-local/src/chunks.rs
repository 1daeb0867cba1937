//! Files larger than one message move in chunks: a ranged read, and an append at the file's
//! current end. Same rules as [`crate::files`]: no link followed, only a regular file with one
//! link is read or extended, every read bounded.
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;

use airlock_jail::dirfd::{fstat, DirFd};
use airlock_policy::GuestRelPath;
use airlock_router::SandboxError;

use crate::files::{map_err, plain_file};
use crate::sandbox::LocalSandbox;

/// One chunk read from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The bytes from the offset.
    pub data: Vec<u8>,
    /// The file's size when it was read.
    pub size: u64,
}

/// Up to `len` bytes of `rel` from `offset`, refused when the file is larger than `max_size`.
pub fn read_range(
    root: &DirFd,
    rel: &str,
    offset: u64,
    len: u64,
    max_size: u64,
) -> Result<Chunk, SandboxError> {
    let mut f = root.open_read(rel).map_err(|e| map_err("open", rel, &e))?;
    let m = fstat(f.as_fd()).map_err(|e| map_err("stat", rel, &e))?;
    plain_file(rel, &m)?;
    if m.size > max_size {
        return Err(SandboxError::TooLarge {
            path: rel.to_owned(),
            size: m.size,
            max: max_size,
        });
    }
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| map_err("seek", rel, &e))?;
    let mut data = Vec::new();
    f.take(len)
        .read_to_end(&mut data)
        .map_err(|e| map_err("read", rel, &e))?;
    Ok(Chunk { data, size: m.size })
}

/// Appends `data` to `rel`, whose size must be `offset` (a chunk lands exactly after the one
/// before it), refused when the result would pass `max_size`.
pub fn append_at(
    root: &DirFd,
    rel: &str,
    offset: u64,
    data: &[u8],
    max_size: u64,
) -> Result<u64, SandboxError> {
    let end = offset.saturating_add(data.len() as u64);
    if end > max_size {
        return Err(SandboxError::TooLarge {
            path: rel.to_owned(),
            size: end,
            max: max_size,
        });
    }
    let f = root.open_write(rel).map_err(|e| map_err("open", rel, &e))?;
    let m = fstat(f.as_fd()).map_err(|e| map_err("stat", rel, &e))?;
    plain_file(rel, &m)?;
    if m.size != offset {
        return Err(SandboxError::Backend {
            detail: format!(
                "guest file {rel:?} is {} bytes; a chunk at offset {offset} must start at its end",
                m.size
            ),
        });
    }
    f.write_all_at(data, offset)
        .map_err(|e| map_err("write", rel, &e))?;
    Ok(end)
}

impl LocalSandbox {
    /// [`read_range`] beneath the work dir (`working_directory` as for the file methods).
    pub async fn read_chunk(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
        offset: u64,
        len: u64,
        max_size: u64,
    ) -> Result<Chunk, SandboxError> {
        let rel = self.rel_path(working_directory, path)?;
        self.blocking(move |root| read_range(root, &rel, offset, len, max_size))
            .await
    }

    /// [`append_at`] beneath the work dir; returns the new size.
    pub async fn append_chunk(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
        offset: u64,
        data: Vec<u8>,
        max_size: u64,
    ) -> Result<u64, SandboxError> {
        let rel = self.rel_path(working_directory, path)?;
        self.blocking(move |root| append_at(root, &rel, offset, &data, max_size))
            .await
    }
}
