//! What reading a layout yields: its format, config and layers, and the bounds on reading it.
use serde::{Deserialize, Serialize};

use crate::config::ParsedConfig;
use crate::digest::Digest;

/// Largest JSON document read from an image (index, manifest, config).
pub const MAX_DOC_BYTES: u64 = 4 << 20;
/// Most layers one image may have (each is unpacked and merged in turn).
pub const MAX_LAYERS: usize = 256;

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
