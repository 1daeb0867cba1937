//! Ending a run so that nothing of it survives.
//!
//! pid 1 of the run's pid namespace is the stage's only child. Killing it makes the kernel kill
//! every other process of the namespace, and its exit completes only once they are gone; the
//! stage reaps it and exits the same way. So once the stage is reaped, the run is empty.
use std::process::ExitStatus;
use std::time::Duration;

use airlock_jail::cgroup::RunCgroup;
use airlock_jail::{process, procfs};

use super::stage_proc::StageProcess as Child;

const SIGTERM: i32 = 15;
const SIGKILL: i32 = 9;
/// How long one kill round waits for the stage to be reaped before trying again.
const KILL_ROUND: Duration = Duration::from_millis(100);
/// Kill rounds before giving up on the stage's cooperation and killing it directly.
const KILL_ROUNDS: u32 = 20;

/// Ask politely (SIGTERM to the stage, which forwards it to pid 1), then wait `grace`.
pub async fn terminate(child: &mut Child, grace: Duration) -> Option<ExitStatus> {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        let _ = process::kill(pid, SIGTERM);
    }
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(Ok(status)) => Some(status),
        _ => None,
    }
}

/// Kill the whole run and reap the stage. Returns the stage's exit status.
pub async fn kill(child: &mut Child, cgroup: Option<&RunCgroup>) -> Option<ExitStatus> {
    if let Ok(Some(status)) = child.try_wait() {
        return Some(status);
    }
    let Some(stage) = child.id().and_then(|p| i32::try_from(p).ok()) else {
        return child.wait().await.ok();
    };
    for round in 0..KILL_ROUNDS {
        if let Some(cg) = cgroup {
            let _ = cg.kill_all();
        }
        let tree = procfs::descendants(stage);
        if tree.is_empty() || round + 1 == KILL_ROUNDS {
            // Before fork (or a stage that stopped reaping): pid 1 dies by its death signal.
            let _ = child.start_kill();
        }
        for pid in tree {
            let _ = process::kill(pid, SIGKILL);
        }
        if let Ok(Ok(status)) = tokio::time::timeout(KILL_ROUND, child.wait()).await {
            return Some(status);
        }
    }
    child.wait().await.ok()
}
