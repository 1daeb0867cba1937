//! `FakeBackend`: the `none` backend's registry, records and scripted disposal outcomes.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_policy::{
    BackendDeclarations, Capability, DisposalFailure, Egress, Isolation, IsolationScope, OsFamily,
    SandboxKey, SandboxSpec,
};
use async_trait::async_trait;

use super::fault::Fault;
use super::sandbox::FakeSandbox;
use crate::backend::{Backend, BackendError, Origin, ScopePurge};
use crate::router::lock;

/// The fake's default declarations: every capability it emulates (not snapshot or attached
/// identity), allowlist and closed egress, posix guests, both scopes, default limits.
#[must_use]
pub fn fake_declarations() -> BackendDeclarations {
    BackendDeclarations::silent()
        .with_capabilities([
            Capability::Exec,
            Capability::RunCode,
            Capability::HostTools,
            Capability::FilesIn,
            Capability::FilesOut,
            Capability::FilesList,
            Capability::FilesDelete,
        ])
        .with_egress_modes([Egress::Allowlist, Egress::Closed])
        .with_os_families([OsFamily::Posix])
        .with_isolation_scopes([IsolationScope::Conversation, IsolationScope::Call])
}

#[derive(Debug, Default)]
struct State {
    sandboxes: HashMap<SandboxKey, Arc<FakeSandbox>>,
    acquires: Vec<SandboxKey>,
    created: usize,
    disposes: Vec<SandboxKey>,
    purges: Vec<(String, String)>,
    dispose_outcomes: VecDeque<Option<DisposalFailure>>,
    purge_outcomes: VecDeque<Option<DisposalFailure>>,
}

/// The in-process fake backend.
#[derive(Debug)]
pub struct FakeBackend {
    name: String,
    isolation: Isolation,
    declarations: BackendDeclarations,
    faults: BTreeSet<Fault>,
    acquire_delay: Duration,
    dispose_delay: Duration,
    state: Mutex<State>,
}

impl Default for FakeBackend {
    fn default() -> Self {
        FakeBackend::new()
    }
}

impl FakeBackend {
    /// The `none` backend with [`fake_declarations`].
    #[must_use]
    pub fn new() -> FakeBackend {
        FakeBackend {
            name: "none".to_owned(),
            isolation: Isolation::None,
            declarations: fake_declarations(),
            faults: BTreeSet::new(),
            acquire_delay: Duration::ZERO,
            dispose_delay: Duration::ZERO,
            state: Mutex::new(State::default()),
        }
    }
    /// Renames it (to register several).
    #[must_use]
    pub fn with_name(mut self, name: &str) -> Self {
        self.name = name.to_owned();
        self
    }
    /// Declares another rung (to exercise floors; it still draws no boundary).
    #[must_use]
    pub fn with_isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = isolation;
        self
    }
    /// Replaces the declarations.
    #[must_use]
    pub fn with_declarations(mut self, d: BackendDeclarations) -> Self {
        self.declarations = d;
        self
    }
    /// Adds a fault.
    #[must_use]
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.faults.insert(fault);
        self
    }
    /// Delays every acquire (to widen races in tests).
    #[must_use]
    pub fn with_acquire_delay(mut self, d: Duration) -> Self {
        self.acquire_delay = d;
        self
    }
    /// Delays every disposal (to exercise the router's bound).
    #[must_use]
    pub fn with_dispose_delay(mut self, d: Duration) -> Self {
        self.dispose_delay = d;
        self
    }
    /// The next `dispose` reports `failure` (queued, one per call).
    pub fn fail_next_dispose(&self, failure: DisposalFailure) {
        lock(&self.state).dispose_outcomes.push_back(Some(failure));
    }
    /// The next `dispose_scope` reports `failure`.
    pub fn fail_next_purge(&self, failure: DisposalFailure) {
        lock(&self.state).purge_outcomes.push_back(Some(failure));
    }
    /// Every key `acquire` was called with, in order.
    #[must_use]
    pub fn acquires(&self) -> Vec<SandboxKey> {
        lock(&self.state).acquires.clone()
    }
    /// How many sandboxes were created.
    #[must_use]
    pub fn created(&self) -> usize {
        lock(&self.state).created
    }
    /// Every key `dispose` was called with, in order.
    #[must_use]
    pub fn disposes(&self) -> Vec<SandboxKey> {
        lock(&self.state).disposes.clone()
    }
    /// Every conversation `dispose_scope` was called with, in order.
    #[must_use]
    pub fn purges(&self) -> Vec<(String, String)> {
        lock(&self.state).purges.clone()
    }
    /// Sandboxes currently alive.
    #[must_use]
    pub fn live(&self) -> usize {
        lock(&self.state).sandboxes.len()
    }
    /// The live sandbox for `key`, if any.
    #[must_use]
    pub fn sandbox(&self, key: &SandboxKey) -> Option<Arc<FakeSandbox>> {
        lock(&self.state)
            .sandboxes
            .get(&self.registry_key(key))
            .cloned()
    }

    fn registry_key(&self, key: &SandboxKey) -> SandboxKey {
        if self.faults.contains(&Fault::ShareCallScope) {
            key.for_scope(IsolationScope::Conversation)
                .unwrap_or_else(|_| key.clone())
        } else {
            key.clone()
        }
    }
}

#[async_trait]
impl Backend for FakeBackend {
    type Sandbox = FakeSandbox;
    // A branch of a fake sandbox is made as any fake sandbox is.
    type Branch = ();

    fn name(&self) -> &str {
        &self.name
    }

    fn isolation(&self) -> Isolation {
        self.isolation
    }

    fn declarations(&self) -> &BackendDeclarations {
        &self.declarations
    }

    async fn acquire(
        &self,
        key: &SandboxKey,
        spec: &SandboxSpec,
        _origin: Origin<Self::Branch>,
    ) -> Result<Arc<FakeSandbox>, BackendError> {
        lock(&self.state).acquires.push(key.clone());
        if !self.acquire_delay.is_zero() {
            tokio::time::sleep(self.acquire_delay).await;
        }
        if self.faults.contains(&Fault::FailAcquire) {
            return Err(BackendError::Unreachable(
                "fake told to fail at 10.0.0.1".to_owned(),
            ));
        }
        let mut st = lock(&self.state);
        let rk = self.registry_key(key);
        if let Some(sb) = st.sandboxes.get(&rk) {
            return Ok(Arc::clone(sb));
        }
        let sb = Arc::new(FakeSandbox::new(key.clone(), spec, self.faults.clone()));
        st.created += 1;
        st.sandboxes.insert(rk, Arc::clone(&sb));
        Ok(sb)
    }

    async fn dispose(&self, key: &SandboxKey) -> Option<DisposalFailure> {
        if !self.dispose_delay.is_zero() {
            tokio::time::sleep(self.dispose_delay).await;
        }
        let mut st = lock(&self.state);
        st.disposes.push(key.clone());
        let outcome = st.dispose_outcomes.pop_front().flatten();
        if outcome.is_none() {
            let rk = self.registry_key(key);
            st.sandboxes.remove(&rk);
        }
        outcome
    }

    async fn dispose_scope(&self, scope: &str, thread_id: &str) -> ScopePurge {
        if !self.dispose_delay.is_zero() {
            tokio::time::sleep(self.dispose_delay).await;
        }
        let mut st = lock(&self.state);
        st.purges.push((scope.to_owned(), thread_id.to_owned()));
        if let Some(failure) = st.purge_outcomes.pop_front().flatten() {
            return ScopePurge {
                disposed: 0,
                failure: Some(failure),
            };
        }
        let before = st.sandboxes.len();
        st.sandboxes
            .retain(|k, _| !k.in_conversation(scope, thread_id));
        ScopePurge {
            disposed: before - st.sandboxes.len(),
            failure: None,
        }
    }
}
