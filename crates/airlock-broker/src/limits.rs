//! Per-run limits and their defaults.
//!
//! The limits a user sets (timeout, memory, tool calls, output, disk) default to the one table,
//! [`RunLimits::DEFAULT`]; the broker's other bounds are its own.
use std::time::Duration;

use airlock_policy::RunLimits;

const MIB: u64 = 1024 * 1024;

/// Everything that bounds one run. Defaults suit an agent's quick scripts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget from spawn to result.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL when a run overruns.
    pub grace: Duration,
    /// Resident memory ceiling (RSS watchdog, and cgroup memory limit where available).
    pub memory_bytes: u64,
    /// Captured bytes kept per stream (stdout, stderr); the rest is counted and dropped.
    pub max_output_bytes: usize,
    /// Tool calls allowed per run (refused calls count too).
    pub max_tool_calls: u32,
    /// Largest tool response relayed into the sandbox, in JSON bytes.
    pub max_tool_response_bytes: usize,
    /// Largest file the guest may write (`RLIMIT_FSIZE`).
    pub max_file_bytes: u64,
    /// Open files per process (`RLIMIT_NOFILE`).
    pub max_open_files: u64,
    /// Processes in the run (cgroup pids.max, `RLIMIT_NPROC` inside its user namespace).
    pub max_processes: u64,
    /// Bytes the run may add to its work dir, all files together (the disk watchdog).
    pub max_disk_bytes: u64,
    /// Entries (files, directories, links) the run may add to its work dir.
    pub max_disk_entries: u64,
    /// CPU quota in thousandths of a core (cgroup cpu controller); None = no quota. A run that
    /// asks for a quota on a machine without a usable cpu cgroup is refused, not run unbounded.
    pub cpu_millicores: Option<u64>,
    /// Network egress: closed (no network at all, the default) or an allowlist served by the
    /// broker's proxy. Fixed when the executor starts, so a pooled executor never serves an
    /// allowlist run.
    pub egress: airlock_egress::EgressSpec,
}

impl Default for Limits {
    fn default() -> Self {
        let table = RunLimits::DEFAULT;
        Self {
            timeout: Duration::from_secs(table.timeout_seconds),
            grace: Duration::from_millis(500),
            memory_bytes: table.memory_mb * MIB,
            max_output_bytes: usize::try_from(table.max_output_bytes).unwrap_or(usize::MAX),
            max_tool_calls: u32::try_from(table.max_tool_calls).unwrap_or(u32::MAX),
            max_tool_response_bytes: 256 * 1024,
            max_file_bytes: 64 * MIB,
            max_open_files: 256,
            max_processes: 64,
            max_disk_bytes: table.disk_mb * MIB,
            max_disk_entries: 100_000,
            cpu_millicores: None,
            egress: airlock_egress::EgressSpec::Closed,
        }
    }
}

impl Limits {
    /// `RLIMIT_AS`: a kernel backstop well above the RSS ceiling, because a 64-bit interpreter
    /// (and numpy's thread pools) reserve far more address space than they ever touch.
    pub fn address_space_backstop(&self) -> u64 {
        self.memory_bytes
            .saturating_mul(2)
            .saturating_add(2 * 1024 * 1024 * 1024)
    }
}
