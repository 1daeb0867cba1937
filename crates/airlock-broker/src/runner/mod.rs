//! The one front door for every run: [`Runner`].
//!
//! Every caller — the CLI, `execute`, session runs, MCP, the local backend, the bench — hands
//! its run to a `Runner`, which decides how the run's process comes to be, by what the run
//! needs and what the machine offers, never by who asked:
//!
//! - a cell of a **stateful** sandbox goes to that sandbox's [`Kernel`];
//! - otherwise a run the **warm pool** was prepared for takes a pre-started executor;
//! - otherwise a run the **zygote** can serve (Python on the zygote's host interpreter) is
//!   forked from it, in its sandbox's own namespaces and root;
//! - anything else is **exec'd** cold (`airlock __executor`, then the interpreter or command).
//!
//! Every way has the same layers and the same attestation check; the result says which one
//! served the run ([`RunResult::via`]).
//!
//! Before that, the run takes one of the runner's slots. Over the ceiling it **queues** —
//! bounded, fair per sandbox then FIFO ([`queue`]) — for at most its own timeout; time spent
//! queued counts against that timeout and is reported as [`RunResult::queued_ms`]. Only a
//! full queue or a deadline that passes while queued is refused ([`QueueRefusal`]).
pub mod queue;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use queue::{QueueRefusal, SlotPermit, Slots};

use crate::kernel::Kernel;
use crate::pool::Pool;
use crate::result::{RunResult, RunStatus, Via};
use crate::run::{run_cancellable, Cancel, RunSpec, Workload};
use crate::tools::ToolHandler;
use crate::zygote::Zygote;

/// Queued runs allowed per run slot by default (see [`RunnerConfig::max_queued`]).
pub const DEFAULT_QUEUE_PER_SLOT: usize = 64;

/// How a [`Runner`] is set up.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// Runs executing at once (at least 1).
    pub slots: usize,
    /// Runs that may wait for a slot at once; one more is refused.
    pub max_queued: usize,
    /// The zygote runs that fit it are forked from; exec per run when None.
    pub zygote: Option<Arc<Zygote>>,
    /// Pre-started executors for runs that fit the pool's profile.
    pub pool: Option<Arc<Pool>>,
}

impl RunnerConfig {
    /// Exec per run, `slots` slots, a queue of [`DEFAULT_QUEUE_PER_SLOT`] per slot.
    #[must_use]
    pub fn exec_per_run(slots: usize) -> Self {
        let slots = slots.max(1);
        Self {
            slots,
            max_queued: slots.saturating_mul(DEFAULT_QUEUE_PER_SLOT),
            zygote: None,
            pool: None,
        }
    }

    /// Two slots per core, exec per run.
    #[must_use]
    pub fn for_this_machine() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        Self::exec_per_run(2 * cores)
    }
}

/// One run as a caller hands it over.
pub struct Job<'a> {
    /// What to run, in which sandbox, under which limits (its timeout covers time queued).
    pub spec: RunSpec,
    /// Where its tool calls go.
    pub tools: &'a dyn ToolHandler,
    /// Ends the run (or its wait for a slot) early when it resolves.
    pub cancel: Cancel,
    /// The sandbox it belongs to: its turn in the queue.
    pub sandbox: &'a str,
    /// The sandbox's kernel when the sandbox is stateful: Python runs are its cells.
    pub kernel: Option<&'a mut Kernel>,
}

impl std::fmt::Debug for Job<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("workload", &self.spec.workload)
            .field("sandbox", &self.sandbox)
            .field("kernel", &self.kernel.is_some())
            .finish_non_exhaustive()
    }
}

/// The front door. Cheap to share (`Arc`); create it inside a tokio runtime when it has a
/// pool.
pub struct Runner {
    slots: Slots,
    zygote: Option<Arc<Zygote>>,
    pool: Option<Arc<Pool>>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("slots", &self.slots)
            .field("zygote", &self.zygote.is_some())
            .field("pool", &self.pool.is_some())
            .finish()
    }
}

impl Default for Runner {
    fn default() -> Self {
        Runner::new(RunnerConfig::for_this_machine())
    }
}

impl Runner {
    /// A runner as `config` says.
    #[must_use]
    pub fn new(config: RunnerConfig) -> Self {
        Runner {
            slots: Slots::new(config.slots, config.max_queued),
            zygote: config.zygote,
            pool: config.pool,
        }
    }

    /// Its slots and queue.
    #[must_use]
    pub fn slots(&self) -> &Slots {
        &self.slots
    }

    /// The zygote it forks from, if any.
    #[must_use]
    pub fn zygote(&self) -> Option<&Arc<Zygote>> {
        self.zygote.as_ref()
    }

    /// The warm pool, if any.
    #[must_use]
    pub fn pool(&self) -> Option<&Arc<Pool>> {
        self.pool.as_ref()
    }

    /// Run `job` to the end: wait for a slot, then start its process the best way that fits.
    /// Exactly one result for a run that got a slot (or was cancelled while it waited), after
    /// every process of the run is gone; a refusal only when it got no slot.
    pub async fn run(&self, job: Job<'_>) -> Result<RunResult, QueueRefusal> {
        let Job {
            mut spec,
            tools,
            mut cancel,
            sandbox,
            kernel,
        } = job;
        let asked = Instant::now();
        let timeout = spec.limits.timeout;
        let permit = tokio::select! {
            p = self.slots.acquire(sandbox, timeout) => p?,
            () = &mut cancel => return Ok(cancelled_while_queued(asked.elapsed())),
        };
        let queued = asked.elapsed();
        spec.limits.timeout = timeout.saturating_sub(queued);
        if spec.limits.timeout.is_zero() {
            return Err(QueueRefusal::Deadline {
                slots: self.slots.slots(),
                waited_ms: millis(queued),
            });
        }
        let mut result = self.start(spec, tools, cancel, kernel).await;
        drop(permit);
        result.queued_ms = queued.as_secs_f64() * 1000.0;
        Ok(result)
    }

    /// Start the run the way that fits it, and supervise it to the end.
    async fn start(
        &self,
        spec: RunSpec,
        tools: &dyn ToolHandler,
        cancel: Cancel,
        kernel: Option<&mut Kernel>,
    ) -> RunResult {
        if let (Some(kernel), Workload::Python { .. }) = (kernel, &spec.workload) {
            let mut result = kernel.run(spec, tools, cancel).await;
            result.via = Via::Kernel;
            return result;
        }
        if let Some(pool) = self.pool.as_ref().filter(|p| p.fits(&spec)) {
            let mut result = pool.run_cancellable(spec, tools, cancel).await;
            if result.warm {
                result.via = Via::Pool;
            }
            return result;
        }
        match &self.zygote {
            Some(zygote) => zygote.run_cancellable(spec, tools, cancel).await,
            None => run_cancellable(spec, tools, cancel).await,
        }
    }

    /// Stop the pool and the zygote (if this runner holds the last reference to them) and wait
    /// until their processes are reaped.
    pub async fn shutdown(self) {
        if let Some(pool) = self.pool.and_then(|p| Arc::try_unwrap(p).ok()) {
            pool.shutdown().await;
        }
        if let Some(zygote) = self.zygote.and_then(|z| Arc::try_unwrap(z).ok()) {
            zygote.shutdown().await;
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The result of a run cancelled before it had a slot: no process ever existed.
fn cancelled_while_queued(waited: Duration) -> RunResult {
    let mut r = RunResult::not_started(
        airlock_protocol::ErrorCode::Shutdown,
        "the run was cancelled while it waited for a run slot; nothing ran",
    );
    r.status = RunStatus::Cancelled;
    r.queued_ms = waited.as_secs_f64() * 1000.0;
    r
}
