//! Liveness and readiness (`GET /healthz`, `GET /readyz`).
//!
//! Alive is the process answering. Ready is: no drain has begun, the server is below its
//! capacity of live sandboxes (`--max-sandboxes`) and of authorized connections
//! (`--max-connections`), and every kernel layer `airlock doctor` calls required
//! ([`airlock_jail::doctor::REQUIRED`]) holds. The layers are re-probed with the doctor's own
//! forked probes at most once per [`LAYER_CACHE`], one probe at a time, on a blocking thread.
//! The reason the server is not ready goes to its log (once per change), never to the client:
//! both answers are fixed bodies.
use std::time::{Duration, Instant};

use airlock_jail::doctor::{check_all, REQUIRED};

use crate::Shared;

/// How long one probe of the kernel layers is trusted.
pub const LAYER_CACHE: Duration = Duration::from_secs(5);

/// Why the server is not ready (logged, never answered).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotReady {
    /// A drain has begun.
    #[error("draining")]
    Draining,
    /// `--max-sandboxes` sandboxes are live.
    #[error("at the capacity of {0} live sandboxes")]
    SandboxesFull(usize),
    /// Every authorized connection slot is taken.
    #[error("at the capacity of {0} connections")]
    ConnectionsFull(usize),
    /// A required layer does not hold.
    #[error("required layer missing: {0}")]
    LayerMissing(String),
}

/// The server's readiness state: the last probe of the layers, and the last verdict logged.
#[derive(Debug, Default)]
pub struct Readiness {
    layers: tokio::sync::Mutex<Option<(Instant, Result<(), String>)>>,
    logged: std::sync::Mutex<Option<Result<(), NotReady>>>,
}

/// The required layers that do not hold, by the doctor's probes (`Ok` when every one does).
fn probe_layers() -> Result<(), String> {
    let missing: Vec<String> = check_all()
        .into_iter()
        .filter(|l| REQUIRED.contains(&l.layer.as_str()) && !l.available)
        .map(|l| format!("{} ({})", l.layer, l.detail))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("; "))
    }
}

impl Readiness {
    /// The layers' verdict, probed again when the last probe is older than [`LAYER_CACHE`].
    async fn layers(&self) -> Result<(), String> {
        let mut last = self.layers.lock().await;
        if let Some((at, verdict)) = last.as_ref() {
            if at.elapsed() < LAYER_CACHE {
                return verdict.clone();
            }
        }
        let verdict = tokio::task::spawn_blocking(probe_layers)
            .await
            .unwrap_or_else(|e| Err(format!("the layer probe failed: {e}")));
        *last = Some((Instant::now(), verdict.clone()));
        verdict
    }

    /// Logs `verdict` when it differs from the last one logged.
    fn log_change(&self, verdict: &Result<(), NotReady>) {
        let mut logged = self.logged.lock().unwrap_or_else(|p| p.into_inner());
        if logged.as_ref() == Some(verdict) {
            return;
        }
        match verdict {
            Ok(()) => tracing::info!("ready"),
            Err(why) => tracing::warn!(reason = %why, "not ready"),
        }
        *logged = Some(verdict.clone());
    }
}

/// Whether the server is ready now, and if not why.
pub(crate) async fn check(shared: &Shared) -> Result<(), NotReady> {
    let verdict = decide(shared).await;
    shared.readiness.log_change(&verdict);
    verdict
}

async fn decide(shared: &Shared) -> Result<(), NotReady> {
    if shared.draining.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(NotReady::Draining);
    }
    if let Some(sbs) = &shared.config.sandboxes {
        if sbs.len() >= sbs.max_live() {
            return Err(NotReady::SandboxesFull(sbs.max_live()));
        }
    }
    if shared.connections.available_permits() == 0 {
        return Err(NotReady::ConnectionsFull(shared.config.max_connections));
    }
    shared
        .readiness
        .layers()
        .await
        .map_err(NotReady::LayerMissing)
}
