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
        // The tree first, so the stage lives to reap pid 1 (a stage the cgroup killed at the
        // same time would leave pid 1 a zombie under the host's init); from the second round
        // on, the cgroup too, for anything the tree no longer shows.
        if let Some(cg) = cgroup.filter(|_| round > 0) {
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

/// Remove the cgroup of a run whose stage is reaped, without making the result wait for it.
///
/// Nothing of the run is alive (see the module's note); `kill_all` still runs here, before the
/// result, and returns only once every cgroup is empty. Only the `rmdir`s, ~0.1–0.3 ms on cgroup
/// v1, go to the blocking pool. A task the runtime drops unrun at shutdown drops the cgroup
/// there, and its `Drop` removes it, so none is left behind either way.
pub(crate) fn release(cgroup: Option<RunCgroup>) {
    if let Some(cg) = cgroup {
        let _ = cg.kill_all();
        drop(tokio::task::spawn_blocking(move || drop(cg)));
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Instant;

    use airlock_jail::cgroup::CgroupLimits;

    use super::*;

    /// A cgroup of this process, or None (said) where this user may create none.
    fn cgroup(tag: &str) -> Option<RunCgroup> {
        let name = format!("test-release-{tag}-{}", std::process::id());
        match RunCgroup::create(&name, &CgroupLimits::default()) {
            Ok(cg) => Some(cg),
            Err(e) => {
                println!("SKIP: no cgroup this user may create here: {e}");
                None
            }
        }
    }

    fn left(paths: &[PathBuf]) -> Vec<&PathBuf> {
        paths.iter().filter(|p| p.exists()).collect()
    }

    #[test]
    fn a_released_cgroup_is_removed_soon_after() {
        let Some(cg) = cgroup("soon") else { return };
        let paths = cg.paths();
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async { release(Some(cg)) });
        let until = Instant::now() + Duration::from_secs(2);
        while !left(&paths).is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(left(&paths).is_empty(), "{:?}", left(&paths));
    }

    #[test]
    fn a_release_as_the_runtime_shuts_down_leaves_nothing() {
        let Some(cg) = cgroup("shutdown") else { return };
        let paths = cg.paths();
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async { release(Some(cg)) });
        // Run or dropped unrun, the removal is over when the runtime is.
        drop(rt);
        assert!(left(&paths).is_empty(), "{:?}", left(&paths));
    }
}
