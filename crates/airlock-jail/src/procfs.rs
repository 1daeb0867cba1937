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
    let fields = stat_fields(pid)?;
    if !matches!(fields.first()?.as_str(), "Z" | "X") {
        return None;
    }
    fields.get(52 - 3)?.parse().ok()
}

/// The fields of `/proc/<pid>/stat` after the command name, read bounded: field `n` of
/// proc(5) (counted from 1) is at index `n - 3`, the state first. None once it is gone.
pub fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = read_bounded(&PathBuf::from(format!("/proc/{pid}/stat")), STATUS_LIMIT).ok()?;
    // The name is in parentheses and may itself contain them: the fields follow the last ')'.
    let rest = stat.rsplit_once(')')?.1;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// One line of `/proc/<pid>/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First byte.
    pub start: u64,
    /// One past the last.
    pub end: u64,
    /// `rwxp` / `rwxs`, as printed.
    pub perms: [u8; 4],
    /// Offset into the file.
    pub offset: u64,
    /// The file's device, as `st_dev`.
    pub dev: u64,
    /// The file's inode (0 for anonymous memory).
    pub inode: u64,
    /// The path or pseudo-name (`[heap]`, `[vdso]`, ...), empty for anonymous memory.
    pub name: String,
}

/// Parse one line of `/proc/<pid>/maps` (a name keeps its inner spaces; the kernel escapes
/// newlines in it). None for a line that is not one.
pub fn maps_line(line: &str) -> Option<Mapping> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let perms: [u8; 4] = fields.next()?.as_bytes().try_into().ok()?;
    let offset = u64::from_str_radix(fields.next()?, 16).ok()?;
    let (major, minor) = fields.next()?.split_once(':')?;
    let inode = fields.next()?.parse().ok()?;
    let name = fields.next().unwrap_or("").trim_start().to_string();
    let dev = libc::makedev(
        u32::from_str_radix(major, 16).ok()?,
        u32::from_str_radix(minor, 16).ok()?,
    );
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        perms,
        offset,
        dev,
        inode,
        name,
    })
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

#[cfg(test)]
mod maps_tests {
    use super::*;

    #[test]
    fn a_maps_line_keeps_its_name_whole_and_its_device_as_st_dev() {
        let m = maps_line("7f00-7f02 r-xp 00001000 fe:01 4242   /work/a lib (x).so").unwrap();
        assert_eq!(
            (m.start, m.end, m.offset, m.inode),
            (0x7f00, 0x7f02, 0x1000, 4242)
        );
        assert_eq!(&m.perms, b"r-xp");
        assert_eq!(m.dev, libc::makedev(0xfe, 0x01));
        assert_eq!(m.name, "/work/a lib (x).so");
        let v = maps_line("ffff-10000 r--p 00000000 00:00 0 [vvar]").unwrap();
        assert_eq!((v.inode, v.name.as_str()), (0, "[vvar]"));
        assert_eq!(
            maps_line("5000-6000 rw-p 00000000 00:00 0").unwrap().name,
            ""
        );
        for bad in [
            "",
            "5000 rw-p 0 00:00 0",
            "5000-6000 rwp 00000000 00:00 0",
            "x-y rw-p 0 0:0 0",
        ] {
            assert!(maps_line(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn stat_fields_count_from_the_state() {
        // This thread's own stat (the process's names its main thread, which may be asleep):
        // it is running while it reads it.
        let me = std::fs::read_link("/proc/thread-self").unwrap();
        let tid: i32 = me.file_name().unwrap().to_str().unwrap().parse().unwrap();
        let own = stat_fields(tid).unwrap();
        assert_eq!(own[0], "R", "{own:?}");
        // Field 4 is the parent's pid.
        let parent = std::os::unix::process::parent_id().to_string();
        assert_eq!(own[4 - 3], parent);
    }
}
