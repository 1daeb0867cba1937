//! Memory of a process tree as PSS, the proportional set size of `/proc/PID/smaps_rollup`.
//!
//! A page mapped by n processes counts 1/n in each, so what sandboxes share — the interpreter
//! and its libraries, the `airlock` binary of the stages (and of the broker measuring them), a
//! template's pre-initialised heap — counts once across them, where summed `VmRSS` counts it
//! once per process. Every system's memory row is measured with this, its instances alive at
//! the same time. PSS also splits a page with any other process on the machine that maps it
//! (another interpreter of the same binary), so it varies a little with what else runs.
use std::io::Read;

use airlock_jail::procfs;

/// `smaps_rollup` is ~1 KiB; a bound for reading what a process's owner could not inflate.
const ROLLUP_LIMIT: u64 = 16 * 1024;

/// The PSS of one process in bytes: 0 for a vanished pid, a zombie or a kernel thread; an
/// error when its `smaps_rollup` may not be read (another user's process, without root).
pub fn pss_bytes(pid: i32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/smaps_rollup");
    let mut text = String::new();
    match std::fs::File::open(&path) {
        Ok(f) => f.take(ROLLUP_LIMIT).read_to_string(&mut text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(format!("{path}: {e}")),
    }
    .map_err(|e| format!("{path}: {e}"))?;
    Ok(kib(&text, "Pss:").saturating_mul(1024))
}

/// A `Field:  N kB` line of an `smaps_rollup`, in KiB (0 when absent).
fn kib(rollup: &str, field: &str) -> u64 {
    rollup
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The summed PSS of `root` and every descendant, in bytes.
pub fn tree_pss_bytes(root: i32) -> Result<u64, String> {
    procfs::descendants(root)
        .into_iter()
        .chain(std::iter::once(root))
        .try_fold(0u64, |sum, pid| Ok(sum.saturating_add(pss_bytes(pid)?)))
}

/// [`tree_pss_bytes`] in MiB.
pub fn tree_pss_mib(root: i32) -> Result<f64, String> {
    tree_pss_bytes(root).map(|b| b as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pss_line_is_read_and_anything_else_is_zero() {
        let rollup = "00400000-7fff [rollup]\nRss:                9476 kB\nPss:                7492 kB\nPss_Dirty:          3196 kB\n";
        assert_eq!(kib(rollup, "Pss:"), 7492);
        assert_eq!(kib("", "Pss:"), 0);
        assert_eq!(kib("Pss: lots kB\n", "Pss:"), 0);
    }

    #[test]
    fn this_process_has_a_pss_no_larger_than_its_rss() {
        let me = i32::try_from(std::process::id()).unwrap_or(0);
        assert!(tree_pss_bytes(me).unwrap_or(0) > 0);
        let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
        let (pss, rss) = (kib(&rollup, "Pss:"), kib(&rollup, "Rss:"));
        assert!(pss > 0 && pss <= rss, "{rollup}");
        assert_eq!(
            pss_bytes(i32::MAX).ok(),
            Some(0),
            "a pid that does not exist"
        );
    }
}
