//! The server itself: what it is configured with ([`ServerConfig`]), the state every
//! connection shares ([`Shared`]), and its lifecycle (start, drain, shutdown: `drain`).
pub mod drain;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use airlock_broker::limits::Limits;

use crate::cancel::CancelToken;
use crate::ceilings::Ceilings;
use crate::telemetry::audit::AuditSink;
use airlock_broker::{Runner, RunnerConfig};

/// Everything a server is configured with.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The most a run may ask for.
    pub ceilings: Ceilings,
    /// Limits a run gets when it asks for nothing (lowered to the ceilings).
    pub defaults: Limits,
    /// The `airlock` binary, whose hidden `__executor` subcommand is the stage.
    pub executor: PathBuf,
    /// The Python interpreter (`python3` on PATH when None).
    pub interpreter: Option<PathBuf>,
    /// WebSocket connections served at once; more are closed on accept.
    pub max_connections: usize,
    /// How long the orchestrator has to answer one `call_tool`.
    pub tool_timeout: Duration,
    /// How long a shutdown waits for in-flight runs to end after cancelling them.
    pub shutdown_timeout: Duration,
    /// Where audit records go (none when None).
    pub audit: Option<Arc<AuditSink>>,
    /// The host's policy gate, asked before every run is spawned (None admits everything the
    /// sandbox itself allows). A refusal is answered `sandbox_refused` with its reason.
    pub admission: Option<Admission>,
    /// The front door of every run (`execute` and session runs alike): its slots and fair
    /// queue, and how each run's process comes to be (zygote, warm pool, exec). The local
    /// backend behind `sandboxes` must hold the same one.
    pub runner: Arc<Runner>,
    /// Sandboxes that persist across runs (`sandbox.*`, `files.*`); those methods are not
    /// served when None.
    pub sandboxes: Option<Arc<crate::registry::sandboxes::Sandboxes>>,
    /// What `/metrics` exposes; the sandbox registry's observer must count into the same one
    /// ([`crate::ops::metrics_observer::MetricsObserver`]).
    pub metrics: Arc<crate::ops::metrics::Metrics>,
    /// The rate each tenant's requests are read at (None: not limited).
    pub request_rates: Option<Arc<crate::tenancy::request_rate::RequestRates>>,
}

/// A policy decision for one workload: `uses_tools` is whether the run may call host tools.
#[derive(Clone)]
pub struct Admission(pub Arc<AdmitFn>);

/// The decision function behind an [`Admission`].
pub type AdmitFn = dyn Fn(&airlock_broker::Workload, bool) -> Result<(), String> + Send + Sync;

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Admission(..)")
    }
}

impl ServerConfig {
    /// Defaults: 2 runs per core, 256 connections, 60 s per tool call, 10 s shutdown drain.
    pub fn new(executor: PathBuf) -> Self {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Self {
            ceilings: Ceilings::default(),
            defaults: Limits::default(),
            executor,
            interpreter: None,
            max_connections: 256,
            tool_timeout: Duration::from_secs(60),
            shutdown_timeout: Duration::from_secs(10),
            audit: None,
            admission: None,
            runner: Arc::new(Runner::new(RunnerConfig::exec_per_run(2 * cores))),
            sandboxes: None,
            metrics: Arc::new(crate::ops::metrics::Metrics::new()),
            request_rates: None,
        }
    }
}

/// State shared by every connection of one server.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: ServerConfig,
    pub(crate) shutdown: CancelToken,
    pub(crate) next_conn: AtomicU64,
    pub(crate) next_run: AtomicU64,
    /// Distinguishes ids of this server process from a previous one's (start time, base 36).
    pub(crate) epoch: String,
    /// The WebSocket listener's address, once it listens (exposed ports are served there;
    /// a stdio server has none).
    pub(crate) listen: std::sync::OnceLock<std::net::SocketAddr>,
    /// Set when a drain begins (SIGTERM): no new sandbox or run is admitted, `/readyz` says
    /// unready, and what is in flight is let finish.
    pub(crate) draining: std::sync::atomic::AtomicBool,
    /// The `--max-connections` slots: authenticated WebSocket and proxied exposed-port
    /// connections (`/readyz` is unready when none is free).
    pub(crate) connections: Arc<tokio::sync::Semaphore>,
    /// The last probe of the required layers (`/readyz`).
    pub(crate) readiness: crate::ops::health::Readiness,
}

impl Shared {
    /// A run id unique in this server process (`execute` and session runs alike).
    pub(crate) fn mint_run_id(&self) -> String {
        let seq = self.next_run.fetch_add(1, Ordering::Relaxed);
        format!("run-{}-{seq}", self.epoch)
    }

    /// Forgets `run_id`'s cancel token.
    pub(crate) fn run_ended(&self, run_id: &str) {
        if let Some(s) = &self.config.sandboxes {
            s.run_ended(run_id);
        }
    }
}

/// A broker server. Cheap to clone; clones share state.
#[derive(Debug, Clone)]
pub struct Server {
    pub(crate) shared: Arc<Shared>,
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

impl Server {
    /// A server with `config`.
    pub fn new(config: ServerConfig) -> Self {
        let start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let epoch = base36(u64::try_from(start).unwrap_or(0));
        if let Some(sbs) = &config.sandboxes {
            config.metrics.watch(Arc::clone(sbs));
        }
        let connections = Arc::new(tokio::sync::Semaphore::new(config.max_connections.max(1)));
        Self {
            shared: Arc::new(Shared {
                config,
                shutdown: CancelToken::new(),
                next_conn: AtomicU64::new(1),
                next_run: AtomicU64::new(1),
                epoch,
                listen: std::sync::OnceLock::new(),
                draining: std::sync::atomic::AtomicBool::new(false),
                connections,
                readiness: crate::ops::health::Readiness::default(),
            }),
        }
    }

    /// Begin a graceful shutdown: stop accepting, cancel in-flight and queued runs, and answer
    /// each with its terminal response.
    pub fn shutdown(&self) {
        self.shared.shutdown.cancel();
    }

    /// Begin draining: admit nothing new from now on (what is in flight goes on).
    pub fn begin_drain(&self) {
        self.shared.draining.store(true, Ordering::SeqCst);
    }

    /// Whether a drain has begun.
    #[must_use]
    pub fn is_draining(&self) -> bool {
        self.shared.draining.load(Ordering::SeqCst)
    }

    /// The live-sandbox registry, when the server holds sandboxes.
    #[must_use]
    pub fn sandboxes(&self) -> Option<Arc<crate::registry::sandboxes::Sandboxes>> {
        self.shared.config.sandboxes.clone()
    }

    /// The token a shutdown cancels.
    pub fn shutdown_token(&self) -> CancelToken {
        self.shared.shutdown.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base36_renders_digits() {
        assert_eq!(base36(0), "0");
        assert_eq!(base36(35), "z");
        assert_eq!(base36(36), "10");
    }
}
