//! airlock's own rows: runs through a [`Runner`] that execs (cold), forks from the zygote or
//! takes a pre-started executor (warm), and the `airlock run` process.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use std::sync::Arc;

use airlock_broker::{
    Job, Limits, Pool, PoolConfig, RunResult, RunSpec, RunStatus, Runner, RunnerConfig,
    ToolFailure, ToolHandler, Via, Workload, Zygote, ZygoteConfig,
};
use futures_util::future::BoxFuture;
use serde_json::Value;

/// The in-process Rust tool the round-trip scenario calls: returns its arguments.
#[derive(Debug, Clone, Copy)]
pub struct Echo;

impl ToolHandler for Echo {
    fn call<'a>(
        &'a self,
        _name: &'a str,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolFailure>> {
        Box::pin(async move { Ok(args) })
    }
}

/// The program of the round-trip scenario: `calls` echo calls, each timed inside the guest.
pub fn tool_program(calls: usize) -> String {
    format!(
        "import json, time\nns = []\nfor i in range({calls}):\n    t = time.perf_counter_ns()\n    \
         call_tool('echo', {{'i': i}})\n    ns.append(time.perf_counter_ns() - t)\nprint(json.dumps(ns))"
    )
}

/// Limits of every airlock run of the bench: the defaults, with room for the 1,000 calls.
pub fn limits(calls: usize) -> Limits {
    Limits {
        max_tool_calls: u32::try_from(calls + 16).unwrap_or(u32::MAX),
        ..Limits::default()
    }
}

/// A Python run spec.
pub fn spec(executor: &Path, code: &str, limits: Limits) -> RunSpec {
    RunSpec {
        workload: Workload::Python {
            code: code.into(),
            interpreter: None,
        },
        limits,
        sandbox: None,
        image: None,
        cwd: None,
        env: Vec::new(),
        executor: executor.to_path_buf(),
        output: None,
        restricted: None,
    }
}

fn check(r: &RunResult, want: RunStatus) -> Result<(), String> {
    if r.status == want {
        Ok(())
    } else {
        let why = r
            .error
            .as_ref()
            .map(|e| e.message.clone())
            .unwrap_or_default();
        Err(format!("run ended {}: {why}", r.status.as_str()))
    }
}

/// The pool the warm rows use.
pub fn pool(executor: &Path, size: usize, limits: Limits) -> Pool {
    let mut config = PoolConfig::new(size, executor.to_path_buf());
    config.limits = limits;
    Pool::start(config)
}

async fn ready(pool: &Pool) -> Result<(), String> {
    if pool.wait_full(Duration::from_secs(30)).await {
        Ok(())
    } else {
        Err(format!(
            "the pool did not fill: {:?}",
            pool.stats().last_error
        ))
    }
}

/// Which way a [`Door`] starts a run's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A fresh stage spawned, the interpreter exec'd, per run.
    Cold,
    /// Forked by a zygote from its pre-initialised interpreter, per run.
    Zygote,
    /// Taken from a pool of pre-started executors (each used once).
    Warm,
}

/// How an airlock row runs its programs: through a [`Runner`] — the front door every caller
/// (`airlock serve`, `airlock mcp`, the CLI, the local backend) hands its runs to — set up the
/// way the row names. Each result's `via` is checked against it, so a row never reports a
/// run that was served another way (a warm row's run may still fall back to exec when the
/// pool is empty: that is the pool's own behaviour, and the throughput row counts it).
#[derive(Debug)]
pub struct Door {
    runner: Runner,
    kind: Kind,
}

impl Door {
    /// Exec per run, `slots` run slots.
    #[must_use]
    pub fn cold(slots: usize) -> Door {
        Door {
            runner: Runner::new(RunnerConfig::exec_per_run(slots)),
            kind: Kind::Cold,
        }
    }

    /// Forked from `zygote` per run, as `airlock serve` with no flags does.
    #[must_use]
    pub fn zygote(zygote: Arc<Zygote>, slots: usize) -> Door {
        let mut config = RunnerConfig::exec_per_run(slots);
        config.zygote = Some(zygote);
        Door {
            runner: Runner::new(config),
            kind: Kind::Zygote,
        }
    }

    /// From `pool` (create it inside the runtime), as `airlock serve --warm N` does.
    #[must_use]
    pub fn warm(pool: Pool, slots: usize) -> Door {
        let mut config = RunnerConfig::exec_per_run(slots);
        config.pool = Some(Arc::new(pool));
        Door {
            runner: Runner::new(config),
            kind: Kind::Warm,
        }
    }

    /// Which way it starts runs.
    #[must_use]
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Its warm pool, if it has one.
    #[must_use]
    pub fn pool(&self) -> Option<&Pool> {
        self.runner.pool().map(AsRef::as_ref)
    }

    /// Stop its pool or zygote (when it holds the last reference) and reap them.
    pub async fn shutdown(self) {
        self.runner.shutdown().await;
    }

    /// One run through the runner, tools answered by [`Echo`]; the result is checked to have
    /// been served the door's way.
    async fn run(&self, spec: RunSpec) -> Result<RunResult, String> {
        let job = Job {
            spec,
            tools: &Echo,
            cancel: Box::pin(std::future::pending()),
            sandbox: "bench",
            kernel: None,
        };
        let r = self.runner.run(job).await.map_err(|e| e.to_string())?;
        let fits = match self.kind {
            Kind::Cold => r.via == Via::Exec,
            Kind::Zygote => r.via == Via::Zygote,
            Kind::Warm => matches!(r.via, Via::Pool | Via::Exec),
        };
        if fits {
            Ok(r)
        } else {
            Err(format!("a {:?} run was served via {:?}", self.kind, r.via))
        }
    }

    /// For a pool: wait until it is full, so a run is served warm.
    async fn ready(&self) -> Result<(), String> {
        match self.pool() {
            Some(p) => ready(p).await,
            None => Ok(()),
        }
    }
}

/// The zygote the zygote rows use.
pub async fn zygote(executor: &Path) -> Result<Zygote, String> {
    Zygote::start(ZygoteConfig::new(executor.to_path_buf()))
        .await
        .map_err(|e| e.to_string())
}

/// Request-to-result of `print(1)`; ms.
pub async fn start(
    executor: &Path,
    door: &Door,
    runs: usize,
    limits: &Limits,
) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for i in 0..=runs {
        door.ready().await?;
        let s = spec(executor, "print(1)", limits.clone());
        let t0 = Instant::now();
        let r = door.run(s).await?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        check(&r, RunStatus::Completed)?;
        if r.stdout != "1\n" {
            return Err(format!("unexpected output {:?}", r.stdout));
        }
        // The first run warms the interpreter-discovery cache and the page cache; not a sample.
        if i > 0 {
            out.push(ms);
        }
    }
    Ok(out)
}

/// `airlock run --python PY -` as a whole process (discovery included); ms.
pub fn cli_start(cli: &Path, python: &Path, runs: usize) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for i in 0..=runs {
        let t0 = Instant::now();
        let mut child = Command::new(cli)
            .args(["run", "--python"])
            .arg(python)
            .arg("-")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        if let Some(mut stdin) = child.stdin.take() {
            use std::io::Write;
            let _ = stdin.write_all(b"print(1)\n");
        }
        let o = child.wait_with_output().map_err(|e| e.to_string())?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        if o.stdout != b"1\n" {
            return Err(format!(
                "airlock run failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        if i > 0 {
            out.push(ms);
        }
    }
    Ok(out)
}

/// 1,000 echo calls in one run; per-call µs measured inside the guest.
pub async fn tool_round_trips(
    executor: &Path,
    door: &Door,
    calls: usize,
) -> Result<Vec<f64>, String> {
    door.ready().await?;
    let r = door
        .run(spec(executor, &tool_program(calls), limits(calls)))
        .await?;
    check(&r, RunStatus::Completed)?;
    let ns: Vec<f64> =
        serde_json::from_str(r.stdout.trim()).map_err(|e| format!("{e}: {:?}", r.stdout))?;
    if ns.len() != calls {
        return Err(format!("{} of {calls} calls timed", ns.len()));
    }
    Ok(ns.into_iter().map(|n| n / 1e3).collect())
}

/// [`tool_round_trips`] with the broker on a current-thread runtime of its own (a thread
/// beside the caller's runtime): what a caller that embeds the broker that way gets.
pub async fn tool_round_trips_current_thread(
    executor: &Path,
    calls: usize,
) -> Result<Vec<f64>, String> {
    let executor = executor.to_path_buf();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let r = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
            .and_then(|rt| {
                rt.block_on(async {
                    let door = Door::warm(pool(&executor, 1, limits(calls)), 1);
                    let r = tool_round_trips(&executor, &door, calls).await;
                    door.shutdown().await;
                    r
                })
            });
        let _ = tx.send(r);
    });
    rx.await
        .map_err(|_| "the measuring thread died".to_string())?
}

/// `total` runs of `print(1)`, `workers` at a time; runs per second.
pub async fn throughput(
    executor: &Path,
    door: &Door,
    total: usize,
    workers: usize,
    limits: &Limits,
) -> Result<f64, String> {
    door.ready().await?;
    let per = total.div_ceil(workers);
    let t0 = Instant::now();
    let worker = |_| async {
        for _ in 0..per {
            let s = spec(executor, "print(1)", limits.clone());
            let r = door.run(s).await?;
            check(&r, RunStatus::Completed)?;
        }
        Ok::<(), String>(())
    };
    let results = futures_util::future::join_all((0..workers).map(worker)).await;
    results.into_iter().collect::<Result<Vec<()>, String>>()?;
    Ok((per * workers) as f64 / t0.elapsed().as_secs_f64())
}

/// Summed PSS of each idle, attested executor tree (stage + guest) of a full pool; MiB.
pub async fn idle_pss_mib(pool: &Pool) -> Result<Vec<f64>, String> {
    ready(pool).await?;
    // Let start-up allocations settle.
    tokio::time::sleep(Duration::from_millis(200)).await;
    pool.idle_stage_pids()
        .into_iter()
        .map(crate::memory::tree_pss_mib)
        .collect()
}

/// [`idle_pss_mib`] of a pool the zygote feeds (each executor forked from it), each tree's
/// figure carrying an equal share of the zygote's own PSS: its pages count once in all.
pub async fn zygote_idle_pss_mib(
    executor: &Path,
    size: usize,
    limits: Limits,
) -> Result<Vec<f64>, String> {
    let zygote = Arc::new(zygote(executor).await?);
    let mut config = PoolConfig::new(size, executor.to_path_buf());
    config.limits = limits;
    config.zygote = Some(zygote.clone());
    let pool = Pool::start(config);
    let trees = idle_pss_mib(&pool).await;
    let own = crate::memory::tree_pss_mib(zygote.pid().await);
    pool.shutdown().await;
    let share = own? / size.max(1) as f64;
    Ok(trees?.into_iter().map(|t| t + share).collect())
}

/// A busy loop with a `budget` timeout; ms from the timeout firing to the result (tree reaped).
pub async fn kill_latency(
    executor: &Path,
    door: &Door,
    runs: usize,
    budget: Duration,
) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for _ in 0..runs {
        door.ready().await?;
        let mut l = limits(0);
        l.timeout = budget;
        let s = spec(executor, "while True:\n    pass", l);
        let t0 = Instant::now();
        let r = door.run(s).await?;
        check(&r, RunStatus::Timeout)?;
        out.push((t0.elapsed().saturating_sub(budget)).as_secs_f64() * 1e3);
    }
    Ok(out)
}

/// The interpreter every system runs: what airlock itself discovers for `python3`.
pub async fn python() -> Result<(PathBuf, String), String> {
    let i = airlock_broker::interpreter::discover(None)
        .await
        .map_err(|e| e.to_string())?;
    let version = i
        .version
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(".");
    Ok((i.executable, version))
}
