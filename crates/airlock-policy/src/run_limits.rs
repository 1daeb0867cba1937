//! The one table of default run limits.
//!
//! [`RunLimits::DEFAULT`] is what a run gets when nothing else (a flag, a request's `limits`,
//! a `policy.toml` key) says otherwise, wherever the run comes from: the broker's
//! `Limits::default()`, the policy file's unset `[limits]` keys, the CLI's `run`/`exec` and
//! `serve` flags, the server's defaults and `airlock mcp` all read it. `docs/policy.md` states
//! the same numbers in its "Default run limits" table, held to this one by a test.

/// Per-run resource limits the broker enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// Wall-clock bound on one run, in seconds (1..=86400).
    pub timeout_seconds: u64,
    /// Memory ceiling, in MiB (16..=1048576).
    pub memory_mb: u64,
    /// Most host-tool calls one run may make, refusals included (0..=100000).
    pub max_tool_calls: u64,
    /// Captured stdout/stderr cap, per stream, in bytes (1..=16777216).
    pub max_output_bytes: u64,
    /// The sandbox's writable filesystem (/work, /tmp, /dev/shm together), in MiB (1..=1048576).
    pub disk_mb: u64,
}

impl RunLimits {
    /// 30 s, 512 MiB, 128 tool calls, 64 KiB of output per stream, 1 GiB of disk.
    pub const DEFAULT: RunLimits = RunLimits {
        timeout_seconds: 30,
        memory_mb: 512,
        max_tool_calls: 128,
        max_output_bytes: 64 * 1024,
        disk_mb: 1024,
    };

    /// Every limit with its `policy.toml` key, in the table's order.
    #[must_use]
    pub fn by_key(&self) -> [(&'static str, u64); 5] {
        [
            ("timeout_seconds", self.timeout_seconds),
            ("memory_mb", self.memory_mb),
            ("max_tool_calls", self.max_tool_calls),
            ("max_output_bytes", self.max_output_bytes),
            ("disk_mb", self.disk_mb),
        ]
    }
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::RunLimits;

    const POLICY_MD: &str =
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/policy.md"));

    /// The rows (`| `key` | value | ...`) of docs/policy.md's "Default run limits" table.
    fn documented_defaults() -> Vec<(String, u64)> {
        let section = POLICY_MD
            .split("\n## ")
            .find(|s| s.starts_with("Default run limits"))
            .expect("docs/policy.md has a \"## Default run limits\" section");
        section
            .lines()
            .filter_map(|line| {
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                let key = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
                let value = cells.get(2)?.replace('_', "");
                Some((
                    key.to_owned(),
                    value.parse().expect("a default is an integer"),
                ))
            })
            .collect()
    }

    #[test]
    fn the_docs_state_the_default_table() {
        let table: Vec<(String, u64)> = RunLimits::DEFAULT
            .by_key()
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect();
        assert_eq!(documented_defaults(), table);
    }
}
