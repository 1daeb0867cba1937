//! `airlock run` and `airlock exec`.
use airlock_broker::{
    Job, Limits, RunResult, RunSpec, RunStatus, Runner, RunnerConfig, SandboxFs, Workload,
};
use airlock_policy::Egress;
use airlock_protocol::ErrorCode;
use anyhow::{bail, Context};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use crate::run_opts::RunOpts;

#[path = "transfer.rs"]
mod transfer;
use crate::policy_gate::{needs, Asked, Gate};
use crate::zygote_choice::ZygoteChoice;

/// A program file larger than this is refused before it is read in full.
const MAX_PROGRAM_FILE_BYTES: u64 = 16 * 1024 * 1024;

pub fn run_python(opts: RunOpts, python: Option<PathBuf>, file: &str) -> anyhow::Result<ExitCode> {
    let mut code = String::new();
    if file != "-" {
        crate::usage::note_dropped_stdin();
    }
    if file == "-" {
        std::io::stdin()
            .take(MAX_PROGRAM_FILE_BYTES)
            .read_to_string(&mut code)
            .context("reading the program from stdin")?;
    } else {
        std::fs::File::open(file)
            .with_context(|| format!("opening {file}"))?
            .take(MAX_PROGRAM_FILE_BYTES)
            .read_to_string(&mut code)
            .with_context(|| format!("reading {file}"))?;
    }
    execute(
        opts,
        Workload::Python {
            code,
            interpreter: python,
        },
    )
}

pub fn run_command(opts: RunOpts, argv: Vec<String>) -> anyhow::Result<ExitCode> {
    crate::usage::note_dropped_stdin();
    execute(opts, Workload::Command { argv })
}

fn parse_pair(s: &str, what: &str) -> anyhow::Result<(String, String)> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => bail!("{what} must look like NAME=VALUE, got {s:?}"),
    }
}

#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "the caller checked 0 < cores <= 1024, so the product fits u64 exactly"
)]
fn millicores(cores: f64) -> u64 {
    (cores * 1000.0).round() as u64
}

fn egress_mode(opts: &RunOpts) -> Egress {
    if opts.allow_hosts.is_empty() {
        Egress::Closed
    } else {
        Egress::Allowlist
    }
}

fn execute(opts: RunOpts, workload: Workload) -> anyhow::Result<ExitCode> {
    // One process per run: interpreter discovery is kept on disk, per user (re-probed when
    // anything that shaped it changes; see airlock_broker::interpreter_cache).
    if let Some(dir) = airlock_broker::interpreter_cache::DiskCache::default_dir() {
        airlock_broker::interpreter::use_disk_cache(dir);
    }
    let gate = Gate::load(opts.policy.as_deref())?;
    let resolved = gate.resolve(Asked {
        timeout: opts.timeout,
        memory_mb: opts.memory,
        max_tool_calls: opts.max_tool_calls,
        max_output: opts.max_output,
        disk_mb: opts.disk,
    })?;
    let cpu_millicores = match opts.cpus {
        None => None,
        Some(c) if c.is_finite() && c > 0.0 && c <= 1024.0 => Some(millicores(c)),
        Some(c) => bail!("--cpus must be a number of cores in (0, 1024], got {c}"),
    };
    let env = opts
        .env
        .iter()
        .map(|e| parse_pair(e, "--env"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // --tool NAME=CMD registers through the host-tool registry (see transfer.rs).
    let tools = transfer::tool_handler(&opts.tools, resolved.max_tool_calls)?;
    let limits = Limits {
        timeout: resolved.timeout,
        memory_bytes: resolved.memory_mb * 1024 * 1024,
        max_tool_calls: resolved.max_tool_calls,
        max_output_bytes: resolved.max_output,
        cpu_millicores,
        egress: egress(&opts)?,
        max_disk_bytes: resolved.disk_mb * 1024 * 1024,
        ..Limits::default()
    };
    if let Err(refusal) = gate.admit(
        &needs(&workload, !opts.tools.is_empty()),
        egress_mode(&opts),
        &opts.allow_hosts,
    ) {
        return report(
            &RunResult::not_started(ErrorCode::SandboxRefused, refusal),
            opts.json,
        );
    }
    let image = match &opts.image {
        Some(name) => {
            let store = crate::image_cmd::store(opts.image_dir.clone())?;
            Some(Arc::new(store.get(name)?))
        }
        None => None,
    };
    let mut spec = RunSpec {
        workload,
        limits,
        sandbox: None,
        image,
        cwd: None,
        env,
        executor: std::env::current_exe().context("locating the airlock binary")?,
        output: None,
        restricted: None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let transfers = if opts.put.is_empty() && opts.get.is_empty() {
        None
    } else {
        // Files move in and out of the run's own sandbox filesystem, created here first.
        let fs = match runtime.block_on(sandbox_for(&spec)) {
            Ok(fs) => Arc::new(fs),
            Err(refused) => return report(&refused, opts.json),
        };
        spec.sandbox = Some(Arc::clone(&fs));
        transfer::Transfers::prepare(&opts.put, &opts.get, &fs, gate.transfer_limits())?
    };
    let (result, gets_ok) = runtime.block_on(async {
        if let Some(t) = &transfers {
            t.put_all().await?;
        }
        // A one-shot command has no long-lived process to keep a zygote in: the runner
        // execs the interpreter unless --zygote asks for one (its one slot is always free).
        let mut rc = RunnerConfig::exec_per_run(1);
        rc.zygote = zygote_for(&opts, &spec).await?;
        let runner = Runner::new(rc);
        let job = Job {
            spec,
            tools: &tools,
            cancel: Box::pin(std::future::pending()),
            sandbox: "cli",
            kernel: None,
        };
        let result = runner
            .run(job)
            .await
            .unwrap_or_else(|r| RunResult::not_started(ErrorCode::OverCapacity, r.to_string()));
        runner.shutdown().await;
        let gets_ok = match &transfers {
            Some(t) => t.get_all().await,
            None => true,
        };
        anyhow::Ok((result, gets_ok))
    })?;
    let code = report(&result, opts.json)?;
    Ok(if gets_ok { code } else { ExitCode::from(2) })
}

/// The zygote `--zygote` asks for, for a Python run on the host's interpreter (none else fits).
async fn zygote_for(
    opts: &RunOpts,
    spec: &RunSpec,
) -> anyhow::Result<Option<Arc<airlock_broker::Zygote>>> {
    match &spec.workload {
        Workload::Python { interpreter, .. } if opts.zygote && spec.image.is_none() => {
            ZygoteChoice::Required
                .start(spec.executor.clone(), interpreter.clone())
                .await
        }
        _ => Ok(None),
    }
}

/// A fresh sandbox filesystem for `spec`, or the result that says why none could be made.
async fn sandbox_for(spec: &RunSpec) -> Result<SandboxFs, RunResult> {
    let root = airlock_broker::run::root_for(spec)
        .await
        .map_err(|n| RunResult::not_started(n.code, n.message))?;
    SandboxFs::create(&spec.executor, root)
        .await
        .map_err(|e| RunResult::not_started(ErrorCode::SandboxRefused, e.to_string()))
}

/// Closed unless `--allow-host` names something; the other egress flags need it.
fn egress(opts: &RunOpts) -> anyhow::Result<airlock_egress::EgressSpec> {
    if opts.allow_hosts.is_empty() {
        if !opts.deny_hosts.is_empty() || !opts.allow_private.is_empty() {
            bail!(
                "--deny-host and --allow-private only apply with --allow-host (egress is closed)"
            );
        }
        return Ok(airlock_egress::EgressSpec::Closed);
    }
    let rules =
        airlock_egress::Rules::parse(&opts.allow_hosts, &opts.deny_hosts, &opts.allow_private)?;
    Ok(airlock_egress::EgressSpec::Allowlist(rules))
}

fn report(r: &RunResult, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string(r)?);
    } else {
        std::io::stdout().write_all(r.stdout.as_bytes())?;
        std::io::stderr().write_all(r.stderr.as_bytes())?;
        if r.stdout_truncated || r.stderr_truncated {
            eprintln!(
                "airlock: output truncated (stdout {} bytes, stderr {} bytes written)",
                r.stdout_bytes, r.stderr_bytes
            );
        }
        let not_started = r.exit_code.is_none() && r.signal.is_none();
        if let Some(e) = r.error.as_ref() {
            if r.status != RunStatus::Error {
                eprintln!("airlock: {}: {}", r.status.as_str(), e.message);
            } else if not_started {
                // The request named something that is not there: nothing ran to say so.
                eprintln!("airlock: {}", e.message);
            }
        }
    }
    Ok(ExitCode::from(exit_code(r)))
}

/// Completed/error runs exit with the program's code; others with timeout(1)-style codes; a
/// command that is not there with 127 (the shell's), another request error with 2.
fn exit_code(r: &RunResult) -> u8 {
    let not_started = r.exit_code.is_none() && r.signal.is_none();
    match r.error.as_ref().map(|e| e.code) {
        Some(c) if not_started && c == ErrorCode::NotFound.code() => return 127,
        Some(c) if not_started && c == ErrorCode::InvalidParams.code() => {
            return crate::usage::USAGE_EXIT
        }
        _ => {}
    }
    match r.status {
        RunStatus::Completed | RunStatus::Error => r
            .exit_code
            .map(|c| u8::try_from(c & 0xff).unwrap_or(1))
            .unwrap_or(1),
        RunStatus::Timeout => u8::try_from(airlock_broker::TIMEOUT_EXIT_CODE).unwrap_or(124),
        RunStatus::MemoryLimit => 137,
        RunStatus::Killed => 137,
        RunStatus::ProtocolError => 125,
        RunStatus::Refused => 126,
        RunStatus::Cancelled => 130,
        RunStatus::DiskLimit => 137,
    }
}
