//! What a sandbox's file methods moved, counted against its spec's transfer limits over the
//! sandbox's life: `files_in` for `files.write`, `files_out` for `files.read` (per-file sizes are
//! checked by the file operations themselves). A call that would pass `max_total_bytes` or
//! `max_files` is refused before it moves anything.
use std::sync::{Mutex, PoisonError};

use airlock_policy::{Direction, TransferLimits};
use airlock_protocol::{ErrorCode, ErrorObject};
use serde_json::json;

#[derive(Debug, Default, Clone, Copy)]
struct Used {
    bytes: u64,
    files: u64,
}

/// One sandbox's transfer counts, both directions.
#[derive(Debug, Default)]
pub struct TransferBudget {
    used: Mutex<[Used; 2]>,
}

fn slot(d: Direction) -> usize {
    usize::from(d == Direction::FilesOut)
}

impl TransferBudget {
    /// Counts `bytes` (and one more file when `new_file`) in direction `d` under `limits`, or
    /// refuses with the cap it would pass.
    pub fn charge(
        &self,
        d: Direction,
        limits: &TransferLimits,
        bytes: u64,
        new_file: bool,
    ) -> Result<(), ErrorObject> {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        let u = &mut used[slot(d)];
        let bytes_after = u.bytes.saturating_add(bytes);
        let files_after = u.files.saturating_add(u64::from(new_file));
        let over = if bytes_after > limits.max_total_bytes {
            Some(("max_total_bytes", bytes_after, limits.max_total_bytes))
        } else if files_after > limits.max_files {
            Some(("max_files", files_after, limits.max_files))
        } else {
            None
        };
        if let Some((cap, value, limit)) = over {
            let dir = if d == Direction::FilesIn {
                "files_in"
            } else {
                "files_out"
            };
            return Err(ErrorObject::new(
                ErrorCode::FileRefused,
                format!(
                    "{dir}.{cap}: this sandbox's transfers would reach {value}, over its limit of \
                     {limit}"
                ),
            )
            .with_data(json!({ "kind": "SandboxTransferCapExceeded" })));
        }
        *u = Used {
            bytes: bytes_after,
            files: files_after,
        };
        Ok(())
    }

    /// Gives back a charge whose operation failed.
    pub fn refund(&self, d: Direction, bytes: u64, new_file: bool) {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        let u = &mut used[slot(d)];
        u.bytes = u.bytes.saturating_sub(bytes);
        u.files = u.files.saturating_sub(u64::from(new_file));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_and_file_counts_are_caps_over_the_sandbox_s_life() {
        let b = TransferBudget::default();
        let l = TransferLimits {
            max_bytes_per_file: 100,
            max_total_bytes: 150,
            max_files: 2,
        };
        b.charge(Direction::FilesIn, &l, 100, true).unwrap();
        assert!(b.charge(Direction::FilesIn, &l, 60, false).is_err());
        b.charge(Direction::FilesIn, &l, 50, true).unwrap();
        assert!(b.charge(Direction::FilesIn, &l, 0, true).is_err());
        // The other direction has its own count.
        b.charge(Direction::FilesOut, &l, 100, true).unwrap();
        b.refund(Direction::FilesIn, 50, true);
        b.charge(Direction::FilesIn, &l, 50, true).unwrap();
    }
}
