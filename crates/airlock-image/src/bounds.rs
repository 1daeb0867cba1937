//! The bounds of one import: a hostile archive (a tar bomb, a gzip bomb, a million empty
//! files, paths nested thousands deep) stops at one of these with a clear error, before it
//! fills the disk or the inode table.
use crate::error::{ImageError, Result};

/// What one import may create and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Bytes read from all the (decompressed) tar streams of the import together, headers and
    /// contents: a gzip bomb stops here however small it is compressed.
    pub max_bytes: u64,
    /// Tar entries (files, directories, links, whiteouts) of all layers together.
    pub max_entries: u64,
    /// Path components of one entry.
    pub max_depth: usize,
    /// Bytes of one path component (the kernel's `NAME_MAX` is 255).
    pub max_name: usize,
    /// Bytes of one path or link target (the kernel's `PATH_MAX` is 4096).
    pub max_path: usize,
}

impl Default for Bounds {
    /// Generous for real images (a Debian root with pandas is about 25 000 entries and
    /// 400 MB), finite for hostile ones.
    fn default() -> Self {
        Bounds {
            max_bytes: 16 << 30,
            max_entries: 1_000_000,
            max_depth: 128,
            max_name: 255,
            max_path: 4096,
        }
    }
}

/// What is left of the bounds while an import runs.
#[derive(Debug)]
pub struct Budget {
    bounds: Bounds,
    bytes: u64,
    entries: u64,
}

impl Budget {
    /// A fresh budget.
    #[must_use]
    pub fn new(bounds: Bounds) -> Budget {
        Budget {
            bounds,
            bytes: 0,
            entries: 0,
        }
    }

    /// The bounds this budget counts against.
    #[must_use]
    pub fn bounds(&self) -> &Bounds {
        &self.bounds
    }

    /// Bytes counted so far.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Entries counted so far.
    #[must_use]
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Counts `n` bytes about to be read.
    pub fn take_bytes(&mut self, n: u64) -> Result<()> {
        self.bytes = self.bytes.saturating_add(n);
        if self.bytes > self.bounds.max_bytes {
            return Err(ImageError::Bound {
                what: "bytes",
                limit: self.bounds.max_bytes,
                fix: "raise it with --max-bytes if the image is really this large",
            });
        }
        Ok(())
    }

    /// Counts one entry.
    pub fn take_entry(&mut self) -> Result<()> {
        self.entries += 1;
        if self.entries > self.bounds.max_entries {
            return Err(ImageError::Bound {
                what: "entries",
                limit: self.bounds.max_entries,
                fix: "raise it with --max-entries if the image really holds this many files",
            });
        }
        Ok(())
    }

    /// Entries that may still be created (a removal walk is bounded by this too).
    #[must_use]
    pub fn entries_left(&self) -> usize {
        usize::try_from(self.bounds.max_entries.saturating_sub(self.entries)).unwrap_or(usize::MAX)
    }
}
