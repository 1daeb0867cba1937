//! Reading a layout's files: in the layout, capped, and checked against their digests.
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;

use airlock_jail::dirfd::{fstat, DirFd, FileKind};

use crate::digest::Digest;
use crate::error::{ImageError, Result};

/// Opens a regular file of the layout (resolved inside it; a link may not lead out).
pub fn open_file(dir: &DirFd, rel: &[u8]) -> Result<std::fs::File> {
    let what = format!("open {}", String::from_utf8_lossy(rel));
    let f = dir
        .open_read_in_root(OsStr::from_bytes(rel))
        .map_err(ImageError::io(what.clone()))?;
    match fstat(std::os::fd::AsFd::as_fd(&f)) {
        Ok(m) if m.kind == FileKind::Regular => Ok(f),
        Ok(_) => Err(ImageError::Tar(format!("{what}: not a regular file"))),
        Err(e) => Err(ImageError::io(what)(e)),
    }
}

/// Reads a document of the layout, at most `cap` bytes.
pub fn read_capped(dir: &DirFd, rel: &[u8], cap: u64) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    open_file(dir, rel)?
        .take(cap + 1)
        .read_to_end(&mut v)
        .map_err(ImageError::io(format!(
            "read {}",
            String::from_utf8_lossy(rel)
        )))?;
    if v.len() as u64 > cap {
        return Err(ImageError::Json {
            what: String::from_utf8_lossy(rel).into_owned(),
            why: format!("larger than {cap} bytes"),
        });
    }
    Ok(v)
}

/// The path of a blob in an OCI layout.
#[must_use]
pub fn blob_path(d: &Digest) -> Vec<u8> {
    format!("blobs/sha256/{}", d.hex()).into_bytes()
}

/// Reads a blob and checks it against its digest.
pub fn read_blob(dir: &DirFd, d: &Digest, cap: u64) -> Result<Vec<u8>> {
    let bytes = read_capped(dir, &blob_path(d), cap)?;
    let got = Digest::of(&bytes);
    if &got != d {
        return Err(ImageError::Digest {
            what: format!("blob {d}"),
            expected: d.to_string(),
            actual: got.to_string(),
        });
    }
    Ok(bytes)
}
