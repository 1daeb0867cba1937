//! Run cgroups that a broker which is gone left behind: a SIGKILLed server cannot remove its
//! runs' cgroups, so a server that starts sweeps them from under its own cgroup (where every
//! broker started there made them) — what is still in one is killed, then it is removed.
//!
//! A run cgroup's name ends with the pid of the broker that made it
//! (`airlock-airlock-<run>-<broker pid>`); one whose broker is alive (this one, or another
//! server sharing the cgroup) is never touched. A dead broker's pid taken by a new process
//! leaves its cgroups for a later sweep: a sweep errs towards leaving one behind.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cgroup::{own_dirs, RunCgroup};

/// What a sweep did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Sweep {
    /// Orphaned run cgroups removed (one per run, across its hierarchies).
    pub removed: usize,
    /// Directories that could not be removed.
    pub left: Vec<PathBuf>,
}

/// The pid of the broker that made the run cgroup called `name`, if it is one.
fn maker(name: &str) -> Option<i32> {
    let run = name.strip_prefix("airlock-airlock-")?;
    let (_, pid) = run.rsplit_once('-')?;
    pid.parse().ok().filter(|p| *p > 0)
}

fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The run cgroups of dead brokers under our own cgroup, by name, across the hierarchies.
fn orphans() -> BTreeMap<String, [Option<PathBuf>; 4]> {
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let mut found: BTreeMap<String, [Option<PathBuf>; 4]> = BTreeMap::new();
    for (slot, parent) in own_dirs().into_iter().enumerate() {
        let Some(entries) = parent.and_then(|p| std::fs::read_dir(p).ok()) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = maker(&name) else { continue };
            if pid == me || alive(pid) || !entry.path().is_dir() {
                continue;
            }
            found.entry(name).or_default()[slot] = Some(entry.path());
        }
    }
    found
}

/// Kill what is left in every run cgroup of a broker that is gone, and remove them.
pub fn sweep_orphans() -> Sweep {
    let mut sweep = Sweep::default();
    for dirs in orphans().into_values() {
        let cgroup = RunCgroup::adopt(dirs);
        let paths = cgroup.paths();
        drop(cgroup);
        let left: Vec<PathBuf> = paths.into_iter().filter(|p| p.exists()).collect();
        if left.is_empty() {
            sweep.removed += 1;
        }
        sweep.left.extend(left);
    }
    sweep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_run_cgroup_names_name_their_maker() {
        assert_eq!(maker("airlock-airlock-123-456"), Some(456));
        assert_eq!(maker("airlock-airlock-z7-456"), Some(456));
        assert_eq!(maker("airlock-probe-456"), None);
        assert_eq!(maker("airlock-airlock-123-"), None);
        assert_eq!(maker("airlock-airlock-123-x"), None);
        assert_eq!(maker("airlock-airlock-123-0"), None);
        assert_eq!(maker("user.slice"), None);
    }

    /// A run cgroup named for a broker that is gone is removed; one of a live broker stays.
    #[test]
    fn a_dead_brokers_run_cgroup_is_removed_and_a_live_ones_stays() {
        let dead = dead_pid();
        let me = std::process::id();
        let orphan = format!("test-sweep-{me}-{dead}");
        let live = format!("test-sweep-{me}-{me}");
        let made: Vec<RunCgroup> = [&orphan, &live]
            .iter()
            .filter_map(|n| RunCgroup::create(&format!("airlock-{n}"), &Default::default()).ok())
            .collect();
        if made.len() < 2 {
            println!("SKIP: no cgroup this user may create here");
            return;
        }
        let paths: Vec<Vec<PathBuf>> = made.iter().map(RunCgroup::paths).collect();
        // Forget them: as a SIGKILLed broker would (nothing removes them).
        made.into_iter().for_each(std::mem::forget);
        let sweep = sweep_orphans();
        assert!(sweep.removed >= 1, "{sweep:?}");
        assert!(paths[0].iter().all(|p| !p.exists()), "{:?}", paths[0]);
        assert!(
            paths[1].iter().all(|p| p.exists()),
            "the live broker's went"
        );
        drop(RunCgroup::adopt(slots(&paths[1])));
    }

    /// A pid no process has (pids are reused slowly; this one was just freed).
    fn dead_pid() -> i32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        child.wait().unwrap();
        pid
    }

    /// Paths of one run's cgroups back into [`own_dirs`]' order.
    fn slots(paths: &[PathBuf]) -> [Option<PathBuf>; 4] {
        let own = own_dirs();
        let mut out: [Option<PathBuf>; 4] = Default::default();
        for p in paths {
            if let Some(i) = own.iter().position(|o| o.as_deref() == p.parent()) {
                out[i] = Some(p.clone());
            }
        }
        out
    }
}
