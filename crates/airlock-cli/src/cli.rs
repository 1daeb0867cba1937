//! Argument parsing and dispatch.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::run_opts::RunOpts;
use crate::{bench_cmd, image_cmd, mcp_cmd};

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
    /// Build (`--preset python-data`), import, list and remove images: read-only roots a sandbox
    /// can run on (`--image`).
    Image(image_cmd::ImageOpts),
    /// Add, remove and list the tenants of a tokens file (`serve --token-file`).
    Token(crate::token_cmd::TokenOpts),
    /// Show which isolation layers this machine offers, and how to fix the missing ones.
    Doctor {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
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
        Command::Token(opts) => crate::token_cmd::token(opts),
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
