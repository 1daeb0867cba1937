//! Bounds on what one snapshot may hold, and the running budget a write or restore spends.
use crate::error::{Result, SnapshotError};

/// Largest manifest a snapshot carries (it is the caller's small JSON; read back whole).
pub const MAX_MANIFEST: usize = 256 << 10;

/// What one snapshot may hold. Exceeding any bound is an error ([`SnapshotError::TooLarge`]),
/// never a truncated snapshot; a restore applies the same bounds to what it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Bytes of file content and symlink targets, uncompressed.
    pub max_bytes: u64,
    /// Names met in the tree (directories, files, links, and skipped special files).
    pub max_entries: u64,
    /// Directories nested below a top-level directory (`work/a/b` is depth 2).
    pub max_depth: u32,
    /// Bytes of kernel state, uncompressed.
    pub max_kernel_bytes: u64,
}

impl Default for Bounds {
    /// 16 GiB of files, a million entries, depth 256, 16 GiB of kernel state: far above a
    /// sandbox's tmpfs and memory limits, so the sandbox's own limits are what bind.
    fn default() -> Bounds {
        Bounds {
            max_bytes: 16 << 30,
            max_entries: 1_000_000,
            max_depth: 256,
            max_kernel_bytes: 16 << 30,
        }
    }
}

/// What a write or restore has spent of its [`Bounds`].
#[derive(Debug)]
pub(crate) struct Budget {
    pub(crate) bounds: Bounds,
    pub(crate) bytes: u64,
    pub(crate) entries: u64,
}

impl Budget {
    pub(crate) fn new(bounds: Bounds) -> Budget {
        Budget {
            bounds,
            bytes: 0,
            entries: 0,
        }
    }

    /// Spends one entry.
    pub(crate) fn entry(&mut self) -> Result<()> {
        self.entries += 1;
        if self.entries > self.bounds.max_entries {
            return Err(too_large("entries", self.bounds.max_entries));
        }
        Ok(())
    }

    /// Spends `n` bytes of content.
    pub(crate) fn bytes(&mut self, n: u64) -> Result<()> {
        self.bytes = self.bytes.saturating_add(n);
        if self.bytes > self.bounds.max_bytes {
            return Err(too_large("bytes", self.bounds.max_bytes));
        }
        Ok(())
    }

    /// Checks a directory at `depth` below a top-level one.
    pub(crate) fn depth(&self, depth: usize) -> Result<()> {
        if u64::try_from(depth).unwrap_or(u64::MAX) > u64::from(self.bounds.max_depth) {
            return Err(too_large("depth", u64::from(self.bounds.max_depth)));
        }
        Ok(())
    }

    /// How many more names a directory listing may return before the bound is exceeded (one
    /// more than that, so that exceeding it is seen).
    pub(crate) fn listing_limit(&self) -> usize {
        let left = self.bounds.max_entries.saturating_sub(self.entries);
        usize::try_from(left.saturating_add(1)).unwrap_or(usize::MAX)
    }
}

/// The error for a bound exceeded.
pub(crate) fn too_large(what: &'static str, limit: u64) -> SnapshotError {
    SnapshotError::TooLarge { what, limit }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_refuses_past_each_bound() {
        let bounds = Bounds {
            max_bytes: 10,
            max_entries: 2,
            max_depth: 1,
            max_kernel_bytes: 0,
        };
        let mut b = Budget::new(bounds);
        b.entry().unwrap();
        b.entry().unwrap();
        assert!(matches!(
            b.entry(),
            Err(SnapshotError::TooLarge {
                what: "entries",
                ..
            })
        ));
        b.bytes(10).unwrap();
        assert!(matches!(
            b.bytes(1),
            Err(SnapshotError::TooLarge { what: "bytes", .. })
        ));
        b.depth(1).unwrap();
        assert!(matches!(
            b.depth(2),
            Err(SnapshotError::TooLarge { what: "depth", .. })
        ));
    }
}
