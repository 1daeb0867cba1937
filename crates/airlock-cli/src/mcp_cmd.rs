//! `airlock mcp`: airlock as an MCP server on stdio, with upstream MCP servers whose tools
//! sandboxed programs call through `call_tool("NAME.tool", args)`.
//!
//! stdout carries the protocol; logs go to stderr (`--log-level`, else `RUST_LOG`, else `warn`;
//! see [`crate::logs`]).
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use airlock_broker::{Runner, RunnerConfig};

use airlock_mcp::config_file::{parse_upstreams, MAX_CONFIG_BYTES};
use airlock_mcp::{McpConfig, UpstreamSpec};
use airlock_policy::IsolationScope;
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};

use crate::logs::{LogFormat, LogLevel};
use crate::policy_gate::Gate;
use crate::zygote_choice::ZygoteChoice;

/// How long a sandbox lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scope {
    /// One sandbox for the MCP session: files in /work persist across tool calls.
    Conversation,
    /// A fresh sandbox for every tool call (no file tools).
    Call,
}

/// Options of `airlock mcp`.
#[derive(Debug, Args)]
pub struct McpOpts {
    /// A policy.toml (also read from $AIRLOCK_POLICY): its floor, denied capabilities and
    /// identities, transfer ceilings and scope floor admit every tool call, as `serve` does;
    /// its `[limits]` bound every run.
    #[arg(long, value_name = "PATH")]
    pub policy: Option<PathBuf>,
    /// `conversation`: one sandbox per MCP session, files persist across calls;
    /// `call`: a fresh sandbox per tool call.
    #[arg(long, value_enum, default_value_t = Scope::Conversation)]
    pub scope: Scope,
    /// Serve `start_process`, `process_output` and `stop_process`: background processes (dev
    /// servers, watchers) in the session's sandbox, whose runs reach them on 127.0.0.1. The
    /// sandbox then requires the `processes` capability. Not with `--scope call`.
    #[arg(long)]
    pub processes: bool,
    /// Start an upstream MCP server (outside the sandbox) and offer its tools to `execute`
    /// programs as NAME.tool (repeatable). COMMAND is split into words, not run by a shell.
    #[arg(long = "upstream", value_name = "NAME='COMMAND ARGS'")]
    pub upstreams: Vec<String>,
    /// Read more upstreams from this mcp.toml (`[upstreams] NAME = "COMMAND ARGS"` or
    /// `NAME = ["COMMAND", "ARG"]`).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// The interpreter for Python runs (default: python3 on PATH; with --image, a name on the
    /// image's PATH or a path inside it).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Run every sandbox on this image's root (see `airlock image`).
    #[arg(long, value_name = "NAME")]
    pub image: Option<String>,
    /// The image store [default: $AIRLOCK_IMAGE_DIR, /var/lib/airlock/images as root, else
    /// ~/.local/share/airlock/images].
    #[arg(long, value_name = "DIR")]
    pub image_dir: Option<PathBuf>,
    /// Budget of one upstream tool call, seconds.
    #[arg(long, default_value_t = 30.0)]
    pub upstream_timeout: f64,
    /// Budget of an upstream's start-up (initialize and tools/list), seconds.
    #[arg(long, default_value_t = 20.0)]
    pub upstream_start_timeout: f64,
    /// Runs executing at once; more wait (fair per sandbox, then FIFO, each within its own
    /// timeout).
    #[arg(long, default_value_t = 2)]
    pub max_concurrent_runs: usize,
    /// Require the zygote (the default when libairlock_zygote.so is beside this binary): fail
    /// to start without it instead of running exec-per-run.
    #[arg(long, conflicts_with = "exec_per_run")]
    pub zygote: bool,
    /// Exec the interpreter for every run instead of forking it from the zygote (see
    /// `airlock serve --help`).
    #[arg(long)]
    pub exec_per_run: bool,
    /// The least severe log line written to stderr; without it RUST_LOG filters, else `warn`.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub log_level: Option<LogLevel>,
}

fn seconds(v: f64, flag: &str) -> anyhow::Result<Duration> {
    if !(v.is_finite() && v > 0.0 && v <= 3600.0) {
        bail!("{flag} must be a number of seconds in (0, 3600], got {v}");
    }
    Ok(Duration::from_secs_f64(v))
}

/// Reads at most `cap + 1` bytes, so the parser sees (and refuses) an oversized file.
fn read_bounded(path: &PathBuf, cap: usize) -> anyhow::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .with_context(|| format!("opening {}", path.display()))?
        .take(u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1))
        .read_to_string(&mut text)
        .with_context(|| format!("reading {}", path.display()))?;
    Ok(text)
}

pub fn mcp(opts: McpOpts) -> anyhow::Result<ExitCode> {
    crate::logs::init(LogFormat::Text, opts.log_level, LogLevel::Warn);
    crate::sweep::at_start();
    let gate = Gate::load(opts.policy.as_deref())?;
    let executor = std::env::current_exe().context("locating the airlock binary")?;
    let mut config = McpConfig::new(executor, gate.policy());
    config.scope = match opts.scope {
        Scope::Conversation => IsolationScope::Conversation,
        Scope::Call => IsolationScope::Call,
    };
    if opts.processes && config.scope == IsolationScope::Call {
        bail!(
            "--processes needs --scope conversation: a background process lives in the \
             session's sandbox, and with --scope call every tool call gets a fresh one"
        );
    }
    config.processes = opts.processes;
    config.python = opts.python;
    config.image = opts.image;
    config.image_dir = opts.image_dir;
    config.upstream_call_timeout = seconds(opts.upstream_timeout, "--upstream-timeout")?;
    config.upstream_start_timeout =
        seconds(opts.upstream_start_timeout, "--upstream-start-timeout")?;
    config.upstreams = opts
        .upstreams
        .iter()
        .map(|s| UpstreamSpec::parse(s))
        .collect::<Result<_, _>>()?;
    if let Some(path) = &opts.config {
        let text = read_bounded(path, MAX_CONFIG_BYTES)?;
        let more = parse_upstreams(&text).with_context(|| format!("config {}", path.display()))?;
        config.upstreams.extend(more);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    // An image's interpreter never runs outside its sandbox, so no zygote serves an image.
    let zygote = match config.image {
        Some(_) => ZygoteChoice::ExecPerRun,
        None => ZygoteChoice::from_flags(opts.zygote, opts.exec_per_run),
    };
    runtime.block_on(async {
        let mut rc = RunnerConfig::exec_per_run(opts.max_concurrent_runs.max(1));
        rc.zygote = zygote
            .start(config.executor.clone(), config.python.clone())
            .await?;
        config.runner = Arc::new(Runner::new(rc));
        airlock_mcp::serve_stdio(config).await?;
        anyhow::Ok(())
    })?;
    // Upstreams are killed on drop; do not wait for a blocked stdin reader.
    runtime.shutdown_timeout(Duration::from_secs(2));
    Ok(ExitCode::SUCCESS)
}
