//! Reporting the disk bound. The bound itself is the kernel's: everything a sandbox can write
//! lives on one tmpfs with `size=` and `nr_inodes=` (see `airlock_executor::assemble`), so
//! fallocate bursts, unlinked-but-open files and unreadable directories all count, and nothing
//! can go past it. This watch only *reports*: when the filesystem fills during a run (it was not
//! already full when the run started), the run ends as `disk_limit`, like the RSS watchdog does
//! for memory, and a run that exits before the next look is reported the same (one more look
//! at its end). It reads one `fstatfs(2)` per period on the async runtime; nothing blocks.
use std::sync::Arc;
use std::time::Duration;

use airlock_jail::mounts::Usage;
use tokio::sync::oneshot;

use crate::sandbox_fs::SandboxFs;

/// How often the filesystem's usage is read.
const PERIOD: Duration = Duration::from_millis(20);

/// Why a run filled its sandbox's filesystem, if it did (usage now against usage at start).
pub fn filled(start: Option<Usage>, now: Option<Usage>) -> Option<String> {
    let now = now?;
    if !now.full() {
        return None;
    }
    let grew = start.is_none_or(|s| {
        now.bytes_used > s.bytes_used || now.inodes_used > s.inodes_used || !s.full()
    });
    grew.then(|| {
        if now.inodes_used >= now.inodes_total {
            format!(
                "the run used all {} entries of its sandbox's filesystem",
                now.inodes_total
            )
        } else {
            format!(
                "the run filled its sandbox's filesystem ({} MiB)",
                now.bytes_total >> 20
            )
        }
    })
}

/// A watch on a sandbox's filesystem for one run: `over` yields a message when the filesystem
/// fills; `filled_now` asks once more, at the end (a program that fills its filesystem and exits
/// within one period is reported the same as one the watch caught).
pub struct DiskWatch {
    /// Yields why, once, when the filesystem fills.
    pub over: oneshot::Receiver<String>,
    start: Option<Usage>,
    sandbox: Arc<SandboxFs>,
}

impl DiskWatch {
    /// Why the run filled its sandbox's filesystem, read now.
    pub fn filled_now(&self) -> Option<String> {
        filled(self.start, self.sandbox.usage())
    }
}

/// Watch the sandbox's filesystem until `over` is dropped.
pub fn watch(sandbox: Arc<SandboxFs>) -> DiskWatch {
    let (mut tx, over) = oneshot::channel();
    let start = sandbox.usage();
    let watched = Arc::clone(&sandbox);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(PERIOD);
        loop {
            tokio::select! {
                () = tx.closed() => return,
                _ = tick.tick() => {
                    if let Some(why) = filled(start, watched.usage()) {
                        let _ = tx.send(why);
                        return;
                    }
                }
            }
        }
    });
    DiskWatch {
        over,
        start,
        sandbox,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(bytes: u64, inodes: u64) -> Usage {
        Usage {
            bytes_used: bytes,
            bytes_total: 100,
            inodes_used: inodes,
            inodes_total: 10,
        }
    }

    #[test]
    fn only_a_filesystem_that_fills_during_the_run_is_reported() {
        assert_eq!(filled(Some(u(0, 1)), Some(u(50, 2))), None);
        assert!(filled(Some(u(0, 1)), Some(u(100, 2))).is_some_and(|m| m.contains("filled")));
        assert!(filled(Some(u(0, 1)), Some(u(5, 10))).is_some_and(|m| m.contains("entries")));
        assert_eq!(
            filled(Some(u(100, 2)), Some(u(100, 2))),
            None,
            "full before, no growth"
        );
        assert_eq!(filled(None, None), None);
    }
}
