//! Signalling a kernel's process tree: stopped between cells, continued for a cell or a save.
use std::time::Instant;

use airlock_jail::{process, procfs};

use super::procs::Procs;

const SIGSTOP: i32 = 19;
/// Continues a stopped kernel.
pub(super) const SIGCONT: i32 = 18;

/// How long a kernel gets to come to a stop after its answer.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Stop the kernel between cells and wait until every thread is stopped: no CPU, and no file
/// activity while the broker moves files. False if it would not stop in time.
pub(super) async fn stop_kernel(procs: Procs) -> bool {
    signal_kernel(procs, SIGSTOP);
    let until = Instant::now() + STOP_WAIT;
    loop {
        if procs.pids().into_iter().all(procfs::all_threads_stopped) {
            return true;
        }
        if Instant::now() > until {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}

/// Signal every process of the kernel (pid 1 of its namespace and anything under it).
pub(super) fn signal_kernel(procs: Procs, sig: i32) {
    for pid in procs.pids() {
        let _ = process::kill(pid, sig);
    }
}
