//! What `airlock mcp` is configured with: the policy (run limits, floor, denied capabilities,
//! transfer ceilings) or the defaults, the sandbox scope, the executor binary, and the upstream
//! MCP servers to start.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use airlock_broker::{Limits, Runner, RunnerConfig};
use airlock_policy::{IsolationScope, Policy, RunLimits, TransferLimits};

use crate::error::McpError;
use crate::words;

/// Longest upstream name: it becomes a Python identifier and a prefix of every tool name.
pub const MAX_UPSTREAM_NAME: usize = 32;

/// One upstream MCP server airlock starts (outside the sandbox) and talks to over stdio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamSpec {
    /// The prefix of its tools inside the sandbox: `call_tool("NAME.tool", args)`.
    pub name: String,
    /// The program and its arguments (no shell).
    pub argv: Vec<String>,
}

impl UpstreamSpec {
    /// Parses `NAME=COMMAND ARGS`; NAME is a Python identifier (letters, digits, `_`, not
    /// starting with a digit), at most [`MAX_UPSTREAM_NAME`] bytes.
    pub fn parse(spec: &str) -> Result<UpstreamSpec, McpError> {
        let bad = |reason: &str| McpError::BadUpstreamSpec {
            spec: spec.chars().take(200).collect(),
            reason: reason.to_owned(),
        };
        let (name, command) = spec
            .split_once('=')
            .ok_or_else(|| bad("expected NAME='COMMAND ARGS'"))?;
        if !is_identifier(name) || name.len() > MAX_UPSTREAM_NAME {
            return Err(bad(
                "NAME must be letters, digits and _, not starting with a digit, at most 32 bytes",
            ));
        }
        let argv = words::split(command).map_err(|r| bad(&r))?;
        if argv.is_empty() {
            return Err(bad("the command is empty"));
        }
        Ok(UpstreamSpec {
            name: name.to_owned(),
            argv,
        })
    }
}

/// True for an ASCII Python-style identifier.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Everything the server needs.
#[derive(Debug, Clone)]
pub struct McpConfig {
    /// Limits of every run; `limits.timeout` is also the most a call's `timeout_s` may ask.
    pub limits: Limits,
    /// Caps on the files returned from the sandbox (declared outputs, `read_file`).
    pub outputs: TransferLimits,
    /// Caps on the files written into the sandbox (`write_file`).
    pub files_in: TransferLimits,
    /// The host policy the sandboxes are routed under (None: the machine's own rung is the
    /// floor, nothing is denied).
    pub policy: Option<Policy>,
    /// One sandbox for the whole MCP session (files persist across calls), or one per call.
    pub scope: IsolationScope,
    /// Serve the process tools (`start_process`, `process_output`, `stop_process`): the
    /// session sandbox requires `processes`. Conversation scope only.
    pub processes: bool,
    /// The `airlock` binary (its `__executor` subcommand is the stage).
    pub executor: PathBuf,
    /// The interpreter; `python3` on PATH when None (with an image: on the image's PATH, or a
    /// path inside it).
    pub python: Option<PathBuf>,
    /// The image every sandbox runs on (the host's system directories when None).
    pub image: Option<String>,
    /// The image store (`airlock image`'s default when None).
    pub image_dir: Option<PathBuf>,
    /// Upstream MCP servers.
    pub upstreams: Vec<UpstreamSpec>,
    /// Budget of one upstream tool call.
    pub upstream_call_timeout: Duration,
    /// Budget of an upstream's start-up (initialize + tools/list).
    pub upstream_start_timeout: Duration,
    /// The front door of every run of every session: its slots and fair queue (runs over
    /// the slots wait), and how a run's process comes to be (zygote, exec).
    pub runner: Arc<Runner>,
}

impl McpConfig {
    /// A configuration with the limits of `policy` (or the policy defaults when None).
    pub fn new(executor: PathBuf, policy: Option<&Policy>) -> McpConfig {
        let run = policy.map(|p| p.limits).unwrap_or(RunLimits::DEFAULT);
        let host = policy.map(|p| &p.host);
        McpConfig {
            limits: limits_from(&run),
            outputs: TransferLimits::DEFAULT
                .within(host.and_then(|h| h.files_out_ceiling.as_ref())),
            files_in: TransferLimits::DEFAULT
                .within(host.and_then(|h| h.files_in_ceiling.as_ref())),
            policy: policy.cloned(),
            scope: IsolationScope::Conversation,
            processes: false,
            executor,
            python: None,
            image: None,
            image_dir: None,
            upstreams: Vec::new(),
            upstream_call_timeout: Duration::from_secs(30),
            upstream_start_timeout: Duration::from_secs(20),
            runner: Arc::new(Runner::new(RunnerConfig::exec_per_run(2))),
        }
    }
}

/// The broker limits for a policy's run limits; everything else keeps the broker defaults.
pub fn limits_from(run: &RunLimits) -> Limits {
    Limits {
        timeout: Duration::from_secs(run.timeout_seconds),
        memory_bytes: run.memory_mb.saturating_mul(1024 * 1024),
        max_tool_calls: u32::try_from(run.max_tool_calls).unwrap_or(u32::MAX),
        max_output_bytes: usize::try_from(run.max_output_bytes).unwrap_or(usize::MAX),
        max_disk_bytes: run.disk_mb.saturating_mul(1024 * 1024),
        ..Limits::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_upstream_specs() {
        let s = UpstreamSpec::parse("weather=python3 'srv.py' --city x").unwrap();
        assert_eq!(s.name, "weather");
        assert_eq!(s.argv, vec!["python3", "srv.py", "--city", "x"]);
        for bad in [
            "noequals", "=cmd", "9x=cmd", "a.b=cmd", "a=", "a=  ", "a='x",
        ] {
            assert!(UpstreamSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn policy_limits_reach_the_broker_limits() {
        let policy =
            Policy::from_toml_str("[limits]\ntimeout_seconds = 7\nmax_tool_calls = 3\n").unwrap();
        let c = McpConfig::new("/x".into(), Some(&policy));
        assert_eq!(c.limits.timeout, Duration::from_secs(7));
        assert_eq!(c.limits.max_tool_calls, 3);
        assert_eq!(c.limits.memory_bytes, 512 * 1024 * 1024);
        assert_eq!(c.limits.max_disk_bytes, 1024 * 1024 * 1024);
        assert_eq!(c.scope, IsolationScope::Conversation);
    }
}
