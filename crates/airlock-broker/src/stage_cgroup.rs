//! Putting a run into its cgroup without making the run wait for it.
//!
//! On cgroup v1, writing a memory limit and the first write to `memory/cgroup.procs` each cost
//! milliseconds (the latter a grace period), more than the interpreter's own start-up. So the
//! stage starts at once and, in parallel, the broker creates the run's cgroup, writes its
//! limits, moves the stage into it (every later fork lands inside) and then moves whatever the
//! stage already forked (pid 1, if it won the race).
//!
//! **Invariant:** the broker sends `execute` (or `start`) only after [`settle`] saw the move
//! succeed; until then only trusted code runs in the tree (the stage, the bootstrap), which
//! creates no process besides pid 1. What that trusted code allocated before the move is charged
//! to the parent cgroup; the RSS watchdog counts it all the same.
use airlock_jail::cgroup::{CgroupLimits, RunCgroup};
use std::sync::atomic::{AtomicU64, Ordering};

use airlock_jail::procfs;

use crate::limits::Limits;
use tokio::task::JoinHandle;

/// The cgroup being set up.
pub(crate) type Attach = JoinHandle<Result<RunCgroup, String>>;

/// The cgroup a run gets (where the machine allows): its name and limits.
pub(crate) fn cgroup_for(stage_pid: i32, limits: &Limits) -> (String, CgroupLimits) {
    (
        format!("airlock-{stage_pid}-{}", std::process::id()),
        CgroupLimits {
            memory_bytes: Some(limits.memory_bytes),
            pids: Some(limits.max_processes),
            cpu_millicores: limits.cpu_millicores,
        },
    )
}

/// Create `name` with `limits` and move the stage's tree into it, off the run's critical path.
pub(crate) fn start(name: String, limits: CgroupLimits, stage_pid: i32) -> Attach {
    tokio::task::spawn_blocking(move || {
        let cg = RunCgroup::create(&name, &limits).map_err(|e| e.to_string())?;
        cg.add_process(stage_pid).map_err(|e| e.to_string())?;
        // A fork is serialised against the move: it finished before it (listed here) or lands
        // inside after it.
        for pid in procfs::descendants(stage_pid) {
            move_in(&cg, pid)?;
        }
        Ok(cg)
    })
}

/// The cgroups of a run whose stage enters them by itself as it is born (a zygote's child:
/// `CLONE_INTO_CGROUP` and a `0` written to each v1 `tasks` file, neither of which takes the
/// kernel's migration lock — a `cgroup.procs` write waits for an RCU grace period, 6–15 ms
/// here, longer than the child's whole set-up). Created before the stage (mkdir and limits:
/// well under a millisecond).
pub(crate) fn create(limits: &Limits) -> Result<RunCgroup, String> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let (_, cg_limits) = cgroup_for(0, limits);
    let name = format!("airlock-z{n}-{}", std::process::id());
    RunCgroup::create(&name, &cg_limits).map_err(|e| e.to_string())
}

/// [`start`] for cgroups made by [`create`]: checks that the stage and everything it forked
/// are in them, and moves whatever is not (a child that could not enter) the slow way.
pub(crate) fn adopt(made: Result<RunCgroup, String>, stage_pid: i32) -> Attach {
    tokio::task::spawn_blocking(move || {
        let cg = made?;
        let tree = std::iter::once(stage_pid).chain(procfs::descendants(stage_pid));
        for pid in tree {
            if !cg.holds(pid) {
                move_in(&cg, pid)?;
            }
        }
        Ok(cg)
    })
}

/// Move `pid` of the run's tree into `cg`. A process that is gone since it was listed (it
/// died and was reaped: the write fails with `ESRCH`) runs nothing any more and needs no move;
/// failing the whole set-up for it would drop the cgroup, and with it the record of why it died
/// (the memory cgroup's OOM kill of a pid 1 still starting, which `conclude.rs` reads).
fn move_in(cg: &RunCgroup, pid: i32) -> Result<(), String> {
    match cg.add_process(pid) {
        Ok(()) => Ok(()),
        Err(_) if procfs::stat_fields(pid).is_none() => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// Wait for the cgroup (once). On failure the run goes on without it — memory and processes
/// have rootless stand-ins — unless it asked for a cpu quota, which has none: then the refusal
/// is returned.
pub(crate) async fn settle(
    attach: &mut Option<Attach>,
    cgroup: &mut Option<RunCgroup>,
    enforcement: &mut Vec<&'static str>,
    cpu_requested: bool,
) -> Result<(), String> {
    let Some(handle) = attach.take() else {
        return Ok(());
    };
    let outcome = match handle.await {
        Ok(r) => r,
        Err(e) => Err(format!("cgroup set-up task failed: {e}")),
    };
    match outcome {
        Ok(cg) => {
            *cgroup = Some(cg);
            enforcement.push("cgroup");
            Ok(())
        }
        // One sentence: why the cgroups are unusable is doctor's to explain, not the run's.
        Err(why) if cpu_requested => {
            tracing::debug!(%why, "no usable cgroup for a cpu quota");
            Err(
                "--cpus needs a cpu cgroup this broker can write, and it has none: run it as \
                 root or delegate a cgroup subtree to its user, as `airlock doctor` explains"
                    .to_string(),
            )
        }
        Err(_) => Ok(()),
    }
}

/// For a run that ended before [`settle`]: wait for the set-up to finish, then kill whatever
/// is in the cgroup and remove it (on drop).
pub(crate) async fn abandon(attach: Option<Attach>) {
    if let Some(handle) = attach {
        if let Ok(Ok(cg)) = handle.await {
            let _ = cg.kill_all();
        }
    }
}
