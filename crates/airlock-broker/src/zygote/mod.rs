//! The zygote: a fresh process per run without exec-ing an interpreter per run.
//!
//! One pristine CPython, started once with `-I -B -S`, has imported what the bootstrap needs
//! and loaded `libairlock_zygote.so`; it never runs untrusted code. For each run it forks a
//! child (`CLONE_PARENT`: the broker's child, as a spawned stage is) that runs the stage's own
//! Rust code — identity, user and mount namespace with the run's root, net/ipc/uts/pid/cgroup
//! namespaces, fork, pid 1: /proc, pivot_root, rlimits, Landlock, capabilities, no_new_privs —
//! and then, as pid 1, the bootstrap: seccomp, attestation, `execute`. The broker checks that
//! attestation exactly as for a cold run. What the stage's `execve` of the interpreter would
//! have done — start CPython, import the bootstrap's modules — the zygote did once.
//!
//! What the children share (the price, documented in docs/threat-model.md): the interpreter's
//! memory image as it was at the fork — its address-space layout (ASLR is per zygote, not per
//! run) and the `str` hash secret. No random generator is seeded in the zygote (the bootstrap
//! imports no `random`; a program that imports it seeds it from the kernel in its own run).
//! Runs that need a fresh layout per run use the exec-per-run path (`airlock_broker::run`).
//!
//! A run goes through the zygote when its workload is Python on the zygote's interpreter and
//! the interpreter is the host's (an image's interpreter never runs outside its sandbox);
//! anything else runs the exec-per-run way, with the same layers. A zygote that died is
//! started again before the next run.
mod control;
mod error;
mod library;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use airlock_executor::Mode;
use serde_json::{Map, Value};

use control::Control;
pub use error::ZygoteError;

use crate::interpreter;
use crate::limits::Limits;
use crate::result::RunResult;
use crate::run::{
    launch_via, not_started, prepare, refused_before_spawn, run_probe, supervise, supervise_via,
    Cancel, Launched, NotStarted, Prepared, RunSpec, Via,
};
use crate::tools::ToolHandler;

/// What the zygote is started with.
#[derive(Debug, Clone)]
pub struct ZygoteConfig {
    /// The interpreter (`python3` on PATH when None); runs asking for another one run the
    /// exec-per-run way.
    pub interpreter: Option<PathBuf>,
    /// The `airlock` binary (whose `__executor` serves the runs that do not fit).
    pub executor: PathBuf,
    /// `libairlock_zygote.so`; looked for beside `executor` when None.
    pub library: Option<PathBuf>,
    /// How long the zygote may take to start.
    pub startup_timeout: Duration,
    /// The build the library must come from (this binary's, `airlock_executor::zygote::build`,
    /// when None). Tests set another to see a mismatch refused.
    #[doc(hidden)]
    pub expected_build: Option<i64>,
}

impl ZygoteConfig {
    fn build(&self) -> i64 {
        self.expected_build
            .unwrap_or_else(airlock_executor::zygote::build)
    }
}

impl ZygoteConfig {
    /// A zygote on `python3` from PATH, its library beside `executor`.
    pub fn new(executor: PathBuf) -> Self {
        Self {
            interpreter: None,
            executor,
            library: None,
            startup_timeout: Duration::from_secs(10),
            expected_build: None,
        }
    }
}

/// Counters of what the zygote did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZygoteStats {
    /// Runs whose stage the zygote forked.
    pub forked_runs: u64,
    /// Runs that went the exec-per-run way (did not fit).
    pub exec_runs: u64,
    /// Times the zygote was started again after it died.
    pub restarts: u64,
}

/// A zygote serving runs. Create it inside a tokio runtime; dropping it stops the zygote (runs
/// already forked are the broker's children and end on their own terms).
#[derive(Debug)]
pub struct Zygote {
    config: ZygoteConfig,
    interpreter: PathBuf,
    library: PathBuf,
    control: tokio::sync::Mutex<Arc<Control>>,
    stats: Mutex<ZygoteStats>,
}

impl Zygote {
    /// Discover the interpreter and start the zygote on it.
    pub async fn start(config: ZygoteConfig) -> Result<Self, ZygoteError> {
        let interp = interpreter::discover(config.interpreter.as_deref())
            .await
            .map_err(|e| ZygoteError::Interpreter(e.to_string()))?;
        let library = match &config.library {
            Some(l) => l.clone(),
            None => library::locate(&config.executor)
                .ok_or_else(|| ZygoteError::Library(config.executor.clone()))?,
        };
        let control = Control::start(
            &interp.executable,
            &library,
            config.startup_timeout,
            config.build(),
        )
        .await?;
        Ok(Self {
            config,
            interpreter: interp.executable,
            library,
            control: tokio::sync::Mutex::new(Arc::new(control)),
            stats: Mutex::new(ZygoteStats::default()),
        })
    }

    /// The interpreter the zygote runs.
    pub fn interpreter(&self) -> &Path {
        &self.interpreter
    }

    /// The zygote's pid (of the current process, if it was restarted).
    pub async fn pid(&self) -> i32 {
        self.control.lock().await.pid()
    }

    /// What the zygote did so far.
    pub fn stats(&self) -> ZygoteStats {
        self.stats_mut().clone()
    }

    fn stats_mut(&self) -> MutexGuard<'_, ZygoteStats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run to the end (see [`crate::run`]): the zygote forks the stage if the run fits.
    pub async fn run(&self, spec: RunSpec, tools: &dyn ToolHandler) -> RunResult {
        self.run_cancellable(spec, tools, Box::pin(std::future::pending()))
            .await
    }

    /// [`Zygote::run`], ended early (status `cancelled`) when `cancel` resolves.
    pub async fn run_cancellable(
        &self,
        spec: RunSpec,
        tools: &dyn ToolHandler,
        cancel: Cancel,
    ) -> RunResult {
        let started = Instant::now();
        let mut prepared = match prepare(&spec, run_probe).await {
            Ok(p) => p,
            Err(refusal) => return refused_before_spawn(refusal, started),
        };
        if !self.fits(&prepared.config) {
            self.stats_mut().exec_runs += 1;
            return supervise(prepared, &spec.limits, tools, cancel, started).await;
        }
        let control = match self.forking(&mut prepared).await {
            Ok(c) => c,
            Err(refusal) => return refused_before_spawn(refusal, started),
        };
        let env: Map<String, Value> = std::mem::take(&mut prepared.config.env)
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        let via = Via::Zygote(&*control);
        let mut result = supervise_via(
            prepared,
            &spec.limits,
            tools,
            cancel,
            started,
            via,
            Some(&env),
        )
        .await;
        result.via = crate::result::Via::Zygote;
        result
    }

    /// Launch a prepared run's stage through the zygote, if it fits (None: it does not; the
    /// caller starts it the exec-per-run way). The environment is the caller's to send with
    /// the program. Used by a pool whose executors the zygote forks.
    pub(crate) async fn launch(
        &self,
        prepared: &mut Prepared,
        limits: &Limits,
    ) -> Option<Result<Launched, NotStarted>> {
        if !self.fits(&prepared.config) {
            self.stats_mut().exec_runs += 1;
            return None;
        }
        let control = match self.forking(prepared).await {
            Ok(c) => c,
            Err(refusal) => return Some(Err(refusal)),
        };
        Some(launch_via(prepared, limits, Via::Zygote(&*control)).await)
    }

    /// The live zygote, counted, with `prepared` made ready for it: the interpreter runs
    /// already, so no code object is handed over.
    async fn forking(&self, prepared: &mut Prepared) -> Result<Arc<Control>, NotStarted> {
        let control = self
            .live_control()
            .await
            .map_err(|e| not_started(airlock_protocol::ErrorCode::SandboxRefused, e.to_string()))?;
        self.stats_mut().forked_runs += 1;
        if let Mode::Python { bootstrap, .. } = &mut prepared.config.mode {
            *bootstrap = None;
        }
        Ok(control)
    }

    /// Whether a run with this executor config is one the zygote can fork: Python on the
    /// zygote's own (host) interpreter.
    fn fits(&self, config: &airlock_executor::ExecutorConfig) -> bool {
        match &config.mode {
            Mode::Python { interpreter, .. } => {
                !config.untrusted_interpreter && *interpreter == self.interpreter
            }
            Mode::Command { .. } => false,
        }
    }

    /// The running zygote, started again if it died.
    async fn live_control(&self) -> Result<Arc<Control>, ZygoteError> {
        let mut current = self.control.lock().await;
        if current.alive() {
            return Ok(Arc::clone(&current));
        }
        let fresh = Control::start(
            &self.interpreter,
            &self.library,
            self.config.startup_timeout,
            self.config.build(),
        )
        .await?;
        *current = Arc::new(fresh);
        self.stats_mut().restarts += 1;
        Ok(Arc::clone(&current))
    }

    /// Stop the zygote and wait until it is reaped.
    pub async fn shutdown(self) {
        let control = self.control.lock().await;
        control.stop().await;
    }
}
