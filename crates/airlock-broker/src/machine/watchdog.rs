//! The memory bound of a machine without a cgroup (an unprivileged broker): every background
//! process of the sandbox together, and every orphan the init holds, measured as the runs'
//! RSS watchdog measures a run (summed `VmRSS`, shared pages counted once per process: an
//! over-estimate, the safe direction). Past the bound, every one of them is killed — the init
//! stays, so the sandbox goes on and new processes can start.
use std::sync::Weak;
use std::time::Duration;

use airlock_jail::{process, procfs};

use super::init::Machine;

/// How often the machine's memory is measured.
const PERIOD: Duration = Duration::from_millis(50);
const SIGKILL: i32 = 9;

/// Watch `machine` until it ends.
pub(crate) async fn watch(machine: Weak<Machine>) {
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(m) = machine.upgrade() else { return };
        let Some((init_stage, bound)) = m.watched() else {
            return;
        };
        let stages = m.live_stages();
        let checked = tokio::task::spawn_blocking(move || over_bound(init_stage, &stages, bound))
            .await
            .unwrap_or(None);
        if let Some(total) = checked {
            tracing::warn!(
                total,
                bound,
                "a sandbox's background processes passed its memory limit together: every one \
                 of them is killed"
            );
        }
    }
}

/// Measure; past `bound`, kill every process but the init and the stages (which then exit the
/// way their processes did). The total measured, when it was over.
fn over_bound(init_stage: i32, stages: &[i32], bound: u64) -> Option<u64> {
    let init = procfs::descendants(init_stage).first().copied()?;
    let mut pids = procfs::descendants(init);
    for stage in stages {
        pids.extend(procfs::descendants(*stage));
    }
    let total = pids
        .iter()
        .map(|p| procfs::rss_bytes(*p))
        .fold(0u64, u64::saturating_add);
    if total <= bound {
        return None;
    }
    for pid in pids {
        let _ = process::kill(pid, SIGKILL);
    }
    Some(total)
}
