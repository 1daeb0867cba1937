//! A graceful drain, for a server asked to stop (SIGTERM or SIGINT in `airlock serve`): nothing
//! new is admitted (a request that would make a sandbox or start a process is answered
//! `shutdown`, `data.kind` `Draining`), runs in flight are let finish up to a grace period,
//! then the server shuts down as before (a run still going is cancelled and answered). Once
//! the transports have stopped, every live sandbox whose spec allows `snapshot` is paused to
//! the state directory, for a server started on the same directory to resume; the others are
//! disposed of (their spec never let their files be written to disk).
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use airlock_policy::Capability;
use airlock_protocol::{method as m, ErrorCode, ErrorObject};
use futures_util::StreamExt;
use serde_json::json;

use crate::registry::sandboxes::{Held, Sandboxes};
use crate::server::{Server, Shared};

/// How often the grace looks whether the runs in flight have ended.
const POLL: Duration = Duration::from_millis(50);
/// Sandboxes paused at once when the drain ends (each pause is disk-bound: a few at a time
/// keep the disk busy without a thundering herd of kernels saving at once).
const PAUSES_AT_ONCE: usize = 4;

/// How long the end of a drain waits for a sandbox's claim to clear before pausing it: a
/// snapshot, pause or fork whose connection the shutdown timeout aborted holds it until its
/// task is dropped, which the runtime does soon after, not at once.
const CLAIM_WAIT: Duration = Duration::from_secs(10);

/// The methods a draining server refuses: each would make a sandbox (a resume, a fork, a
/// create) or start a process (a run, a background process). A call on a paused sandbox,
/// which would resume it, is refused too (`dispatch.rs`, `on_paused`).
const ADMITTING: [&str; 7] = [
    m::EXECUTE,
    m::SANDBOX_CREATE,
    m::SANDBOX_RUN_CODE,
    m::SANDBOX_EXEC,
    m::SANDBOX_FORK,
    m::SANDBOX_RESUME,
    m::PROCESS_START,
];

/// The answer to a request a draining server does not admit.
#[must_use]
pub fn draining_error() -> ErrorObject {
    ErrorObject::new(
        ErrorCode::Shutdown,
        "the broker is draining (shutting down) and admits nothing new; retry against another \
         broker, or this one's successor",
    )
    .with_data(json!({ "kind": "Draining" }))
}

/// Whether the server is draining.
pub(crate) fn is_draining(shared: &Shared) -> bool {
    shared.draining.load(Ordering::SeqCst)
}

/// The refusal of `method` when the server is draining and the method would admit new work.
pub(crate) fn refusal(shared: &Shared, method: &str) -> Option<ErrorObject> {
    (is_draining(shared) && ADMITTING.contains(&method)).then(draining_error)
}

/// How the grace of a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraceEnd {
    /// Every run in flight ended on its own.
    RunsEnded,
    /// The grace period passed with `left` runs in flight (they are cancelled).
    Deadline {
        /// Runs still in flight.
        left: usize,
    },
    /// A second signal cut the grace short with `left` runs in flight (they are cancelled).
    Hurried {
        /// Runs still in flight.
        left: usize,
    },
}

impl Server {
    /// Drain: admit nothing new from now on, wait until the runs in flight have ended, `grace`
    /// has passed or `hurry` resolves (a second signal), then shut down (cancelling what is
    /// left, each run still answered). The transports then stop as on any shutdown; park the
    /// sandboxes with [`Sandboxes::pause_or_dispose_all`] after they have.
    pub async fn drain(&self, grace: Duration, hurry: impl Future<Output = ()>) -> GraceEnd {
        self.begin_drain();
        tracing::info!(
            grace_s = grace.as_secs_f64(),
            runs = self.runs_in_flight(),
            "draining: nothing new is admitted; runs in flight may finish"
        );
        let end = tokio::select! {
            () = self.runs_ended() => GraceEnd::RunsEnded,
            () = tokio::time::sleep(grace) => GraceEnd::Deadline { left: self.runs_in_flight() },
            () = hurry => GraceEnd::Hurried { left: self.runs_in_flight() },
        };
        match end {
            GraceEnd::RunsEnded => tracing::info!("draining: every run in flight has ended"),
            GraceEnd::Deadline { left } => {
                tracing::warn!(
                    left,
                    "draining: the grace is over; cancelling the runs left"
                )
            }
            GraceEnd::Hurried { left } => {
                tracing::warn!(left, "draining: asked again; cancelling the runs left now")
            }
        }
        self.shutdown();
        end
    }

    /// Runs in flight (queued for a slot included): every `execute` and session run is
    /// registered with the sandbox registry while it lasts. None without a registry.
    fn runs_in_flight(&self) -> usize {
        self.shared
            .config
            .sandboxes
            .as_ref()
            .map_or(0, |s| s.runs_in_flight())
    }

    async fn runs_ended(&self) {
        while self.runs_in_flight() > 0 {
            tokio::time::sleep(POLL).await;
        }
    }
}

/// What the end of a drain did with each live sandbox.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Parked {
    /// Sandboxes paused to the state directory (their ids).
    pub paused: Vec<String>,
    /// Sandboxes disposed of (their ids).
    pub disposed: Vec<String>,
}

/// What became of one sandbox.
enum Fate {
    Paused(String),
    Disposed(String),
}

impl Sandboxes {
    /// The end of a drain, once no run is left: pause every live sandbox whose spec allows
    /// `snapshot` (durable before this returns: the pause path), dispose of the others and of
    /// any whose pause failed. Each is logged.
    pub async fn pause_or_dispose_all(&self) -> Parked {
        let fates: Vec<Fate> = futures_util::stream::iter(self.held())
            .map(|h| self.park(h))
            .buffer_unordered(PAUSES_AT_ONCE)
            .collect()
            .await;
        let mut parked = Parked::default();
        for fate in fates {
            match fate {
                Fate::Paused(id) => parked.paused.push(id),
                Fate::Disposed(id) => parked.disposed.push(id),
            }
        }
        parked.paused.sort();
        parked.disposed.sort();
        tracing::info!(
            paused = parked.paused.len(),
            disposed = parked.disposed.len(),
            "drained"
        );
        parked
    }

    /// Pause `held` if its spec allows it and there is a state directory, else dispose of it.
    async fn park(&self, held: Arc<Held>) -> Fate {
        let id = held.id.clone();
        let why = if held.allows(Capability::Snapshot).is_err() {
            "its spec does not allow snapshot (its files are never written to disk)"
        } else if self.state_dir().is_none() {
            "the server has no state directory"
        } else {
            unclaimed(&held).await;
            match self.pause(&id).await {
                Ok(captured) => {
                    let snapshot = captured.snapshot_id.as_str();
                    tracing::info!(sandbox = %id, snapshot, "drain: paused");
                    return Fate::Paused(id);
                }
                Err(e) => {
                    tracing::warn!(sandbox = %id, error = %e.message, "drain: pause failed");
                    "its pause failed"
                }
            }
        };
        let _ = self.dispose(&id).await;
        tracing::info!(sandbox = %id, why, "drain: disposed");
        Fate::Disposed(id)
    }
}

/// Wait (at most [`CLAIM_WAIT`]) until nothing holds `held`'s claim: no run is left by then, so
/// a claim is a snapshot, pause or fork cut by the shutdown, released when its task is dropped
/// (`serve::ops_redteam::a_snapshot_cut_by_the_shutdown_timeout_does_not_make_the_drain_dispose_its_sandbox`).
async fn unclaimed(held: &Held) {
    let end = tokio::time::Instant::now() + CLAIM_WAIT;
    while held.running().is_some() && tokio::time::Instant::now() < end {
        tokio::time::sleep(POLL).await;
    }
}
