//! Watching a stopped kernel between cells. A stopped process can be resumed by a signal it
//! arranged for itself (a POSIX timer delivering `SIGCONT`, `F_SETSIG`, ...), so the stop is
//! not trusted: while no cell runs, the guard checks every [`PERIOD`] that every thread is
//! still stopped and the tree within its memory ceiling, and kills the kernel the first time
//! either fails. The next cell then starts a fresh kernel and says so (`kernel_restarted`).
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_jail::{process, procfs};
use tokio::task::JoinHandle;

use super::procs::Procs;

/// How often a stopped kernel is looked at.
pub const PERIOD: Duration = Duration::from_millis(20);
const SIGKILL: i32 = 9;

/// A running guard, and why it killed the kernel (if it did).
pub(super) struct Guard {
    task: JoinHandle<()>,
    tripped: Arc<Mutex<Option<String>>>,
}

impl Guard {
    /// Watch the kernel `procs` until [`Guard::stop`].
    pub(super) fn start(procs: Procs, memory_bytes: u64) -> Guard {
        let tripped = Arc::new(Mutex::new(None));
        let flag = Arc::clone(&tripped);
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(PERIOD).await;
                if let Some(why) = violation(procs, memory_bytes) {
                    for pid in procs.pids() {
                        let _ = process::kill(pid, SIGKILL);
                    }
                    *flag
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why);
                    return;
                }
            }
        });
        Guard { task, tripped }
    }

    /// Stop watching (before the broker resumes the kernel); why it killed the kernel, if so.
    pub(super) async fn stop(self) -> Option<String> {
        self.task.abort();
        let _ = self.task.await;
        self.tripped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

/// Why a kernel that should be stopped must end: it runs, or holds more than its ceiling.
pub(super) fn violation(procs: Procs, memory_bytes: u64) -> Option<String> {
    let tree = procs.pids();
    if !tree.iter().all(|&pid| procfs::all_threads_stopped(pid)) {
        return Some("the kernel resumed itself between cells".into());
    }
    let rss = procs.rss();
    (rss > memory_bytes).then(|| {
        format!(
            "the kernel held {} MiB between cells, over its {} MiB limit",
            rss >> 20,
            memory_bytes >> 20
        )
    })
}
