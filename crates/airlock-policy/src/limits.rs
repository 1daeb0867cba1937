//! Transfer ceilings: three caps per direction, all load-bearing.

use serde::{Deserialize, Serialize};

use crate::vocab::vocabulary;

/// Which way bytes cross the boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    /// Host to guest.
    FilesIn,
    /// Guest to host.
    FilesOut,
}

vocabulary!(Direction, "transfer direction", {
    FilesIn => "files_in",
    FilesOut => "files_out",
});

/// One field of [`TransferLimits`], for naming which cap a refusal is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TransferField {
    /// [`TransferLimits::max_bytes_per_file`].
    MaxBytesPerFile,
    /// [`TransferLimits::max_total_bytes`].
    MaxTotalBytes,
    /// [`TransferLimits::max_files`].
    MaxFiles,
}

vocabulary!(TransferField, "transfer limit", {
    MaxBytesPerFile => "max_bytes_per_file",
    MaxTotalBytes => "max_total_bytes",
    MaxFiles => "max_files",
});

/// Caps on one direction of file transfer. A byte ceiling alone does not bound a collection
/// (ten thousand files one byte under the per-file cap), so all three hold together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransferLimits {
    /// Largest single file, in bytes.
    pub max_bytes_per_file: u64,
    /// Largest sum over all files of one transfer, in bytes.
    pub max_total_bytes: u64,
    /// Most files in one transfer.
    pub max_files: u64,
}

impl TransferLimits {
    /// The default ceiling: 8 MiB per file, 32 MiB in total, 32 files.
    pub const DEFAULT: TransferLimits = TransferLimits {
        max_bytes_per_file: 8 * 1024 * 1024,
        max_total_bytes: 32 * 1024 * 1024,
        max_files: 32,
    };

    /// The value of one field.
    #[must_use]
    pub const fn get(&self, field: TransferField) -> u64 {
        match field {
            TransferField::MaxBytesPerFile => self.max_bytes_per_file,
            TransferField::MaxTotalBytes => self.max_total_bytes,
            TransferField::MaxFiles => self.max_files,
        }
    }

    /// These limits lowered, field by field, to `ceiling` (unchanged without one): what a
    /// workload that did not name its own limits asks for under a host's ceilings.
    #[must_use]
    pub fn within(self, ceiling: Option<&TransferLimits>) -> TransferLimits {
        ceiling.map_or(self, |c| self.min(c))
    }

    /// The first field (in [`TransferField::ALL`] order) where `self` asks above `ceiling`.
    #[must_use]
    pub fn first_excess(&self, ceiling: &TransferLimits) -> Option<TransferField> {
        TransferField::ALL
            .iter()
            .copied()
            .find(|f| self.get(*f) > ceiling.get(*f))
    }

    /// The field-wise minimum of two ceilings.
    #[must_use]
    pub fn min(&self, other: &TransferLimits) -> TransferLimits {
        TransferLimits {
            max_bytes_per_file: self.max_bytes_per_file.min(other.max_bytes_per_file),
            max_total_bytes: self.max_total_bytes.min(other.max_total_bytes),
            max_files: self.max_files.min(other.max_files),
        }
    }
}

impl Default for TransferLimits {
    fn default() -> Self {
        TransferLimits::DEFAULT
    }
}

/// A backend's (or host's) ceilings for both directions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxLimits {
    /// Ceiling on host-to-guest transfers.
    pub files_in: TransferLimits,
    /// Ceiling on guest-to-host transfers.
    pub files_out: TransferLimits,
}

impl SandboxLimits {
    /// The default ceilings in both directions: what an undeclared `limits` reads as.
    pub const DEFAULT: SandboxLimits = SandboxLimits {
        files_in: TransferLimits::DEFAULT,
        files_out: TransferLimits::DEFAULT,
    };

    /// The ceiling for one direction.
    #[must_use]
    pub const fn get(&self, direction: Direction) -> &TransferLimits {
        match direction {
            Direction::FilesIn => &self.files_in,
            Direction::FilesOut => &self.files_out,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_excess_names_the_first_field_over() {
        let ceiling = TransferLimits::DEFAULT;
        assert_eq!(ceiling.first_excess(&ceiling), None);
        let ask = TransferLimits {
            max_files: ceiling.max_files + 1,
            max_total_bytes: ceiling.max_total_bytes + 1,
            ..ceiling
        };
        assert_eq!(
            ask.first_excess(&ceiling),
            Some(TransferField::MaxTotalBytes)
        );
        let ask = TransferLimits {
            max_files: ceiling.max_files + 1,
            ..ceiling
        };
        assert_eq!(ask.first_excess(&ceiling), Some(TransferField::MaxFiles));
    }

    #[test]
    fn min_is_fieldwise() {
        let a = TransferLimits {
            max_bytes_per_file: 1,
            max_total_bytes: 100,
            max_files: 5,
        };
        let b = TransferLimits {
            max_bytes_per_file: 10,
            max_total_bytes: 50,
            max_files: 7,
        };
        assert_eq!(
            a.min(&b),
            TransferLimits {
                max_bytes_per_file: 1,
                max_total_bytes: 50,
                max_files: 5
            }
        );
    }
}
