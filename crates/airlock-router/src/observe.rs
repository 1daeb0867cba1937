//! Observer events: six records in the policy layer's own vocabulary, joined by the key.
//!
//! Failures are recorded as the error's *kind* (a `&'static str` naming the variant or type),
//! never its message, which can carry a backend's endpoint: the field types make a message
//! impossible to put there. An observer cannot fail a call: its panics are contained and
//! logged, and it returns nothing. It runs inline where the call is served, so it should hand
//! the event to a queue and do no I/O. A router with no observer builds no event at all.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use airlock_policy::{DisposalCode, Egress, Identity, IsolationScope, Refusal, SandboxKey};

/// Names an error by kind for records.
pub trait ErrorKind {
    /// The kind: a stable, message-free name.
    fn kind(&self) -> &'static str;
}

impl ErrorKind for Refusal {
    fn kind(&self) -> &'static str {
        Refusal::kind(self)
    }
}

/// An acquire, served or refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxAcquired {
    /// The sandbox's address.
    pub key: SandboxKey,
    /// The workload kind.
    pub kind: String,
    /// The egress the spec runs in.
    pub egress: Egress,
    /// The effective scope, when the checks got that far.
    pub scope: Option<IsolationScope>,
    /// The backend that served it, when one did.
    pub backend: Option<String>,
    /// Whether an existing sandbox was reused.
    pub reused: bool,
    /// The failure's kind, when the acquire failed.
    pub failure: Option<&'static str>,
}

/// A disposal, landed or not.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxDisposed {
    /// The sandbox's address.
    pub key: SandboxKey,
    /// The folded failure code, when the disposal did not land.
    pub failure: Option<DisposalCode>,
}

/// How a host-tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostToolOutcome {
    /// The tool ran and answered.
    Served,
    /// A gate refused the call.
    Refused,
    /// The run's host-tool-call cap was exhausted.
    CapExhausted,
    /// The tool body failed.
    Failed,
}

/// A host-tool call (emitted by the host-tool registry).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostToolCalled {
    /// The sandbox the call came from, when there was one.
    pub key: Option<SandboxKey>,
    /// The tool's registered name.
    pub tool: String,
    /// The tool's declared sink, if any.
    pub sink: Option<String>,
    /// The identity it exercised, if any.
    pub identity: Option<Identity>,
    /// How it ended.
    pub outcome: HostToolOutcome,
    /// Size of the answer returned to the guest.
    pub response_bytes: u64,
    /// The failure's kind, when it failed.
    pub failure: Option<&'static str>,
}

/// A file read out of the host's store for a call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreFileRead {
    /// The sandbox it was read for, when there was one.
    pub key: Option<SandboxKey>,
    /// The store path (host-chosen).
    pub path: String,
    /// Bytes read.
    pub bytes: u64,
    /// The failure's kind, when it failed.
    pub failure: Option<&'static str>,
}

/// A collection of declared outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutputsCollected {
    /// The sandbox collected from, when there was one.
    pub key: Option<SandboxKey>,
    /// Artifacts delivered.
    pub count: usize,
    /// Bytes delivered.
    pub bytes: u64,
    /// The failure's kind, when collection was refused part-way.
    pub failure: Option<&'static str>,
}

/// A tool call ended, however it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolCallEnded {
    /// Every key the call touched: acquired, refused, or only read under.
    pub keys: Vec<SandboxKey>,
    /// The tool's name.
    pub tool: String,
    /// Wall-clock duration of the call.
    pub elapsed: Duration,
    /// The failure's kind (`"cancelled"`, `"panic"`, a refusal's kind, or the body's error
    /// type), when it failed.
    pub failure: Option<&'static str>,
}

/// One allow/deny decision of a sandbox's egress proxy (emitted by a backend that serves the
/// `allowlist` egress mode, e.g. `local`). Host and port are what the guest asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EgressDecided {
    /// The sandbox the request came from.
    pub key: SandboxKey,
    /// The host asked for (bounded, guest-chosen).
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// Whether the proxy let it through.
    pub allowed: bool,
    /// `"allowed"`, or the deny reason's kind.
    pub reason: &'static str,
}

impl EgressDecided {
    /// A decision record.
    #[must_use]
    pub fn new(
        key: SandboxKey,
        host: String,
        port: u16,
        allowed: bool,
        reason: &'static str,
    ) -> Self {
        EgressDecided {
            key,
            host,
            port,
            allowed,
            reason,
        }
    }
}

/// Receives the six events of the reference, plus egress decisions; every method defaults to
/// doing nothing.
pub trait SandboxObserver: Send + Sync {
    /// An acquire was served or refused.
    fn sandbox_acquired(&self, _event: &SandboxAcquired) {}
    /// A disposal landed or did not.
    fn sandbox_disposed(&self, _event: &SandboxDisposed) {}
    /// A host-tool call ended.
    fn host_tool_called(&self, _event: &HostToolCalled) {}
    /// A store file was read for a call.
    fn store_file_read(&self, _event: &StoreFileRead) {}
    /// Outputs were collected.
    fn outputs_collected(&self, _event: &OutputsCollected) {}
    /// A tool call ended.
    fn tool_call_ended(&self, _event: &ToolCallEnded) {}
    /// An egress proxy decision.
    fn egress_decided(&self, _event: &EgressDecided) {}
}

/// An optional observer with containment: the one door every event goes through.
#[derive(Clone, Default)]
pub struct Observers(Option<Arc<dyn SandboxObserver>>);

impl std::fmt::Debug for Observers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Observers").field(&self.0.is_some()).finish()
    }
}

impl Observers {
    /// Wraps an observer (or none).
    #[must_use]
    pub fn new(observer: Option<Arc<dyn SandboxObserver>>) -> Observers {
        Observers(observer)
    }

    /// Whether anyone is listening.
    #[must_use]
    pub fn is_listening(&self) -> bool {
        self.0.is_some()
    }

    /// Builds the event only when someone listens, and delivers it with any panic contained.
    pub fn emit<E>(
        &self,
        build: impl FnOnce() -> E,
        deliver: impl FnOnce(&dyn SandboxObserver, &E),
    ) {
        let Some(observer) = &self.0 else { return };
        let event = build();
        let outcome = catch_unwind(AssertUnwindSafe(|| deliver(observer.as_ref(), &event)));
        if outcome.is_err() {
            tracing::warn!(
                event = std::any::type_name::<E>(),
                "sandbox observer panicked; the panic was contained"
            );
        }
    }
}

/// The short type name of `E`, for recording a caller's error as a kind.
#[must_use]
pub fn type_kind<E>() -> &'static str {
    let full = std::any::type_name::<E>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}
