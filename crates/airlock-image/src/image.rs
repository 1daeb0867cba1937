//! An imported image as the store records it, and as a sandbox uses it.
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::ImageConfig;
use crate::error::{ImageError, Result};
use crate::source::Format;
use crate::unpack::Report;

/// Largest record or note read back from the store.
pub(crate) const MAX_RECORD_BYTES: u64 = 1 << 20;

/// The store's record of one image name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The name.
    pub name: String,
    /// The root it names: the OCI chain ID of its layers (a root tarball's diff ID), or the
    /// digest of a directory's walk; 64 hex digits.
    pub id: String,
    /// What was imported.
    pub format: Format,
    /// The path imported from.
    pub source: String,
    /// How the image asks to be run.
    pub config: ImageConfig,
    /// Seconds since the epoch.
    pub imported_at: u64,
    /// Bytes read from the image's (decompressed) tar streams, or its files.
    pub bytes: u64,
    /// Entries read.
    pub entries: u64,
    /// Layers applied.
    pub layers: usize,
    /// What the import dropped or changed.
    pub report: Report,
}

/// An image ready for a sandbox: its read-only root and its config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The name it was found by.
    pub name: String,
    /// The root's id (64 hex digits).
    pub id: String,
    /// The host directory holding the root.
    pub root: PathBuf,
    /// How the image asks to be run.
    pub config: ImageConfig,
    /// The store's directory for notes about this root.
    pub(crate) notes: PathBuf,
}

impl Image {
    /// A note kept about this root (e.g. what its interpreter answered a probe), if any.
    #[must_use]
    pub fn note(&self, key: &str) -> Option<Vec<u8>> {
        let path = self.notes.join(note_name(key)?);
        let mut v = Vec::new();
        std::fs::File::open(path)
            .ok()?
            .take(MAX_RECORD_BYTES + 1)
            .read_to_end(&mut v)
            .ok()?;
        (v.len() as u64 <= MAX_RECORD_BYTES).then_some(v)
    }

    /// Keeps a note about this root (best effort: a store the caller cannot write, or root
    /// writing into another user's store, keeps none).
    pub fn keep_note(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let name = note_name(key).ok_or_else(|| ImageError::Json {
            what: "note".into(),
            why: format!("bad key {key:?}"),
        })?;
        // Root using someone else's store (`--image-dir`) leaves it as it is: a root-owned
        // note there is one its owner could not remove.
        let store_owner = self.notes.parent().and_then(|p| std::fs::metadata(p).ok());
        if airlock_jail::identity::effective_root() && store_owner.is_some_and(|m| m.uid() != 0) {
            return Ok(());
        }
        std::fs::create_dir_all(&self.notes).map_err(ImageError::io("create notes dir"))?;
        write_atomic(&self.notes.join(name), bytes)
    }
}

fn note_name(key: &str) -> Option<String> {
    let ok = !key.is_empty()
        && key.len() <= 128
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    ok.then(|| format!("{key}.json"))
}

/// Writes `bytes` to `path` through a temporary file and a rename.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut f =
        std::fs::File::create(&tmp).map_err(ImageError::io(format!("create {}", tmp.display())))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(ImageError::io(format!("write {}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(ImageError::io(format!("rename to {}", path.display())))
}

/// Whether `name` may name an image: 1 to 128 characters of `[A-Za-z0-9._:-]`, starting with a
/// letter or digit.
#[must_use]
pub fn valid_name(name: &str) -> bool {
    name.len() <= 128
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// A name for an image imported from `path` when none is given: its file name without the
/// archive extensions, with other characters replaced by `-`.
#[must_use]
pub fn default_name(path: &Path) -> String {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut stem = file.as_str();
    for ext in [".gz", ".tgz", ".tar", ".oci", ".docker"] {
        stem = stem.strip_suffix(ext).unwrap_or(stem);
    }
    let mut name: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    name = name
        .trim_start_matches(['.', '_', '-'])
        .chars()
        .take(128)
        .collect();
    if name.is_empty() {
        "image".into()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_derived() {
        for good in ["pandas", "py3.12:slim", "a_b-c"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in ["", ".hidden", "a/b", "../x", "-x", &"a".repeat(129)] {
            assert!(!valid_name(bad), "{bad}");
        }
        assert_eq!(default_name(Path::new("/x/pandas.oci.tar.gz")), "pandas");
        assert_eq!(default_name(Path::new("/x/my root")), "my-root");
        assert_eq!(default_name(Path::new("/")), "image");
        assert!(valid_name(&default_name(Path::new("/x/..weird name!.tar"))));
    }
}
