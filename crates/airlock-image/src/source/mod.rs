//! What an import reads: an OCI image layout (a directory, or an archive of one), a Docker
//! archive (`docker save`, `podman save --format docker-archive`), a root tarball (`mmdebstrap
//! … root.tar`, `tar -C root -c .`), or a plain root directory.
//!
//! Archives are first unpacked into the import's staging area with the same applier as
//! layers (the same bounds and the same in-root rules); what they hold decides what they are.
//! Every document is read with a cap, every blob is checked against the digest that names it.
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;

use airlock_jail::dirfd::{fstat, DirFd, FileKind};
use serde::{Deserialize, Serialize};

use crate::config::ParsedConfig;
use crate::digest::Digest;
use crate::error::{ImageError, Result};

pub mod dir;
pub mod docker;
pub mod oci;

/// Largest JSON document read from an image (index, manifest, config).
pub const MAX_DOC_BYTES: u64 = 4 << 20;

/// What the import read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// An OCI image layout (directory or archive).
    Oci,
    /// A Docker archive.
    Docker,
    /// A root tarball (one layer).
    RootTar,
    /// A plain root directory.
    Directory,
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Format::Oci => "oci",
            Format::Docker => "docker",
            Format::RootTar => "root-tar",
            Format::Directory => "directory",
        })
    }
}

/// One layer of a layout: where its blob is and what must hash to what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerRef {
    /// The blob's path inside the layout.
    pub path: Vec<u8>,
    /// The digest of the blob as stored (OCI: the descriptor's; Docker: none).
    pub blob: Option<Digest>,
    /// The digest of the uncompressed tar (the config's diff ID).
    pub diff_id: Digest,
}

/// A layout, read: the config and the layers to apply, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// What the layout is.
    pub format: Format,
    /// The image config.
    pub config: ParsedConfig,
    /// Its layers, lowest first.
    pub layers: Vec<LayerRef>,
}

/// The plan of the layout in `dir`, if it is one.
pub fn plan(dir: &DirFd) -> Result<Option<Plan>> {
    if exists(dir, "oci-layout") {
        return oci::plan(dir).map(Some);
    }
    if exists(dir, "manifest.json") {
        return docker::plan(dir).map(Some);
    }
    Ok(None)
}

fn exists(dir: &DirFd, name: &str) -> bool {
    dir.stat_at(name).is_ok_and(|m| m.kind == FileKind::Regular)
}

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
