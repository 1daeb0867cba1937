//! Why an image could not be imported, found or removed.
use std::path::PathBuf;

/// A failed image operation. Messages say what was refused and, where it helps, how to fix it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// A file-system operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done (and to which path).
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The store (or one of its directories) is not a plain directory of the caller's own: a
    /// store is written only by its owner, who could otherwise plant links for them to follow.
    #[error(
        "{path}: not a directory of uid {uid}'s own (owner {owner}, or a link); a store is \
         written only by the user it belongs to: run the command as its owner, or choose a \
         store of your own with --image-dir"
    )]
    NotOwnStore {
        /// The directory or file.
        path: PathBuf,
        /// Its owner (`u32::MAX` when it is not a directory).
        owner: u32,
        /// The caller's effective uid.
        uid: u32,
    },
    /// The input is not a format this store reads.
    #[error("{path}: {why}")]
    Format {
        /// The input.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A tar stream is malformed or uses a feature refused here.
    #[error("tar: {0}")]
    Tar(String),
    /// An entry names a path the store refuses (`..`, too long, too deep).
    #[error("entry {path:?}: {why}")]
    Path {
        /// The path as written in the archive.
        path: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A device node outside `/dev` (nodes under `/dev` are dropped: the sandbox has its own).
    #[error("entry {0:?} is a device node; images may not carry device nodes outside /dev")]
    DeviceNode(String),
    /// A bound on the import was reached.
    #[error("the image exceeds the import bound on {what} ({limit}); {fix}")]
    Bound {
        /// Which bound.
        what: &'static str,
        /// Its value.
        limit: u64,
        /// How to raise it.
        fix: &'static str,
    },
    /// A blob's content does not match the digest that names it.
    #[error("digest mismatch for {what}: expected {expected}, got {actual}")]
    Digest {
        /// Which blob.
        what: String,
        /// The digest it was named by.
        expected: String,
        /// The digest of what was read.
        actual: String,
    },
    /// No image has this name.
    #[error("no image named {0:?} (see `airlock image ls`)")]
    NotFound(String),
    /// A name the store does not accept.
    #[error(
        "image name {0:?} is not valid: 1 to 128 characters of [A-Za-z0-9._:-], starting with a letter or digit"
    )]
    BadName(String),
    /// `--preset` names no preset.
    #[error("no preset named {name:?}; the presets are: {known}")]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// The presets there are.
        known: String,
    },
    /// `--builder` names no builder.
    #[error("no builder named {0:?}; the builders are mmdebstrap, podman and buildah")]
    UnknownBuilder(String),
    /// No builder is on PATH.
    #[error("no tool to build the image is on PATH (tried {tried}); install one: {install}")]
    NoBuilder {
        /// The programs looked for.
        tried: String,
        /// How to install each.
        install: String,
    },
    /// The builder failed (its own output went to stderr before this).
    #[error("{tool} failed ({status}): {hint}")]
    BuildFailed {
        /// The builder.
        tool: &'static str,
        /// Its exit status, or what is missing.
        status: String,
        /// What usually stands in its way.
        hint: String,
    },
    /// A build cache not of the caller's own is read, never written.
    #[error(
        "{path}: not a directory of uid {uid}'s own (owner {owner}); a build is kept only in a \
         cache of the caller's own: build as its owner first, or choose another --cache"
    )]
    NotOwnCache {
        /// The cache directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The caller's effective uid.
        uid: u32,
    },
    /// A malformed store record or manifest.
    #[error("{what}: {why}")]
    Json {
        /// Which document.
        what: String,
        /// What is wrong.
        why: String,
    },
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, ImageError>;

impl ImageError {
    /// An I/O error with what was being done.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ImageError {
        let what = what.into();
        move |source| ImageError::Io { what, source }
    }

    pub(crate) fn format(path: &std::path::Path, why: impl Into<String>) -> ImageError {
        ImageError::Format {
            path: path.to_path_buf(),
            why: why.into(),
        }
    }
}
