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

/// The server's load at one moment, as readiness weighs it.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// A drain has begun.
    pub draining: bool,
    /// Live sandboxes and the most there may be (none when the server holds no sandboxes).
    pub sandboxes: Option<(usize, usize)>,
    /// Free authorized connection slots, and how many there are.
    pub connections: (usize, usize),
}

impl Readiness {
    /// Whether the server is ready under `load`, and if not why (logged once per change).
    pub async fn check(&self, load: Load) -> Result<(), NotReady> {
        let verdict = self.decide(load).await;
        self.log_change(&verdict);
        verdict
    }

    async fn decide(&self, load: Load) -> Result<(), NotReady> {
        if load.draining {
            return Err(NotReady::Draining);
        }
        if let Some((_, max)) = load.sandboxes.filter(|(live, max)| live >= max) {
            return Err(NotReady::SandboxesFull(max));
        }
        if load.connections.0 == 0 {
            return Err(NotReady::ConnectionsFull(load.connections.1));
        }
        self.layers().await.map_err(NotReady::LayerMissing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load() -> Load {
        Load {
            draining: false,
            sandboxes: Some((0, 2)),
            connections: (3, 4),
        }
    }

    #[tokio::test]
    async fn a_drain_or_a_full_server_is_unready_before_any_probe() {
        let r = Readiness::default();
        let draining = Load {
            draining: true,
            ..load()
        };
        assert_eq!(r.check(draining).await, Err(NotReady::Draining));
        let full = Load {
            sandboxes: Some((2, 2)),
            ..load()
        };
        assert_eq!(r.check(full).await, Err(NotReady::SandboxesFull(2)));
        let no_slot = Load {
            connections: (0, 4),
            ..load()
        };
        assert_eq!(r.check(no_slot).await, Err(NotReady::ConnectionsFull(4)));
        // None of those probed the layers.
        assert!(r.layers.lock().await.is_none());
    }
}
