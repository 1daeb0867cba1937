//! Bounded walks over `/proc` for the broker: a process tree, its RSS, existence.
//!
//! A guest controls how many processes it has and (within its cgroup) its own `/proc` entries,
//! so every read is capped and the walk visits at most [`MAX_PROCESSES`] pids.

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;

use crate::sys::read_bounded;

/// The most processes a walk visits (well above any pids limit we set).
pub const MAX_PROCESSES: usize = 65_536;
/// A `children` file lists pids as text; 256 KiB holds ~30k of them per thread.
const CHILDREN_LIMIT: u64 = 256 * 1024;
/// `/proc/<pid>/status` is ~1.5 KiB; 16 KiB is ample.
const STATUS_LIMIT: u64 = 16 * 1024;
/// Threads per process we look at for children.
const MAX_TASKS: usize = 4096;

/// The direct children of `pid` (every thread's), at most what the bounded reads hold.
pub fn children_of(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let task_dir = PathBuf::from(format!("/proc/{pid}/task"));
    let Ok(entries) = std::fs::read_dir(&task_dir) else {
        return out;
    };
    for entry in entries.take(MAX_TASKS).flatten() {
        let path = entry.path().join("children");
        if let Ok(text) = read_bounded(&path, CHILDREN_LIMIT) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|s| s.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// Every descendant of `pid` (not `pid` itself), breadth first, at most [`MAX_PROCESSES`].
/// A process that is reparented mid-walk may be missed; cgroups are the exact tool.
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut queue = VecDeque::from([pid]);
    seen.insert(pid);
    while let Some(p) = queue.pop_front() {
        for c in children_of(p) {
            if out.len() >= MAX_PROCESSES {
                return out;
            }
            if seen.insert(c) {
                out.push(c);
                queue.push_back(c);
            }
        }
    }
    out
}

/// `VmRSS` of one process in bytes (0 for a zombie, a kernel thread, or a vanished pid).
pub fn rss_bytes(pid: i32) -> u64 {
    let Ok(status) = read_bounded(&PathBuf::from(format!("/proc/{pid}/status")), STATUS_LIMIT)
    else {
        return 0;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kb| kb.saturating_mul(1024))
}

/// The summed `VmRSS` of `root` and all its descendants. Shared pages count once per process,
/// so this over-estimates, which is the safe direction for a memory ceiling.
pub fn tree_rss_bytes(root: i32) -> u64 {
    descendants(root)
        .into_iter()
        .chain(std::iter::once(root))
        .map(rss_bytes)
        .fold(0u64, u64::saturating_add)
}

/// The wait status (`waitpid(2)`'s encoding) of `pid` once it has exited and until it is
/// reaped (a zombie's `exit_code`, field 52 of its `stat`); None while it runs or once gone.
pub fn exit_status(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace();
    if !matches!(fields.next()?, "Z" | "X") {
        return None;
    }
    fields.nth(48)?.parse().ok()
}

/// Whether `/proc/<pid>` exists (true for a zombie that has not been reaped yet).
pub fn process_exists(pid: i32) -> bool {
    pid > 0 && PathBuf::from(format!("/proc/{pid}")).exists()
}

/// True when every thread of `pid` is stopped (`T`, or `t` when traced) or the process is
/// gone; false while any thread still runs or sleeps.
pub fn all_threads_stopped(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    tasks.take(MAX_TASKS).flatten().all(|task| {
        let stat = read_bounded(&task.path().join("stat"), STATUS_LIMIT).unwrap_or_default();
        // The state follows the last ')' (the command name may contain parentheses).
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next());
        matches!(state, None | Some('T' | 't' | 'Z' | 'X'))
    })
}

/// The `status` fields of `pid` (`Name: value` lines), read bounded; empty once it is gone.
pub fn status_fields(pid: i32) -> std::collections::BTreeMap<String, String> {
    let path = PathBuf::from(format!("/proc/{pid}/status"));
    read_bounded(&path, STATUS_LIMIT)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}

/// How many threads `pid` runs.
pub fn thread_count(pid: i32) -> Option<u64> {
    status_fields(pid).get("Threads")?.parse().ok()
}

/// `pid`'s pid in each pid namespace it is in, outermost first (`NSpid`).
pub fn ns_pids(pid: i32) -> Vec<i64> {
    status_fields(pid)
        .get("NSpid")
        .map(|v| {
            v.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}
