//! `airlock bench`: one table, measured in one run on this machine, of airlock (cold, warm and
//! the CLI process) against the sandboxes a user would pick instead — plain python3 (the
//! floor), bubblewrap and unshare wrapping it, and the in-process tier (pydantic-monty,
//! smolagents' LocalPythonExecutor) — each skipped with a reason when it is not installed.
//!
//! Scenarios: request-to-result of `print(1)`; tool-call round trip (1,000 echo calls in one
//! program, each timed inside the guest); throughput with both cores busy; memory of an idle
//! sandbox; kill latency from a timeout firing to the whole tree reaped; and sessions (a cell in a
//! live stateful sandbox, a sandbox created and its first cell, against a local Jupyter kernel on
//! the same interpreter, the reference of those rows; and a run in a live sandbox that is not
//! stateful, against the floor). airlock's in-process rows go through a `Runner`, as every
//! caller's runs do; the `airlock serve` rows (`execute`, the live sandbox's run) drive a real
//! `airlock serve --stdio` (`serve.rs` says why). Every latency row
//! reports the median and p99 and its ratio to the floor. Timings are reported, never asserted.
pub mod airlock;
mod host;
mod image;
mod inproc;
pub mod memory;
mod peers;
mod ray;
mod serve;
mod session;
pub mod snapshots;
pub mod stats;
pub mod table;
pub mod tenants;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use table::{Report, Row, FLOOR, JUPYTER};

/// Echo calls in the round-trip scenario.
const CALLS: usize = 1000;
/// The timeout of the kill-latency scenario.
const KILL_BUDGET: Duration = Duration::from_millis(200);
/// Concurrent workers in the throughput scenario (one per core of the reference machine).
const WORKERS: usize = 2;
/// Idle sandboxes measured per system.
const IDLE: usize = 4;

/// What to measure and how to print it.
#[derive(Debug, Clone)]
pub struct Options {
    /// Samples per latency scenario.
    pub runs: usize,
    /// Print JSON instead of the markdown table.
    pub json: bool,
    /// The binary whose `__executor` subcommand is the stage.
    pub executor: PathBuf,
    /// The `airlock` binary, for the `airlock run` (whole process) row; skipped when None.
    pub cli: Option<PathBuf>,
    /// An image to import (an OCI or Docker archive, a root tarball or directory), for the
    /// image rows; skipped when None.
    pub image: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            runs: 30,
            json: false,
            executor: PathBuf::from("airlock"),
            cli: None,
            image: None,
        }
    }
}

/// Why the benchmark could not run at all (a system that cannot be measured is a skipped row).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The async runtime could not start.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    /// No usable python3: nothing can be compared.
    #[error("no usable python3: {0}")]
    NoPython(String),
    /// Writing the output failed.
    #[error("output: {0}")]
    Io(#[from] std::io::Error),
    /// The report could not be serialised.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

fn machine() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    format!("Linux {} x86_64, {cores} cores", release.trim())
}

const START: &str = "start: print(1), request to result";
const TOOLS: &str = "tool call round trip (1,000 echo calls)";
const THROUGHPUT: &str = "throughput, both cores busy";
const MEMORY: &str = "memory per idle sandbox";
const KILL: &str = "kill after timeout, to tree reaped";
/// The zygote's rows.
const ZYGOTE: &str = "airlock zygote";
const IMPORT: &str = "image import (once per image)";
const SESSION_RUN: &str = "session: print(1) in a live stateful sandbox (× Jupyter kernel)";
const SESSION_NEW: &str = "session: create + first print(1) (× Jupyter kernel)";
/// `sandbox.run_code` in a live sandbox that is not stateful: a fresh process per run.
const SESSION_LIVE: &str = "session: print(1) in a live sandbox, not stateful";
/// The `execute` row: what an orchestrator gets from `airlock serve` as it ships.
const PAUSE: &str = "pause a stateful sandbox holding ~100 MB of Python objects";
const RESUME: &str = "resume it (to a cell that reads the state back)";
const FORK: &str = "fork it into 8 branches, per branch (to a first cell in each)";
const FORK_MEMORY: &str = "memory a branch adds (PSS)";
/// Batch on Ray: `airlock_ray.run_many` against plain subprocesses in Ray tasks.
const RAY_BATCH: &str = "batch on Ray: short programs, each in a fresh sandbox";
const TENANTS: &str = "tenant B's print(1) while tenant A floods past its quota";
const SESSION_LOAD: &str =
    "session load: 8 sandboxes x 10 runs pipelined on one connection, 4 run slots";
const SERVE_EXECUTE: &str = "airlock serve: execute (no flags: zygote)";

/// Measure everything; the report's rows are in table order.
pub fn run(opts: &Options) -> Result<Report, BenchError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .map_err(BenchError::Runtime)?;
    rt.block_on(measure(opts))
}

async fn measure(opts: &Options) -> Result<Report, BenchError> {
    let t0 = Instant::now();
    let (python, version) = airlock::python().await.map_err(BenchError::NoPython)?;
    let runs = opts.runs.max(1);
    let exe = opts.executor.as_path();
    let peers = peers::peers(&python);
    let limits = airlock::limits(CALLS);
    let mut rows = Vec::new();

    // Start latency.
    for p in &peers {
        rows.push(host_row(START, p, "ms", "", || {
            (0..runs)
                .map(|_| host::start_ms(&p.argv(&python, "print(1)"), "1\n"))
                .collect()
        }));
    }
    let cold_door = airlock::Door::cold(WORKERS);
    let cold = airlock::start(exe, &cold_door, runs, &limits).await;
    rows.push(Row::from_result(
        START,
        "airlock cold",
        "ms",
        cold,
        "fresh executor per run (Runner, exec per run); broker in process",
    ));
    let zygote = airlock::zygote(exe)
        .await
        .map(|z| airlock::Door::zygote(std::sync::Arc::new(z), WORKERS));
    let r = match &zygote {
        Ok(z) => airlock::start(exe, z, runs, &limits).await,
        Err(e) => Err(e.clone()),
    };
    rows.push(Row::from_result(
        START,
        ZYGOTE,
        "ms",
        r,
        "fresh process per run forked from a pre-initialised interpreter (Runner with the zygote); no pool",
    ));
    serve_start_row(&mut rows, opts, runs);
    let import_rows = image_rows(&mut rows, opts, runs, &limits).await;
    let pool = airlock::Door::warm(airlock::pool(exe, 1, limits.clone()), WORKERS);
    let warm = airlock::start(exe, &pool, runs, &limits).await;
    rows.push(Row::from_result(
        START,
        "airlock warm (pool)",
        "ms",
        warm,
        "pre-started attested executor, used once",
    ));
    match &opts.cli {
        Some(cli) => {
            let r = airlock::cli_start(cli, &python, runs);
            rows.push(Row::from_result(
                START,
                "airlock run (CLI process)",
                "ms",
                r,
                "whole process; discovery cached on disk (first run discarded)",
            ));
        }
        None => rows.push(Row::skipped(
            START,
            "airlock run (CLI process)",
            "run as `airlock bench` to measure",
        )),
    }
    inproc_rows(&mut rows, &python, START, "start", runs);
    session_rows(&mut rows, exe, &python, runs, &limits).await;
    live_session_rows(&mut rows, opts, &python, &peers, runs);
    session_load_row(&mut rows, opts);
    snapshot_rows(&mut rows, opts, runs);
    ray_rows(&mut rows, opts, &python, runs);
    tenant_rows(&mut rows, opts, runs).await;

    // Tool round trip.
    for p in &peers {
        rows.push(host_row(
            TOOLS,
            p,
            "µs",
            "JSON lines over the process's pipes",
            || host::tool_round_trips(&p.argv(&python, &host::tool_program(CALLS))),
        ));
    }
    let tools = airlock::tool_round_trips(exe, &pool, CALLS).await;
    rows.push(Row::from_result(
        TOOLS,
        "airlock",
        "µs",
        tools,
        "guest-timed call_tool, in-process Rust echo; broker on a 2-worker runtime",
    ));
    let tools = airlock::tool_round_trips_current_thread(exe, CALLS).await;
    rows.push(Row::from_result(
        TOOLS,
        "airlock, broker on a current-thread runtime",
        "µs",
        tools,
        "the same run, the caller's runtime a current-thread one",
    ));
    inproc_rows(&mut rows, &python, TOOLS, "tools", CALLS);
    pool.shutdown().await;

    // Throughput.
    let total = (runs * 2).max(WORKERS * 4);
    for p in &peers {
        rows.push(host_row(THROUGHPUT, p, "runs/s", "", || {
            host::throughput(&p.argv(&python, "print(1)"), "1\n", total, WORKERS).map(|r| vec![r])
        }));
    }
    let r = airlock::throughput(exe, &cold_door, total, WORKERS, &limits)
        .await
        .map(|r| vec![r]);
    rows.push(Row::from_result(
        THROUGHPUT,
        "airlock cold",
        "runs/s",
        r,
        "",
    ));
    let r = match &zygote {
        Ok(z) => airlock::throughput(exe, z, total, WORKERS, &limits)
            .await
            .map(|r| vec![r]),
        Err(e) => Err(e.clone()),
    };
    rows.push(Row::from_result(THROUGHPUT, ZYGOTE, "runs/s", r, ""));
    let pool = airlock::Door::warm(airlock::pool(exe, WORKERS, limits.clone()), WORKERS);
    let r = airlock::throughput(exe, &pool, total, WORKERS, &limits)
        .await
        .map(|r| vec![r]);
    let stats = pool
        .pool()
        .map(airlock_broker::Pool::stats)
        .unwrap_or_default();
    pool.shutdown().await;
    let note = format!(
        "refills compete for the cores ({} of {} runs warm)",
        stats.warm_runs,
        stats.warm_runs + stats.cold_runs
    );
    rows.push(Row::from_result(
        THROUGHPUT,
        "airlock warm (pool)",
        "runs/s",
        r,
        &note,
    ));
    for (system, label) in [
        ("monty", "pydantic-monty"),
        ("smolagents", "smolagents LocalPythonExecutor"),
    ] {
        let r = inproc::throughput(&python, system, total, WORKERS).map(|r| vec![r]);
        rows.push(Row::from_result(
            THROUGHPUT,
            label,
            "runs/s",
            r,
            "one process per core",
        ));
    }

    // Idle memory.
    let idle = "import sys\nprint('ready', flush=True)\nsys.stdin.read()";
    let note = format!("summed PSS of the tree, {IDLE} alive at once");
    for p in &peers {
        rows.push(host_row(MEMORY, p, "MiB", &note, || {
            host::idle_pss_mib(&p.argv(&python, idle), IDLE)
        }));
    }
    let pool = airlock::pool(exe, IDLE, limits.clone());
    let r = airlock::idle_pss_mib(&pool).await;
    pool.shutdown().await;
    rows.push(Row::from_result(
        MEMORY,
        "airlock warm (pool)",
        "MiB",
        r,
        &format!("summed PSS of stage + guest, {IDLE} idle at once"),
    ));
    let r = airlock::zygote_idle_pss_mib(exe, IDLE, limits.clone()).await;
    rows.push(Row::from_result(
        MEMORY,
        "airlock zygote (pool it feeds)",
        "MiB",
        r,
        &format!("summed PSS of stage + guest, {IDLE} idle at once, plus 1/{IDLE} of the zygote's"),
    ));
    inproc_rows(&mut rows, &python, MEMORY, "memory", IDLE);

    // Kill latency.
    let kills = (runs / 4).clamp(3, 10);
    let busy = "while True:\n    pass";
    for p in &peers {
        rows.push(host_row(
            KILL,
            p,
            "ms",
            "SIGKILL to the tree, then wait",
            || {
                (0..kills)
                    .map(|_| host::kill_latency_ms(&p.argv(&python, busy), KILL_BUDGET))
                    .collect()
            },
        ));
    }
    let r = airlock::kill_latency(exe, &cold_door, kills, KILL_BUDGET).await;
    rows.push(Row::from_result(
        KILL,
        "airlock cold",
        "ms",
        r,
        "SIGTERM, grace, SIGKILL; pid ns + cgroup",
    ));
    let r = match &zygote {
        Ok(z) => airlock::kill_latency(exe, z, kills, KILL_BUDGET).await,
        Err(e) => Err(e.clone()),
    };
    rows.push(Row::from_result(KILL, ZYGOTE, "ms", r, ""));
    let pool = airlock::Door::warm(airlock::pool(exe, 1, limits.clone()), WORKERS);
    let r = airlock::kill_latency(exe, &pool, kills, KILL_BUDGET).await;
    pool.shutdown().await;
    rows.push(Row::from_result(KILL, "airlock warm (pool)", "ms", r, ""));
    inproc_rows(&mut rows, &python, KILL, "kill", kills);
    rows.extend(import_rows);
    if let Ok(z) = zygote {
        z.shutdown().await;
    }
    cold_door.shutdown().await;

    let mut report = Report {
        machine: machine(),
        python: format!("{version} ({})", python.display()),
        runs,
        rows,
        seconds: t0.elapsed().as_secs_f64(),
    };
    report.compute_ratios();
    Ok(report)
}

/// Cold start on an image's root (pushed next to the host-root row), and the rows of the
/// import that made it (returned, for the end of the table).
async fn image_rows(
    rows: &mut Vec<Row>,
    opts: &Options,
    runs: usize,
    limits: &airlock_broker::Limits,
) -> Vec<Row> {
    const SYSTEM: &str = "airlock cold, on an image";
    let Some(path) = &opts.image else {
        let why = "pass --image PATH (e.g. an mmdebstrap root tarball) to measure";
        rows.push(Row::skipped(START, SYSTEM, why));
        return vec![Row::skipped(IMPORT, "airlock image import", why)];
    };
    let imported = match image::import(path) {
        Ok(i) => i,
        Err(e) => {
            rows.push(Row::skipped(START, SYSTEM, e.clone()));
            return vec![Row::skipped(IMPORT, "airlock image import", e)];
        }
    };
    let r = image::start(&opts.executor, &imported.image, runs, limits).await;
    let note = "the image's root and interpreter instead of the host's";
    rows.push(Row::from_result(START, SYSTEM, "ms", r, note));
    let [first, again] = imported.seconds;
    let cached = "content-addressed: nothing unpacked again";
    vec![
        Row::measured(
            IMPORT,
            "airlock image import",
            "s",
            vec![first],
            imported.note,
        ),
        Row::measured(
            IMPORT,
            "airlock image import, root cached",
            "s",
            vec![again],
            cached,
        ),
    ]
}

/// Stateful sandboxes against a local Jupyter kernel on the same interpreter.
async fn session_rows(
    rows: &mut Vec<Row>,
    exe: &Path,
    python: &Path,
    runs: usize,
    limits: &airlock_broker::Limits,
) {
    let r = session::jupyter(python, "run", runs);
    let note = "execute_interactive, output received; TCP on loopback";
    rows.push(Row::from_result(SESSION_RUN, JUPYTER, "ms", r, note));
    let r = session::run_code(exe, runs, limits).await;
    let note = "kernel resumed (SIGCONT), cell, stopped again";
    rows.push(Row::from_result(SESSION_RUN, "airlock", "ms", r, note));
    let n = (runs / 4).clamp(3, 10);
    let r = session::jupyter(python, "start", n);
    let note = "start_new_kernel, then the first execute";
    rows.push(Row::from_result(SESSION_NEW, JUPYTER, "ms", r, note));
    let r = session::create_and_first(exe, n, limits).await;
    let note = "root assembled, kernel attested and started";
    rows.push(Row::from_result(SESSION_NEW, "airlock", "ms", r, note));
}

/// `execute` of `print(1)` through a real `airlock serve --stdio` with no flags: a call-scoped
/// sandbox through the router, its run forked from the zygote (`serve::execute`).
fn serve_start_row(rows: &mut Vec<Row>, opts: &Options, runs: usize) {
    let Some(cli) = &opts.cli else {
        let why = "run as `airlock bench` to measure";
        return rows.push(Row::skipped(START, SERVE_EXECUTE, why));
    };
    let r = serve::execute(cli, &[], "zygote", runs);
    let note = "`airlock serve --stdio`, request written to response read; a call-scoped sandbox \
                per run through the router, forked from the zygote";
    rows.push(Row::from_result(START, SERVE_EXECUTE, "ms", r, note));
}

/// `sandbox.run_code` of `print(1)` in a live sandbox that is not stateful, through a real
/// `airlock serve --stdio`: forked from the zygote (no flags) and exec'd (`--exec-per-run`),
/// against the floor measured again beside them (the same minute's machine).
fn live_session_rows(
    rows: &mut Vec<Row>,
    opts: &Options,
    python: &Path,
    peers: &[peers::Peer],
    runs: usize,
) {
    if let Some(floor) = peers.iter().find(|p| p.name == FLOOR) {
        let note = "measured again beside this scenario's rows";
        rows.push(host_row(SESSION_LIVE, floor, "ms", note, || {
            (0..runs)
                .map(|_| host::start_ms(&floor.argv(python, "print(1)"), "1\n"))
                .collect()
        }));
    }
    let ways = [
        ("airlock serve (no flags: zygote)", &[][..], "zygote", "sandbox.run_code over stdio; each run forked from the zygote into the sandbox's namespaces and root"),
        ("airlock serve --exec-per-run", &["--exec-per-run"][..], "exec", "the same, each run's stage spawned and the interpreter exec'd"),
    ];
    for (system, flags, via, note) in ways {
        match &opts.cli {
            Some(cli) => {
                let r = serve::session_run(cli, flags, via, runs);
                rows.push(Row::from_result(SESSION_LIVE, system, "ms", r, note));
            }
            None => rows.push(Row::skipped(
                SESSION_LIVE,
                system,
                "run as `airlock bench` to measure",
            )),
        }
    }
}

/// The load the serve_load suite runs for correctness, timed here (a speed figure is the
/// bench's, measured on a machine running nothing else): request-to-result, slot queueing
/// included.
fn session_load_row(rows: &mut Vec<Row>, opts: &Options) {
    const SYSTEM: &str = "airlock serve (no flags: zygote)";
    let Some(cli) = &opts.cli else {
        return rows.push(Row::skipped(
            SESSION_LOAD,
            SYSTEM,
            "run as `airlock bench` to measure",
        ));
    };
    let r = serve::pipelined(cli, 8, 10, 4);
    let note = "sandbox.run_code over stdio, each sandbox's next run sent as its last is \
                answered (8 in flight on 4 slots, so about half of each figure is queueing); \
                the goal: p99 under 1 s";
    rows.push(Row::from_result(SESSION_LOAD, SYSTEM, "ms", r, note));
}

/// Pause, resume and fork through `airlock serve --stdio --state-dir` (`snapshots`), beside
/// the figures the VM products publish.
fn snapshot_rows(rows: &mut Vec<Row>, opts: &Options, runs: usize) {
    let Some(cli) = &opts.cli else {
        for s in [PAUSE, RESUME, FORK, FORK_MEMORY] {
            rows.push(Row::skipped(
                s,
                "airlock",
                "run as `airlock bench` to measure",
            ));
        }
        return;
    };
    let rounds = match snapshots::measure(cli, (runs / 20).clamp(2, 5)) {
        Ok(r) => r,
        Err(e) => {
            for s in [PAUSE, RESUME, FORK, FORK_MEMORY] {
                rows.push(Row::skipped(s, "airlock", e.clone()));
            }
            return;
        }
    };
    let of = |f: fn(&snapshots::Round) -> f64| rounds.iter().map(f).collect::<Vec<f64>>();
    let per_gb = of(|r| r.pause_ms / 1e3 / (r.rss / 1e9).max(1e-3));
    let pss: Vec<f64> = rounds
        .iter()
        .flat_map(|r| r.branch_pss_mib.clone())
        .collect();
    rows.extend([
        Row::measured(PAUSE, "airlock sandbox.pause", "ms", of(|r| r.pause_ms),
            "files and the kernel's process image (read from its memory) to the durable store (LZ4, SHA-256, fsync), then every process and byte freed"),
        Row::measured(PAUSE, "airlock sandbox.pause, per GB of the kernel's RSS", "s/GB", per_gb, "the same, divided by the kernel's RSS"),
        Row::published(PAUSE, "E2B pause", "s/GB", 4.0, "E2B: ~4 s per GB of memory (memory snapshot of a microVM)"),
        Row::measured(RESUME, "airlock resume + first cell", "ms", of(|r| r.resume_ms),
            "any call on the paused id: a fresh sandbox under the same id, files restored, its attested stage become the paused kernel (the image written into it)"),
        Row::published(RESUME, "E2B resume", "ms", 1000.0, "E2B: ~1 s"),
        Row::measured(FORK, "airlock sandbox.fork", "ms", of(|r| r.fork_ms_per_branch),
            "each branch a fresh sandbox restored from a snapshot of the parent (its kernel's image)"),
        Row::published(FORK, "Morph Cloud branch", "ms", 250.0, "Morph: under 250 ms"),
        Row::published(FORK, "Mitos warm fork", "ms", 27.0, "Mitos (forking Firecracker VMs): ~27 ms to activate a warm fork"),
        Row::measured(FORK_MEMORY, "airlock branch", "MiB", pss,
            "PSS of a branch's kernel after its first cell, from its own /proc: a full copy (restored, not shared)"),
        Row::published(FORK_MEMORY, "Mitos", "MiB", 3.0, "Mitos: ~3 MiB marginal memory per fork"),
    ]);
    cow_rows(rows, cli, (runs / 20).clamp(2, 5));
}

/// The same fork, copy-on-write (`serve --fork-copy-on-write`).
fn cow_rows(rows: &mut Vec<Row>, cli: &Path, rounds: usize) {
    const COW: &str = "airlock sandbox.fork, copy-on-write";
    const COW_MEMORY: &str = "airlock copy-on-write branch";
    let rounds = match snapshots::measure_cow(cli, rounds) {
        Ok(r) => r,
        Err(e) => {
            rows.push(Row::skipped(FORK, COW, e.clone()));
            rows.push(Row::skipped(FORK_MEMORY, COW_MEMORY, e));
            return;
        }
    };
    let per_branch: Vec<f64> = rounds.iter().map(|r| r.fork_ms_per_branch).collect();
    let uss: Vec<f64> = rounds
        .iter()
        .flat_map(|r| r.branch_uss_mib.clone())
        .collect();
    let pss: Vec<f64> = rounds
        .iter()
        .flat_map(|r| r.branch_pss_mib.clone())
        .collect();
    rows.extend([
        Row::measured(FORK, COW, "ms", per_branch,
            "the live kernel cloned into each branch (new namespaces, its own root, files and /proc grafted from outside, checked, attested), then a first cell in each"),
        Row::measured(FORK_MEMORY, COW_MEMORY, "MiB", uss,
            "USS (private pages) of a branch's kernel after its first cell: what it adds; the rest it shares with its parent until written"),
        Row::measured(FORK_MEMORY, "airlock copy-on-write branch, PSS", "MiB", pss,
            "PSS of the same: the shared pages split among the parent, the frozen kernel and the branches"),
    ]);
}

/// Programs per second through `airlock_ray.run_many` on a local Ray instance, beside the same
/// programs as `python3 -c` subprocesses in Ray tasks (the floor).
fn ray_rows(rows: &mut Vec<Row>, opts: &Options, python: &Path, runs: usize) {
    let Some(cli) = &opts.cli else {
        rows.push(Row::skipped(
            RAY_BATCH,
            "airlock_ray.run_many",
            "run as `airlock bench` to measure",
        ));
        return;
    };
    match ray::measure(python, cli, (runs * 4).max(40)) {
        Ok((airlock, floor)) => rows.extend([
            Row::measured(RAY_BATCH, FLOOR, "runs/s", vec![floor],
                "each program a `python3 -c` subprocess in a Ray task: no sandbox"),
            Row::measured(RAY_BATCH, "airlock_ray.run_many", "runs/s", vec![airlock],
                "one airlock server per node (a pinned actor), each program a one-shot execute forked from its zygote"),
        ]),
        Err(e) => rows.push(Row::skipped(RAY_BATCH, "airlock_ray.run_many", e)),
    }
}

/// Tenant B's runs alone and beside tenant A at and past its quota (`tenants`); the second
/// row's note gives B's p99 against its own alone.
async fn tenant_rows(rows: &mut Vec<Row>, opts: &Options, runs: usize) {
    const ALONE: &str = "airlock serve, tenant B alone";
    const BESIDE: &str = "airlock serve, tenant B beside A's flood";
    let Some(cli) = &opts.cli else {
        for s in [ALONE, BESIDE] {
            rows.push(Row::skipped(
                TENANTS,
                s,
                "run as `airlock bench` to measure",
            ));
        }
        return;
    };
    match tenants::measure(cli, runs).await {
        Ok(m) => {
            let p99 = |xs: &[f64]| stats::summarize(xs.to_vec()).map_or(f64::NAN, |s| s.p99);
            let ratio = p99(&m.beside_ms) / p99(&m.alone_ms);
            rows.extend([
                Row::measured(TENANTS, ALONE, "ms", m.alone_ms,
                    "sandbox.run_code over WebSocket, a tenants file and a policy giving A 2 sandboxes and 1 run at a time"),
                Row::measured(TENANTS, BESIDE, "ms", m.beside_ms, format!(
                    "p99 {ratio:.2}x of alone; meanwhile A kept its one run slot busy (a sleeping run) and {} of its requests past the quota were refused over_capacity (a third sandbox, a second run at once)",
                    m.refused)),
            ]);
        }
        Err(e) => {
            for s in [ALONE, BESIDE] {
                rows.push(Row::skipped(TENANTS, s, e.clone()));
            }
        }
    }
}

fn host_row(
    scenario: &'static str,
    p: &peers::Peer,
    unit: &'static str,
    note: &str,
    f: impl FnOnce() -> Result<Vec<f64>, String>,
) -> Row {
    match &p.missing {
        Some(why) => Row::skipped(scenario, p.name, why.clone()),
        None => Row::from_result(scenario, p.name, unit, f(), note),
    }
}

fn inproc_rows(rows: &mut Vec<Row>, python: &Path, scenario: &'static str, mode: &str, n: usize) {
    let unit = match mode {
        "tools" => "µs",
        "memory" => "MiB",
        _ => "ms",
    };
    let monty_note = match mode {
        "start" => "new worker pool per run",
        "tools" => "host-timed between external calls",
        "memory" => "PSS of the worker process, all checked out at once",
        "kill" => "max_feed_duration_secs; the worker survives",
        _ => "",
    };
    rows.push(Row::from_result(
        scenario,
        "pydantic-monty",
        unit,
        inproc::measure(python, mode, "monty", n),
        monty_note,
    ));
    if mode == "start" {
        let r = inproc::measure(python, mode, "monty-pooled", n);
        rows.push(Row::from_result(
            scenario,
            "pydantic-monty (pooled worker)",
            unit,
            r,
            "checkout, worker recycled per session",
        ));
    }
    let smol_note = match mode {
        "start" => "AST interpreter in the caller's process",
        "tools" => "host-timed between tool calls",
        "memory" => "PSS growth of the caller per executor",
        "kill" => "timeout_seconds=1; the loop's thread is not stopped",
        _ => "",
    };
    let n = if mode == "kill" { 1 } else { n };
    rows.push(Row::from_result(
        scenario,
        "smolagents LocalPythonExecutor",
        unit,
        inproc::measure(python, mode, "smolagents", n),
        smol_note,
    ));
}

/// Measure, then print the markdown table (or the JSON report) to stdout.
pub fn run_and_print(opts: &Options) -> Result<(), BenchError> {
    let report = run(opts)?;
    let text = if opts.json {
        serde_json::to_string_pretty(&report)?
    } else {
        report.markdown()
    };
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    Ok(())
}
