//! The router: resolves a backend for a spec, refuses before touching one, and keeps one live
//! sandbox per key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use airlock_policy::{
    decide, BackendProfile, Capability, Decision, DisposalFailure, FailedReclaimPolicy, HostPolicy,
    Identity, Isolation, IsolationScope, KeyError, Policy, Refusal, SandboxKey, SandboxSpec,
    TransferLimits,
};
use thiserror::Error;

use crate::backend::{Backend, BackendError, Origin};
use crate::observe::{ErrorKind, Observers, SandboxAcquired, SandboxObserver};
use crate::reclaim_failure::ReclaimFailure;
use crate::sandbox::Sandbox;

/// How the router picks a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Selection {
    /// One backend, resolved at construction: the `selected` one, else the first registered.
    #[default]
    Fixed,
    /// Per spec: the first registered backend passing every check.
    PerSpec,
}

/// A router that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RouterConfigError {
    /// No backend registered.
    #[error("no sandbox backend registered")]
    NoBackends,
    /// Two backends share a name.
    #[error("two sandbox backends are both named {0:?}")]
    DuplicateName(String),
    /// `selected` names no registered backend.
    #[error("selected sandbox backend {0:?} is not registered")]
    UnknownSelected(String),
    /// `selected` and per-spec routing were asked together.
    #[error("a selected backend and per-spec routing are refused together")]
    SelectedWithPerSpec,
    /// The fixed backend (or, per spec, every backend) is below the host floor.
    #[error(transparent)]
    NotPermitted(Refusal),
}

/// An acquire that did not produce a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum AcquireError {
    /// A policy check refused it; no backend was touched.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The key cannot address a sandbox of the effective scope.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// A branch was to be made under a key that already has a live sandbox.
    #[error("sandbox key {key} is in use: a branch needs a key of its own")]
    KeyInUse {
        /// The key.
        key: String,
    },
    /// The backend failed to hand one out.
    #[error("sandbox backend {backend:?} failed to acquire: {source}")]
    Backend {
        /// The backend.
        backend: String,
        /// Its error.
        source: BackendError,
    },
}

impl ErrorKind for AcquireError {
    fn kind(&self) -> &'static str {
        match self {
            AcquireError::Refused(r) => r.kind(),
            AcquireError::Key(_) => "SandboxKeyInvalid",
            AcquireError::KeyInUse { .. } => "SandboxKeyInUse",
            AcquireError::Backend { source, .. } => source.kind(),
        }
    }
}

/// Called once per reclaim failure, after the framework acted on it.
pub type ReclaimHook = Arc<dyn Fn(&ReclaimFailure) + Send + Sync>;

/// Builds a [`Router`].
#[must_use]
pub struct RouterBuilder<B> {
    backends: Vec<Arc<B>>,
    host: HostPolicy,
    selection: Selection,
    selected: Option<String>,
    failed_reclaim: FailedReclaimPolicy,
    dispose_timeout: Duration,
    reclaim_timeout: Duration,
    observer: Option<Arc<dyn SandboxObserver>>,
    on_reclaim_failure: Option<ReclaimHook>,
}

impl<B> std::fmt::Debug for RouterBuilder<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouterBuilder")
            .field("backends", &self.backends.len())
            .field("host", &self.host)
            .field("selection", &self.selection)
            .finish_non_exhaustive()
    }
}

impl<B: Backend> RouterBuilder<B> {
    /// The isolation floor (default microvm). Opting down is explicit.
    pub fn min_isolation(mut self, floor: Isolation) -> Self {
        self.host.min_isolation = floor;
        self
    }
    /// The scope floor (default conversation).
    pub fn min_isolation_scope(mut self, scope: IsolationScope) -> Self {
        self.host.min_isolation_scope = scope;
        self
    }
    /// Capabilities no workload may require.
    pub fn denied_capabilities(mut self, caps: impl IntoIterator<Item = Capability>) -> Self {
        self.host.denied_capabilities = caps.into_iter().collect();
        self
    }
    /// Identities no workload may exercise.
    pub fn denied_identities(mut self, ids: impl IntoIterator<Item = Identity>) -> Self {
        self.host.denied_identities = ids.into_iter().collect();
        self
    }
    /// The host's transfer ceilings.
    pub fn transfer_ceilings(
        mut self,
        files_in: Option<TransferLimits>,
        files_out: Option<TransferLimits>,
    ) -> Self {
        self.host.files_in_ceiling = files_in;
        self.host.files_out_ceiling = files_out;
        self
    }
    /// Replaces the whole host policy.
    pub fn host_policy(mut self, host: HostPolicy) -> Self {
        self.host = host;
        self
    }
    /// Applies a parsed `policy.toml`.
    pub fn policy(mut self, policy: &Policy) -> Self {
        self.host = policy.host.clone();
        self.failed_reclaim = policy.failed_reclaim;
        self
    }
    /// The selection mode.
    pub fn selection(mut self, selection: Selection) -> Self {
        self.selection = selection;
        self
    }
    /// Pins the fixed backend by name.
    pub fn selected(mut self, name: impl Into<String>) -> Self {
        self.selected = Some(name.into());
        self
    }
    /// What to do with a sandbox whose per-call reclaim failed (default dispose).
    pub fn failed_reclaim(mut self, policy: FailedReclaimPolicy) -> Self {
        self.failed_reclaim = policy;
        self
    }
    /// Bound on each backend's disposal (default 30 s).
    pub fn dispose_timeout(mut self, t: Duration) -> Self {
        self.dispose_timeout = t;
        self
    }
    /// Bound on each leg of a call's reclaim (default 10 s).
    pub fn reclaim_timeout(mut self, t: Duration) -> Self {
        self.reclaim_timeout = t;
        self
    }
    /// The observer.
    pub fn observer(mut self, observer: Arc<dyn SandboxObserver>) -> Self {
        self.observer = Some(observer);
        self
    }
    /// The host's reclaim-failure notification.
    pub fn on_reclaim_failure(
        mut self,
        hook: impl Fn(&ReclaimFailure) + Send + Sync + 'static,
    ) -> Self {
        self.on_reclaim_failure = Some(Arc::new(hook));
        self
    }

    /// Validates the registration and builds the router.
    pub fn build(self) -> Result<Router<B>, RouterConfigError> {
        if self.backends.is_empty() {
            return Err(RouterConfigError::NoBackends);
        }
        for (i, b) in self.backends.iter().enumerate() {
            if self.backends[..i].iter().any(|o| o.name() == b.name()) {
                return Err(RouterConfigError::DuplicateName(b.name().to_owned()));
            }
        }
        let floor = self.host.min_isolation;
        let below = |b: &Arc<B>| Refusal::BackendNotPermitted {
            backend: b.name().to_owned(),
            isolation: b.isolation(),
            floor,
        };
        let mut warnings = Vec::new();
        let resolved = match (self.selection, &self.selected) {
            (Selection::PerSpec, Some(_)) => return Err(RouterConfigError::SelectedWithPerSpec),
            (Selection::Fixed, selected) => {
                let index = match selected {
                    Some(name) => self
                        .backends
                        .iter()
                        .position(|b| b.name() == name)
                        .ok_or_else(|| RouterConfigError::UnknownSelected(name.clone()))?,
                    None => 0,
                };
                let b = &self.backends[index];
                if !b.isolation().meets_floor(floor) {
                    return Err(RouterConfigError::NotPermitted(below(b)));
                }
                Resolved::Fixed(index)
            }
            (Selection::PerSpec, None) => {
                if !self
                    .backends
                    .iter()
                    .any(|b| b.isolation().meets_floor(floor))
                {
                    return Err(RouterConfigError::NotPermitted(Refusal::NoBackendServes {
                        kind: "any".to_owned(),
                        refusals: self.backends.iter().map(below).collect(),
                    }));
                }
                for b in self
                    .backends
                    .iter()
                    .filter(|b| !b.isolation().meets_floor(floor))
                {
                    let w = format!(
                        "sandbox backend {:?} declares {}, below the {floor} floor: it stays registered (disposal reaches it) and is never routed to",
                        b.name(),
                        b.isolation()
                    );
                    tracing::warn!("{w}");
                    warnings.push(w);
                }
                Resolved::PerSpec
            }
        };
        Ok(Router {
            inner: Arc::new(Inner {
                backends: self.backends,
                host: self.host,
                resolved,
                failed_reclaim: self.failed_reclaim,
                dispose_timeout: self.dispose_timeout,
                reclaim_timeout: self.reclaim_timeout,
                observers: Observers::new(self.observer),
                on_reclaim_failure: self.on_reclaim_failure,
                warnings,
                slots: Mutex::new(HashMap::new()),
                unclean: Mutex::new(HashMap::new()),
                unclean_conversations: Mutex::new(HashMap::new()),
            }),
        })
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Resolved {
    Fixed(usize),
    PerSpec,
}

/// One key's live sandboxes, by backend index. Its async mutex single-flights the key.
#[derive(Debug)]
pub(crate) struct Slot<S> {
    pub(crate) live: Vec<(usize, Arc<S>)>,
    /// The spec the live sandboxes were made for (set with the first, cleared with the last).
    pub(crate) spec: Option<SandboxSpec>,
}

impl<S> Default for Slot<S> {
    fn default() -> Self {
        Slot {
            live: Vec::new(),
            spec: None,
        }
    }
}

pub(crate) type SlotHandle<S> = Arc<tokio::sync::Mutex<Slot<S>>>;

pub(crate) struct Inner<B: Backend> {
    pub(crate) backends: Vec<Arc<B>>,
    pub(crate) host: HostPolicy,
    pub(crate) resolved: Resolved,
    pub(crate) failed_reclaim: FailedReclaimPolicy,
    pub(crate) dispose_timeout: Duration,
    pub(crate) reclaim_timeout: Duration,
    pub(crate) observers: Observers,
    pub(crate) on_reclaim_failure: Option<ReclaimHook>,
    pub(crate) warnings: Vec<String>,
    pub(crate) slots: Mutex<HashMap<SandboxKey, SlotHandle<B::Sandbox>>>,
    pub(crate) unclean: Mutex<HashMap<SandboxKey, DisposalFailure>>,
    pub(crate) unclean_conversations: Mutex<HashMap<(String, String), DisposalFailure>>,
}

/// Locks a std mutex, recovering from poisoning (the maps hold no invariant a panic breaks).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Routes workloads to backends under the host's policy. Cheap to clone.
///
/// Generic over its backends' type: an acquire hands out the backend's own sandbox type
/// (`B::Sandbox`), so a caller never looks the sandbox up again in the backend.
pub struct Router<B: Backend> {
    pub(crate) inner: Arc<Inner<B>>,
}

impl<B: Backend> Clone for Router<B> {
    fn clone(&self) -> Self {
        Router {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<B: Backend> std::fmt::Debug for Router<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("backends", &self.backend_names())
            .field("host", &self.inner.host)
            .field("resolved", &self.inner.resolved)
            .finish_non_exhaustive()
    }
}

/// What an acquire learned, for its observers.
#[derive(Debug, Default)]
struct Seen {
    scope: Option<IsolationScope>,
    backend: Option<String>,
    reused: bool,
}

/// What a successful route settled.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub(crate) index: usize,
    pub(crate) decision: Decision,
}

impl<B: Backend> Router<B> {
    /// A builder over `backends`, in preference order, with the production posture.
    pub fn builder(backends: Vec<Arc<B>>) -> RouterBuilder<B> {
        RouterBuilder {
            backends,
            host: HostPolicy::default(),
            selection: Selection::Fixed,
            selected: None,
            failed_reclaim: FailedReclaimPolicy::Dispose,
            dispose_timeout: Duration::from_secs(30),
            reclaim_timeout: Duration::from_secs(10),
            observer: None,
            on_reclaim_failure: None,
        }
    }

    /// The host policy in force.
    #[must_use]
    pub fn host_policy(&self) -> &HostPolicy {
        &self.inner.host
    }

    /// The registered backends, in registration order.
    #[must_use]
    pub fn backends(&self) -> &[Arc<B>] {
        &self.inner.backends
    }

    /// The registered backends' names, in registration order.
    #[must_use]
    pub fn backend_names(&self) -> Vec<&str> {
        self.inner.backends.iter().map(|b| b.name()).collect()
    }

    /// Warnings emitted at construction (below-floor registrations under per-spec routing).
    #[must_use]
    pub fn warnings(&self) -> &[String] {
        &self.inner.warnings
    }

    pub(crate) fn route(&self, spec: &SandboxSpec) -> Result<Route, Refusal> {
        let check = |index: usize| {
            let b = &self.inner.backends[index];
            decide(
                &self.inner.host,
                BackendProfile {
                    name: b.name(),
                    isolation: b.isolation(),
                    declarations: b.declarations(),
                },
                spec,
            )
            .map(|decision| Route { index, decision })
        };
        match self.inner.resolved {
            Resolved::Fixed(index) => check(index),
            Resolved::PerSpec => {
                let mut refusals = Vec::new();
                for index in 0..self.inner.backends.len() {
                    match check(index) {
                        Ok(route) => return Ok(route),
                        Err(r) => refusals.push(r),
                    }
                }
                Err(Refusal::NoBackendServes {
                    kind: spec.kind().to_owned(),
                    refusals,
                })
            }
        }
    }

    /// Runs every check `acquire` runs, without touching a backend, and names the backend
    /// that would serve `spec`. The whole of a wiring test.
    pub fn ensure_can_serve(&self, spec: &SandboxSpec) -> Result<&str, Refusal> {
        self.route(spec)
            .map(|r| self.inner.backends[r.index].name())
    }

    fn unclean_refusal(&self, key: &SandboxKey) -> Option<Refusal> {
        if let Some(f) = lock(&self.inner.unclean).get(key) {
            return Some(Refusal::Unclean {
                key: key.to_string(),
                code: f.code(),
            });
        }
        let conv = (key.scope().to_owned(), key.thread_id().to_owned());
        lock(&self.inner.unclean_conversations)
            .get(&conv)
            .map(|f| Refusal::Unclean {
                key: key.to_string(),
                code: f.code(),
            })
    }

    pub(crate) fn slot(&self, key: &SandboxKey) -> SlotHandle<B::Sandbox> {
        Arc::clone(lock(&self.inner.slots).entry(key.clone()).or_default())
    }

    /// Gets or creates the sandbox for `key` under `spec`.
    ///
    /// Every check runs before any backend is touched; an unclean key is refused; concurrent
    /// acquires of one key return one sandbox. A conversation-scoped sandbox is addressed
    /// without the key's call id; a call-scoped one requires it.
    pub async fn acquire(
        &self,
        key: &SandboxKey,
        spec: &SandboxSpec,
    ) -> Result<Arc<B::Sandbox>, AcquireError> {
        self.acquire_from(key, spec, Origin::Fresh).await
    }

    /// [`acquire`](Self::acquire), a new sandbox being made from `origin`. A branch is
    /// refused ([`AcquireError::KeyInUse`]) under a key with a live sandbox: it is never
    /// dropped for the one already there.
    pub async fn acquire_from(
        &self,
        key: &SandboxKey,
        spec: &SandboxSpec,
        origin: Origin<B::Branch>,
    ) -> Result<Arc<B::Sandbox>, AcquireError> {
        let mut seen = Seen::default();
        let result = self.acquire_inner(key, spec, origin, &mut seen).await;
        let Seen {
            scope: scope_seen,
            backend: backend_seen,
            reused,
        } = seen;
        self.inner.observers.emit(
            || SandboxAcquired {
                key: result
                    .as_ref()
                    .map_or_else(|_| key.clone(), |s| s.key().clone()),
                kind: spec.kind().to_owned(),
                egress: spec.egress(),
                scope: scope_seen,
                backend: backend_seen,
                reused,
                failure: result.as_ref().err().map(ErrorKind::kind),
            },
            |o, e| o.sandbox_acquired(e),
        );
        result
    }

    async fn acquire_inner(
        &self,
        key: &SandboxKey,
        spec: &SandboxSpec,
        origin: Origin<B::Branch>,
        seen: &mut Seen,
    ) -> Result<Arc<B::Sandbox>, AcquireError> {
        let route = self.route(spec)?;
        seen.scope = Some(route.decision.scope);
        let address = key.for_scope(route.decision.scope)?;
        let backend = &self.inner.backends[route.index];
        seen.backend = Some(backend.name().to_owned());
        if let Some(r) = self.unclean_refusal(&address) {
            return Err(r.into());
        }
        let handle = self.slot(&address);
        let mut slot = handle.lock().await;
        // A disposal may have failed while this acquire waited for the key.
        if let Some(r) = self.unclean_refusal(&address) {
            return Err(r.into());
        }
        if slot.live.is_empty() {
            slot.spec = None;
        }
        if slot.spec.as_ref().is_some_and(|s| s != spec) {
            return Err(Refusal::KeySpecMismatch {
                key: address.to_string(),
            }
            .into());
        }
        if let Some((_, sb)) = slot.live.iter().find(|(i, _)| *i == route.index) {
            if matches!(origin, Origin::Branch(_)) {
                return Err(AcquireError::KeyInUse {
                    key: address.to_string(),
                });
            }
            seen.reused = true;
            return Ok(Arc::clone(sb));
        }
        let sandbox = match backend.acquire(&address, spec, origin).await {
            Ok(sb) => sb,
            Err(source) => {
                drop(slot);
                drop(handle);
                self.forget_idle_slot(&address);
                return Err(AcquireError::Backend {
                    backend: backend.name().to_owned(),
                    source,
                });
            }
        };
        slot.live.push((route.index, Arc::clone(&sandbox)));
        slot.spec = Some(spec.clone());
        Ok(sandbox)
    }

    /// Whether `key` is currently refused as unclean.
    #[must_use]
    pub fn is_unclean(&self, key: &SandboxKey) -> bool {
        self.unclean_refusal(key).is_some()
    }
}
