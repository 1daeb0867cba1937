//! Putting a run into its cgroup without making the run wait for it.
//!
//! On cgroup v1 the first write to `memory/cgroup.procs` costs a grace period (~15 ms here),
//! more than the interpreter's own start-up. So the cgroup is created (and its limits written)
//! before the stage is told anything, the stage starts at once, and the move happens while the
//! guest interpreter starts: once pid 1 exists, pid 1 and the stage are written to the
//! cgroup. **Invariant:** the broker sends `execute` (or `start`) only after the move
//! succeeded, and until then only trusted code runs in the tree (the stage, the bootstrap),
//! which creates no process besides pid 1. What pid 1 allocated before the move (the bare
//! interpreter) is charged to the parent cgroup; the RSS watchdog counts it all the same.
use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_jail::cgroup::RunCgroup;
use airlock_jail::procfs;
use tokio::task::JoinHandle;

/// How long the stage may take to fork pid 1.
const PID1_WAIT: Duration = Duration::from_secs(10);
/// How often to look for pid 1 meanwhile.
const POLL: Duration = Duration::from_micros(200);

/// The move in flight.
pub(crate) type Attach = JoinHandle<Result<(), String>>;

/// Start moving the stage's tree into `cg` as soon as pid 1 exists.
pub(crate) fn start(cg: Arc<RunCgroup>, stage_pid: i32) -> Attach {
    tokio::task::spawn_blocking(move || {
        let until = Instant::now() + PID1_WAIT;
        loop {
            let tree = procfs::descendants(stage_pid);
            if let Some(&pid1) = tree.first() {
                if tree.len() != 1 {
                    return Err(format!(
                        "the stage has {} processes, expected 1",
                        tree.len()
                    ));
                }
                cg.add_process(pid1).map_err(|e| e.to_string())?;
                cg.add_process(stage_pid).map_err(|e| e.to_string())?;
                return Ok(());
            }
            if !procfs::process_exists(stage_pid) {
                return Err("the executor exited before it forked".into());
            }
            if Instant::now() > until {
                return Err(format!("the executor did not fork within {PID1_WAIT:?}"));
            }
            std::thread::sleep(POLL);
        }
    })
}

/// Wait for the move (once). On failure the run goes on without the cgroup — memory and
/// processes have rootless stand-ins — unless it asked for a cpu quota, which has none: then
/// the refusal is returned.
pub(crate) async fn settle(
    attach: &mut Option<Attach>,
    cgroup: &mut Option<Arc<RunCgroup>>,
    enforcement: &mut Vec<&'static str>,
    cpu_requested: bool,
) -> Result<(), String> {
    let Some(handle) = attach.take() else {
        return Ok(());
    };
    let outcome = match handle.await {
        Ok(r) => r,
        Err(e) => Err(format!("cgroup attach task failed: {e}")),
    };
    match outcome {
        Ok(()) => Ok(()),
        Err(why) if cpu_requested => Err(format!(
            "a cpu quota was requested but the run could not be put in its cpu cgroup ({why})"
        )),
        Err(_) => {
            *cgroup = None;
            enforcement.retain(|e| *e != "cgroup");
            Ok(())
        }
    }
}
