//! Argument parsing and dispatch.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

// `airlock mcp` lives in its own file, declared here to keep main.rs untouched.
#[path = "mcp_cmd.rs"]
mod mcp_cmd;
// `airlock bench` too.
#[path = "bench_cmd.rs"]
mod bench_cmd;
// And `airlock image`.
#[path = "image_cmd.rs"]
pub mod image_cmd;

/// Run untrusted code in a rootless, network-isolated, syscall-filtered sandbox.
#[derive(Debug, Parser)]
#[command(name = "airlock", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a Python program (FILE, or - for stdin) in a fresh sandbox.
    Run {
        #[command(flatten)]
        opts: RunOpts,
        /// The interpreter (default: python3 on PATH; with --image, a name on the image's
        /// PATH or a path inside the image).
        #[arg(long)]
        python: Option<PathBuf>,
        /// The program file, or - to read it from stdin.
        file: String,
    },
    /// Run a command in a fresh sandbox.
    Exec {
        #[command(flatten)]
        opts: RunOpts,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
    /// Run the broker as a server (WebSocket or stdio) for orchestrators.
    Serve(crate::serve_cmd::ServeOpts),
    /// Serve MCP on stdio: sandboxed `execute`/`run_python`/`exec` tools, with upstream MCP
    /// servers' tools callable from the sandboxed program.
    Mcp(mcp_cmd::McpOpts),
    /// Benchmark airlock (cold, warm, CLI) against plain python3, bubblewrap, unshare and the
    /// in-process interpreters, measured now on this machine; prints one markdown table.
    Bench(bench_cmd::BenchOpts),
    /// Import, list and remove images: read-only roots a sandbox can run on (`--image`).
    Image(image_cmd::ImageOpts),
    /// Show which isolation layers this machine offers, and how to fix the missing ones.
    Doctor {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Options shared by `run` and `exec`.
#[derive(Debug, Args)]
pub struct RunOpts {
    /// Wall-clock limit in seconds [default: 30, or the policy's limits.timeout_seconds].
    #[arg(long, allow_negative_numbers = true)]
    pub timeout: Option<f64>,
    /// Memory limit in MiB [default: 512, or the policy's limits.memory_mb].
    #[arg(long, allow_negative_numbers = true)]
    pub memory: Option<u64>,
    /// The sandbox's disk in MiB: /work, /tmp and /dev/shm together, a kernel bound
    /// [default: 1024, or the policy's limits.disk_mb].
    #[arg(long, allow_negative_numbers = true)]
    pub disk: Option<u64>,
    /// Set an environment variable in the sandbox (repeatable); nothing else is inherited.
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// Offer a tool: NAME=CMD runs `sh -c CMD` on the host with JSON args on stdin (repeatable).
    #[arg(long = "tool", value_name = "NAME=CMD")]
    pub tools: Vec<String>,
    /// Copy a host file into the sandbox's /work before the run (repeatable; GUEST is relative
    /// to /work, parents are created, links are never followed).
    #[arg(long = "put", value_name = "LOCAL=GUEST")]
    pub put: Vec<String>,
    /// Collect a work-dir file after the run (repeatable; LOCAL must not exist yet).
    #[arg(long = "get", value_name = "GUEST=LOCAL")]
    pub get: Vec<String>,
    /// Maximum tool calls per run [default: 128, or the policy's limits.max_tool_calls].
    #[arg(long, allow_negative_numbers = true)]
    pub max_tool_calls: Option<u32>,
    /// Captured bytes kept per output stream [default: 65536, or the policy's
    /// limits.max_output_bytes].
    #[arg(long, allow_negative_numbers = true)]
    pub max_output: Option<usize>,
    /// A policy.toml (floor, denied capabilities, limits) to hold this run to; also read from
    /// $AIRLOCK_POLICY. Its limits are defaults and ceilings; a run it does not admit is refused.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// CPU quota in cores (e.g. 0.5); needs a usable cpu cgroup, else the run is refused.
    #[arg(long, allow_negative_numbers = true)]
    pub cpus: Option<f64>,
    /// Allowlist egress: let the program reach HOST[:PORT] through the broker's proxy
    /// (repeatable). `*.example.org` matches names below it, not the apex; no port means 80
    /// and 443. Without any, the sandbox has no network at all.
    #[arg(long = "allow-host", value_name = "HOST[:PORT]")]
    pub allow_hosts: Vec<String>,
    /// Never let the program reach HOST[:PORT] (repeatable; deny wins over allow).
    #[arg(long = "deny-host", value_name = "HOST[:PORT]")]
    pub deny_hosts: Vec<String>,
    /// Let allowed hosts resolve into this private/loopback/link-local range (repeatable;
    /// such addresses are refused otherwise).
    #[arg(long = "allow-private", value_name = "CIDR")]
    pub allow_private: Vec<String>,
    /// Run on this image's root (see `airlock image`) instead of the host's system
    /// directories; the interpreter and commands are looked for inside it.
    #[arg(long, value_name = "NAME")]
    pub image: Option<String>,
    /// The image store [default: $AIRLOCK_IMAGE_DIR, /var/lib/airlock/images as root, else
    /// ~/.local/share/airlock/images].
    #[arg(long, value_name = "DIR")]
    pub image_dir: Option<PathBuf>,
    /// Print exactly one JSON object describing the run.
    #[arg(long)]
    pub json: bool,
}

pub fn main() -> anyhow::Result<ExitCode> {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // `run --json` and `exec --json` answer a usage error with one JSON object too.
        Err(e) if e.use_stderr() && crate::usage::json_requested() => {
            return Ok(crate::usage::usage_error(&clap_message(&e)));
        }
        Err(e) => e.exit(),
    };
    match cli.command {
        Command::Run { opts, python, file } => {
            let json = opts.json;
            crate::usage::or_usage_error(json, crate::run_cmd::run_python(opts, python, &file))
        }
        Command::Exec { opts, argv } => {
            let json = opts.json;
            crate::usage::or_usage_error(json, crate::run_cmd::run_command(opts, argv))
        }
        Command::Doctor { json } => Ok(crate::doctor::doctor(json)),
        Command::Serve(opts) => crate::serve_cmd::serve(opts),
        Command::Mcp(opts) => mcp_cmd::mcp(opts),
        Command::Bench(opts) => bench_cmd::bench(opts),
        Command::Image(opts) => image_cmd::image(opts),
    }
}

/// clap's error as one line: its first line without the `error: ` prefix, and its tip.
fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    match lines.find(|l| l.starts_with("tip:")) {
        Some(tip) => format!("{first} ({tip})"),
        None => first.to_string(),
    }
}
