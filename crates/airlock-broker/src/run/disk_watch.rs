//! The disk watchdog: how much a run has written into its work dir.
//!
//! `RLIMIT_FSIZE` caps one file; nothing else bounds the sum, so a run writing many files could
//! fill the host's disk. Every [`PERIOD`] a blocking task walks the work dir (never following a
//! link) and adds up allocated bytes and entries; growth past the run's limits (measured against
//! what was there when the run started, so a work dir handed in with data is not charged for it)
//! ends the run as `disk_limit`, like the RSS watchdog does for memory.
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::oneshot;

/// How often the work dir is measured.
const PERIOD: Duration = Duration::from_millis(250);

/// Allocated bytes and entries under a directory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes allocated on disk (`st_blocks` × 512: sparse files count what they use).
    pub bytes: u64,
    /// Files, directories and links below the root.
    pub entries: u64,
}

/// Measure `root`, stopping early once `entries` exceeds `stop_after` (the answer is then a
/// lower bound, which is all a limit check needs).
pub fn measure(root: &Path, stop_after: u64) -> Usage {
    let mut usage = Usage::default();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            usage.entries += 1;
            if usage.entries > stop_after {
                return usage;
            }
            // symlink_metadata: a link is counted, never followed.
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            usage.bytes = usage
                .bytes
                .saturating_add(meta.blocks().saturating_mul(512));
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    usage
}

/// Watch `work_dir` until the returned receiver is dropped; it yields a message when the run's
/// growth passes `max_bytes` or `max_entries`.
pub fn watch(work_dir: PathBuf, max_bytes: u64, max_entries: u64) -> oneshot::Receiver<String> {
    let (tx, rx) = oneshot::channel();
    tokio::task::spawn_blocking(move || {
        let base = measure(&work_dir, u64::MAX);
        loop {
            std::thread::sleep(PERIOD);
            if tx.is_closed() {
                return;
            }
            let now = measure(&work_dir, base.entries.saturating_add(max_entries));
            let grown_bytes = now.bytes.saturating_sub(base.bytes);
            let grown_entries = now.entries.saturating_sub(base.entries);
            let over = if grown_bytes > max_bytes {
                Some(format!(
                    "the run wrote more than {} MiB to its work dir",
                    max_bytes >> 20
                ))
            } else if grown_entries > max_entries {
                Some(format!(
                    "the run created more than {max_entries} entries in its work dir"
                ))
            } else {
                None
            };
            if let Some(why) = over {
                let _ = tx.send(why);
                return;
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_bytes_and_entries_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/f"), vec![1u8; 64 * 1024]).unwrap();
        std::os::unix::fs::symlink("/usr", dir.path().join("link")).unwrap();
        let u = measure(dir.path(), u64::MAX);
        assert_eq!(u.entries, 3);
        assert!(u.bytes >= 64 * 1024 && u.bytes < 1024 * 1024, "{u:?}");
        assert_eq!(measure(dir.path(), 1).entries, 2, "stops early");
    }
}
