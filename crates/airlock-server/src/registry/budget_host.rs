//! The default admission budget: the host's memory (`MemTotal` of /proc/meminfo) less a
//! headroom for the host itself and the server — the larger of 1 GiB and a tenth.
use std::io::Read;

const MIB: u64 = 1024 * 1024;
/// The least headroom left to the host.
pub const MIN_HEADROOM: u64 = 1024 * MIB;
/// /proc/meminfo is about 1.5 KiB; a read stops here whatever the file claims.
const MAX_MEMINFO_BYTES: u64 = 64 * 1024;

/// Why the host's memory could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostMemoryError {
    /// /proc/meminfo could not be read.
    #[error("reading /proc/meminfo: {0}")]
    Read(#[from] std::io::Error),
    /// It had no readable `MemTotal` line.
    #[error("/proc/meminfo has no readable MemTotal line")]
    NoMemTotal,
}

/// `MemTotal` in `meminfo` text, bytes.
#[must_use]
pub fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The budget for a host of `total` bytes: `total` less the larger of 1 GiB and 10 %.
#[must_use]
pub fn budget_for(total: u64) -> u64 {
    total.saturating_sub(MIN_HEADROOM.max(total / 10))
}

/// The default budget of this host, bytes.
pub fn host_budget() -> Result<u64, HostMemoryError> {
    let mut text = String::new();
    std::fs::File::open("/proc/meminfo")?
        .take(MAX_MEMINFO_BYTES)
        .read_to_string(&mut text)?;
    mem_total(&text)
        .map(budget_for)
        .ok_or(HostMemoryError::NoMemTotal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_headroom_is_the_larger_of_a_gib_and_a_tenth() {
        let gib = 1024 * MIB;
        assert_eq!(budget_for(24 * gib), 24 * gib - 24 * gib / 10);
        assert_eq!(budget_for(4 * gib), 3 * gib);
        assert_eq!(budget_for(512 * MIB), 0);
    }

    #[test]
    fn mem_total_is_read_in_kib() {
        let text = "MemTotal:       24576000 kB\nMemFree:  1 kB\n";
        assert_eq!(mem_total(text), Some(24_576_000 * 1024));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(mem_total("MemTotal: lots kB\n"), None);
        assert!(host_budget().is_ok(), "this host's /proc/meminfo reads");
    }
}
