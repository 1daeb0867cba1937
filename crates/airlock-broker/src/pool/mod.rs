//! The warm path: a pool of pre-started executors, each already fully isolated and attested,
//! each used for exactly one run.
//!
//! A pooled executor went through the very same start-up as a cold run — fresh stage process,
//! user/net/ipc/uts/mount/pid/cgroup namespaces, its own fresh work dir, rlimits, Landlock,
//! capabilities dropped, no_new_privs, CPython started, the run seccomp filter installed — and
//! the broker verified its attestation. It then waits, blocked on its socket, for `execute`. A
//! run takes one (the run's clock starts then), sends the program (with the run's environment,
//! which the trusted bootstrap applies before any untrusted code), and supervises it with the
//! same code as a cold run (`run::supervise::drive`). Nothing is shared between runs: not a
//! process, not an address space, not a work dir. The pool refills in the background.
//!
//! A spec the pool was not prepared for — another interpreter, a host work dir, a command
//! workload, kernel-side limits (memory, rlimits, cgroup, output cap) that differ from the
//! pool's profile — runs cold instead, so the pool never weakens or loosens a run.
//!
//! **Invariant:** a pooled executor is handed to at most one run; once the pool is dropped or
//! shut down, none of its executors survives.
mod config;
mod profile;
mod warm;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::result::RunResult;
use crate::run::{run_cancellable, Cancel, RunSpec};
use crate::tools::ToolHandler;
pub use config::PoolConfig;
use warm::Warm;

/// Pause after a failed pre-start before the filler tries again.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// Counters of what the pool did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Runs served by a pooled executor.
    pub warm_runs: u64,
    /// Runs that went the cold way (did not fit the profile, or the pool was empty).
    pub cold_runs: u64,
    /// Executors started and attested.
    pub started: u64,
    /// Pre-starts that failed (refused, crashed, timed out).
    pub failed: u64,
    /// Idle executors found dead when taken, and discarded.
    pub discarded: u64,
    /// The most recent pre-start failure.
    pub last_error: Option<String>,
}

struct Shared {
    config: PoolConfig,
    idle: Mutex<VecDeque<Warm>>,
    refill: Notify,
    stats: Mutex<PoolStats>,
}

impl Shared {
    fn idle(&self) -> MutexGuard<'_, VecDeque<Warm>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stats(&self) -> MutexGuard<'_, PoolStats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A pool of pre-started, attested, single-use executors. Create it inside a tokio runtime.
pub struct Pool {
    shared: Arc<Shared>,
    filler: JoinHandle<()>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("config", &self.shared.config)
            .field("idle", &self.idle())
            .finish()
    }
}

impl Pool {
    /// Start the pool; executors are pre-started in the background, one at a time.
    pub fn start(config: PoolConfig) -> Self {
        let shared = Arc::new(Shared {
            config,
            idle: Mutex::new(VecDeque::new()),
            refill: Notify::new(),
            stats: Mutex::new(PoolStats::default()),
        });
        let filler = tokio::spawn(fill(Arc::clone(&shared)));
        Self { shared, filler }
    }

    /// The profile this pool serves.
    pub fn config(&self) -> &PoolConfig {
        &self.shared.config
    }

    /// Whether `spec` can be served warm (otherwise [`Pool::run`] runs it cold).
    pub fn fits(&self, spec: &RunSpec) -> bool {
        profile::fits(&self.shared.config, spec)
    }

    /// Executors ready now.
    pub fn idle(&self) -> usize {
        self.shared.idle().len()
    }

    /// Stage pids of the executors ready now (for measuring what an idle sandbox costs).
    pub fn idle_stage_pids(&self) -> Vec<i32> {
        self.shared.idle().iter().map(Warm::stage_pid).collect()
    }

    /// What the pool has done so far.
    pub fn stats(&self) -> PoolStats {
        self.shared.stats().clone()
    }

    /// Wait until `size` executors are ready; false if that did not happen within `timeout`.
    pub async fn wait_full(&self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        while self.idle() < self.shared.config.size {
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    /// Run to the end, warm when the spec fits and an executor is ready, cold otherwise.
    /// Always returns exactly one result, after every process of the run is gone.
    pub async fn run(&self, spec: RunSpec, tools: &dyn ToolHandler) -> RunResult {
        self.run_cancellable(spec, tools, Box::pin(std::future::pending()))
            .await
    }

    /// [`Pool::run`], ended early (status `cancelled`) when `cancel` resolves.
    pub async fn run_cancellable(
        &self,
        spec: RunSpec,
        tools: &dyn ToolHandler,
        cancel: Cancel,
    ) -> RunResult {
        if self.fits(&spec) {
            // The run's clock starts when it is assigned an executor.
            let started = Instant::now();
            if let Some(warm) = self.take().await {
                self.shared.stats().warm_runs += 1;
                // Refill once the run is over (even if this future is dropped), so a pre-start
                // never competes with a run for the cores; an empty pool runs cold meanwhile.
                let _refill = RefillOnDrop(&self.shared.refill);
                let mut result = warm.run(&spec, tools, cancel, started).await;
                result.warm = true;
                return result;
            }
        }
        self.shared.stats().cold_runs += 1;
        run_cancellable(spec, tools, cancel).await
    }

    /// Take a live executor, discarding any that died while idle.
    async fn take(&self) -> Option<Warm> {
        loop {
            let next = self.shared.idle().pop_front();
            let mut warm = next?;
            if warm.alive() {
                return Some(warm);
            }
            self.shared.refill.notify_one();
            self.shared.stats().discarded += 1;
            warm.discard().await;
        }
    }

    /// Stop refilling, kill every idle executor and wait until each is reaped.
    pub async fn shutdown(self) {
        self.filler.abort();
        let idle: Vec<Warm> = self.shared.idle().drain(..).collect();
        for warm in idle {
            warm.discard().await;
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Dropping a warm executor kills its stage (kill_on_drop); pid 1 of the run dies with
        // it (parent-death signal) and the kernel empties the pid namespace; its cgroup is
        // killed and removed. An executor still starting is dropped with the aborted filler.
        self.filler.abort();
        self.shared.idle().clear();
    }
}

/// Wakes the filler when dropped.
struct RefillOnDrop<'a>(&'a Notify);

impl Drop for RefillOnDrop<'_> {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

async fn fill(shared: Arc<Shared>) {
    loop {
        while shared.idle().len() < shared.config.size {
            match Warm::start(&shared.config).await {
                Ok(warm) => {
                    shared.stats().started += 1;
                    shared.idle().push_back(warm);
                }
                Err(e) => {
                    {
                        let mut stats = shared.stats();
                        stats.failed += 1;
                        stats.last_error = Some(e);
                    }
                    tokio::time::sleep(RETRY_AFTER).await;
                }
            }
        }
        shared.refill.notified().await;
    }
}
