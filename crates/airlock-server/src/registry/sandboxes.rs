//! The server's live sandboxes: made through the router (every policy check before anything
//! spawns), held by id, reclaimed when idle, disposed on request, on scope purge and at
//! shutdown.
//!
//! A sandbox outlives the connection that made it: any authenticated connection may address it
//! by id (`sandbox.connect` re-attaches after a dropped connection) until it is disposed or
//! idles out.
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use airlock_broker::kernel::Branch;
use airlock_broker::Limits;
use airlock_local::{LocalRouter, LocalSandbox};
use airlock_policy::{Capability, DisposalFailure, SandboxKey, SandboxSpec};
use airlock_router::{AcquireError, Origin, ScopeRecord};
use serde::Serialize;

use crate::cancel::CancelToken;
use crate::json_doc::JsonDoc;
use crate::registry::error::ServerError;
use crate::registry::request::NewSandbox;
use crate::tenancy::tenant::Tenant;

/// One live sandbox as the server holds it.
#[derive(Debug)]
pub struct Held {
    /// The wire id.
    pub id: String,
    /// The router's address for it.
    pub key: SandboxKey,
    /// The spec it was made for.
    pub spec: SandboxSpec,
    /// The limits of each of its runs.
    pub limits: Limits,
    /// The sandbox.
    pub sandbox: Arc<LocalSandbox>,
    /// What `outputs.collect` reads.
    pub outputs: crate::registry::request::Outputs,
    /// The tools the orchestrator answers.
    pub tools: Vec<crate::registry::request::ToolDecl>,
    /// Its metadata, birth and idle timeout now (`sandbox.list`, `sandbox.set_timeout`).
    pub life: crate::registry::life::Life,
    /// The idle timeout its spec asked for: what the key-reuse rule compares (the timeout in
    /// force is `life`'s).
    idle: Duration,
    /// Environment variables of every run, process and terminal (`spec.env`; a call's own win).
    pub env: Vec<(String, String)>,
    /// The lifetime its spec asked for: what the key-reuse rule compares (the end in force is
    /// `life`'s).
    lifetime: Option<Duration>,
    /// What idle reclaim does to it.
    pub idle_action: crate::registry::request::IdleAction,
    /// The `sandbox.create` params it was made from (a pause keeps them to make it again).
    pub raw: JsonDoc,
    /// The tenant that made it.
    pub tenant: crate::tenancy::tenant::Tenant,
    /// Its share of the admission budget, given back once its disposal has freed it.
    reservation: Mutex<Option<crate::registry::budget::Reservation>>,
    last_used: Mutex<Instant>,
    busy: Mutex<Option<String>>,
}

/// 64 random bits from the kernel's CSPRNG. A keyless sandbox is addressed by its id alone,
/// so an id must never be guessable: without randomness (which getrandom(2) does not lack on
/// a kernel airlock runs on) the server stops rather than mint one from the pid and the time.
fn random_u64() -> u64 {
    getrandom::u64().unwrap_or_else(|e| panic!("no randomness from the kernel: {e}"))
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Held {
    /// Refuses a method the spec did not ask for (checked on every call).
    pub fn allows(&self, cap: Capability) -> Result<(), ServerError> {
        if self.spec.requires().contains(&cap) {
            return Ok(());
        }
        Err(ServerError::refused(format!(
            "sandbox {} was created without the {cap} capability; create one whose spec \
             requires it",
            self.id
        )))
    }

    /// Gives its share of the budget back (its disposal has freed what it held).
    pub(crate) fn leave_budget(&self) {
        drop(lock(&self.reservation).take());
    }

    /// Marks a call (postpones idle reclaim).
    pub fn touch(&self) {
        *lock(&self.last_used) = Instant::now();
    }

    /// Claims the sandbox for `run_id`; `busy` when a run is in flight.
    pub fn claim(&self, run_id: &str) -> Result<(), ServerError> {
        let mut b = lock(&self.busy);
        if let Some(other) = b.as_ref() {
            return Err(ServerError::busy(format!(
                "run {other} is in flight in sandbox {}; one run at a time",
                self.id
            )));
        }
        *b = Some(run_id.to_owned());
        Ok(())
    }

    /// The run in flight, if any.
    #[must_use]
    pub fn running(&self) -> Option<String> {
        lock(&self.busy).clone()
    }

    /// Releases the claim (the run ended).
    pub fn release(&self) {
        *lock(&self.busy) = None;
        self.touch();
    }

    /// When it was last used (a call it served, or the end of a run).
    #[must_use]
    pub fn last_used(&self) -> Instant {
        *lock(&self.last_used)
    }

    /// Whether reclaim is due: idle past its timeout, or its lifetime over.
    pub(crate) fn due(&self, now: Instant) -> bool {
        self.idle_for(now).is_some() || self.life.lived_out(now)
    }

    pub(crate) fn idle_for(&self, now: Instant) -> Option<Duration> {
        if lock(&self.busy).is_some() {
            return None;
        }
        let since = now.saturating_duration_since(*lock(&self.last_used));
        (since >= self.life.idle_timeout()).then_some(since)
    }
}

/// Every live sandbox of one server.
#[derive(Debug)]
pub struct Sandboxes {
    router: LocalRouter,
    pub(crate) live: Mutex<HashMap<String, Arc<Held>>>,
    runs: Mutex<HashMap<String, (Tenant, CancelToken)>>,
    next: AtomicU64,
    epoch: String,
    max_live: usize,
    observers: airlock_router::Observers,
    audit: Option<Arc<crate::telemetry::audit::AuditSink>>,
    exposures: crate::registry::expose::Exposures,
    /// The state directory (snapshots, paused records), when one is open.
    state: Option<Arc<crate::state_dir::StateDir>>,
    /// Paused sandboxes by id.
    pub(crate) paused: Mutex<HashMap<String, crate::state_dir::PausedRecord>>,
    /// One resume at a time per sandbox (two calls on one paused sandbox make it once).
    pub(crate) resuming: crate::registry::resume_gate::ResumeGates,
    /// The admission budget and the tenants' quotas (`crate::registry::budget`).
    budget: crate::registry::budget::Budget,
    /// Each sandbox's disk bound (its tmpfs), bytes.
    disk_bytes: u64,
    /// Snapshots and pauses being written, by tenant (their `max_snapshots` reservations).
    pub(crate) snapshots_in_flight: crate::registry::snapshot_reservations::SnapshotsInFlight,
}

/// Why `sandbox.create` did not hand one out.
fn acquire_error(e: &AcquireError) -> ServerError {
    let kind = airlock_router::ErrorKind::kind(e);
    let e = match e {
        AcquireError::Key(_) => ServerError::invalid(e.to_string()),
        _ => ServerError::refused(e.to_string()),
    };
    e.because(kind)
}

/// Why [`Sandboxes::insert`] did not hold a sandbox.
enum NotHeld {
    /// Its key is live under other run limits, another idle timeout or another env (nothing
    /// was made).
    Mismatch(ServerError),
    /// The server holds its maximum (the sandbox just made must be disposed).
    Full(ServerError),
}

fn key_spec_mismatch(live: &Held) -> ServerError {
    ServerError::refused(format!(
        "sandbox {} is live under this key with other run limits, another idle timeout, \
         another lifetime or another env; dispose of it before asking for another",
        live.id
    ))
    .because("SandboxKeySpecMismatch")
}

/// The answer for a sandbox id that names nothing the caller may address.
pub(crate) fn no_sandbox(id: &str) -> ServerError {
    ServerError::not_found(format!(
        "no live sandbox {:?} (never created, disposed or idled out)",
        id.chars().take(64).collect::<String>()
    ))
}

fn full(max_live: usize) -> ServerError {
    ServerError::over_capacity(format!(
        "the server holds its maximum of {max_live} live sandboxes"
    ))
}

/// A sandbox disposed of: its id, and why its disposal was not clean, if it was not.
#[derive(Debug)]
pub struct Disposed {
    /// The sandbox.
    pub sandbox_id: String,
    /// What the backend could not free (None: everything was).
    pub failure: Option<DisposalFailure>,
}

/// The audit line of a refusal this registry makes itself (its members in the order every
/// other audit line has them: by name).
#[derive(Serialize)]
struct RefusalLine<'a> {
    egress: &'a str,
    event: &'static str,
    failure: &'a str,
    key: String,
    scope: &'a str,
}

impl Sandboxes {
    /// A registry over `router`, holding at most `max_live`.
    #[must_use]
    pub fn new(
        router: LocalRouter,
        epoch: String,
        max_live: usize,
        observers: airlock_router::Observers,
    ) -> Self {
        Sandboxes {
            router,
            live: Mutex::new(HashMap::new()),
            runs: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            epoch,
            max_live: max_live.max(1),
            observers,
            audit: None,
            exposures: crate::registry::expose::Exposures::new(),
            state: None,
            paused: Mutex::new(HashMap::new()),
            resuming: crate::registry::resume_gate::ResumeGates::default(),
            budget: crate::registry::budget::Budget::unlimited(),
            disk_bytes: Limits::default().max_disk_bytes,
            snapshots_in_flight: crate::registry::snapshot_reservations::SnapshotsInFlight::default(
            ),
        }
    }

    /// Admits sandboxes within `budget`, each accounting `disk_bytes` of tmpfs (the backend's
    /// disk bound) besides its memory bounds.
    #[must_use]
    pub fn with_budget(mut self, budget: crate::registry::budget::Budget, disk_bytes: u64) -> Self {
        self.budget = budget;
        self.disk_bytes = disk_bytes;
        self
    }

    /// The admission budget.
    #[must_use]
    pub fn budget(&self) -> &crate::registry::budget::Budget {
        &self.budget
    }

    /// Each sandbox's disk bound, bytes.
    #[must_use]
    pub fn disk_bytes(&self) -> u64 {
        self.disk_bytes
    }

    /// Keeps snapshots and paused sandboxes in `state`, and knows the sandboxes paused there
    /// before this server started.
    #[must_use]
    pub fn with_state(mut self, state: Option<Arc<crate::state_dir::StateDir>>) -> Self {
        if let Some(s) = &state {
            let records = s.paused_records();
            let mut paused = lock(&self.paused);
            for r in records {
                paused.insert(r.sandbox_id.clone(), r);
            }
        }
        self.state = state;
        self.adopt_orphans();
        self
    }

    /// The state directory, if one is open.
    #[must_use]
    pub fn state_dir(&self) -> Option<&Arc<crate::state_dir::StateDir>> {
        self.state.as_ref()
    }

    /// A new sandbox id: not guessable.
    pub(crate) fn fresh_id(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("sb-{}-{n}-{:016x}", self.epoch, random_u64())
    }

    /// Also records the refusals this registry makes itself (the router records its own).
    #[must_use]
    pub fn with_audit(mut self, sink: Option<Arc<crate::telemetry::audit::AuditSink>>) -> Self {
        self.audit = sink;
        self
    }

    fn audit_refusal(&self, key: &SandboxKey, spec: &SandboxSpec, kind: &str) {
        if let Some(sink) = &self.audit {
            let line = RefusalLine {
                event: "sandbox_refused",
                key: key.to_string(),
                egress: spec.egress().as_str(),
                scope: spec.isolation_scope().as_str(),
                failure: kind,
            };
            sink.write_line(&line, "sandbox_refused");
        }
    }

    /// The router every sandbox is made through.
    pub(crate) fn router(&self) -> &LocalRouter {
        &self.router
    }

    /// Where policy events go.
    #[must_use]
    pub fn observers(&self) -> &airlock_router::Observers {
        &self.observers
    }

    /// The live exposures of every sandbox (`sandbox.expose`); a sandbox's end ends its own.
    #[must_use]
    pub fn exposures(&self) -> &crate::registry::expose::Exposures {
        &self.exposures
    }

    /// The host policy the router enforces.
    #[must_use]
    pub fn host_policy(&self) -> &airlock_policy::HostPolicy {
        self.router.host_policy()
    }

    /// The isolation rung the backend holds (the weakest, were there several).
    #[must_use]
    pub fn isolation(&self) -> &'static str {
        let rungs = self.router.backends().iter();
        rungs
            .map(|b| airlock_router::Backend::isolation(b.as_ref()))
            .min()
            .map_or("none", airlock_policy::Isolation::as_str)
    }

    /// Make (or, for an equal spec under the same key, get) a sandbox.
    pub async fn create(&self, p: NewSandbox, limits: Limits) -> Result<Arc<Held>, ServerError> {
        // Ids are not guessable (a keyless sandbox is addressed by nothing else), and a keyless
        // sandbox's key lives in a scope no orchestrator key may name (the wire's `spec.rs` refuses it).
        self.create_as(self.fresh_id(), p, limits, Origin::Fresh)
            .await
    }

    /// Make a sandbox under the id `id` (a new one's, or a paused one's it resumes as), from
    /// `origin` (a fork's branch, or nothing).
    pub(crate) async fn create_as(
        &self,
        id: String,
        mut p: NewSandbox,
        limits: Limits,
        origin: Origin<Branch>,
    ) -> Result<Arc<Held>, ServerError> {
        let key = match p.key.take() {
            Some(k) => k,
            None => SandboxKey::new(crate::registry::request::KEYLESS_SCOPE, id.as_str(), "wire")
                .map_err(ServerError::internal)?,
        };
        let existing = self.live_for(&key, &p.spec);
        // A new sandbox over the cap is refused before anything is assembled.
        if existing.is_none() && lock(&self.live).len() >= self.max_live {
            return Err(full(self.max_live));
        }
        // The router compares the policy spec; the wire's own part (run limits, idle timeout)
        // is compared here, before the router would hand the live sandbox back.
        if let Some(h) = &existing {
            if h.limits != limits || h.idle != p.idle || h.env != p.env || h.lifetime != p.lifetime
            {
                self.audit_refusal(&key, &p.spec, "SandboxKeySpecMismatch");
                return Err(key_spec_mismatch(h));
            }
        }
        // The budget is reserved before anything is assembled (a live one holds its own).
        self.check_egress_ceiling(&p)?;
        let reservation = match existing {
            Some(_) => None,
            None => Some(self.admit(&p, &limits)?),
        };
        let local = self
            .router
            .acquire_from(&key, &p.spec, origin)
            .await
            .map_err(|e| acquire_error(&e))?;
        let address = airlock_router::Sandbox::key(local.as_ref()).clone();
        let held = Arc::new(Held {
            id: id.clone(),
            key: address.clone(),
            spec: p.spec,
            limits,
            sandbox: local,
            outputs: p.outputs,
            tools: p.tools,
            life: crate::registry::life::Life::new(p.metadata, p.idle).with_lifetime(p.lifetime),
            idle: p.idle,
            env: p.env,
            lifetime: p.lifetime,
            idle_action: p.idle_action,
            raw: p.raw,
            tenant: p.tenant,
            reservation: Mutex::new(reservation),
            last_used: Mutex::new(Instant::now()),
            busy: Mutex::new(None),
        });
        match self.insert(Arc::clone(&held)) {
            Ok(h) => Ok(h),
            Err(NotHeld::Mismatch(e)) => Err(e),
            Err(NotHeld::Full(e)) => {
                let _ = self.router.dispose(&address).await;
                held.leave_budget();
                Err(e)
            }
        }
    }

    /// Whether `count` more sandboxes of `p` fit now: the live cap, the egress ceiling, and the
    /// budget and tenant quota (each reserved, then all given back at once). For a check that
    /// must come before something that cannot be undone (a fork changes its parent for good); a
    /// create racing in between can still take the room, and is then refused as any.
    pub(crate) fn room_for(
        &self,
        p: &NewSandbox,
        limits: &Limits,
        count: usize,
    ) -> Result<(), ServerError> {
        if lock(&self.live).len() + count > self.max_live {
            return Err(full(self.max_live));
        }
        self.check_egress_ceiling(p)?;
        let held = (0..count)
            .map(|_| self.admit(p, limits))
            .collect::<Result<Vec<_>, _>>()?;
        drop(held);
        Ok(())
    }

    /// The live sandbox the router would hand back for `key` under `spec`: one held at the
    /// key's conversation or call address, made for an equal spec.
    fn live_for(&self, key: &SandboxKey, spec: &SandboxSpec) -> Option<Arc<Held>> {
        let conversation = key
            .for_scope(airlock_policy::IsolationScope::Conversation)
            .ok();
        let live = lock(&self.live);
        live.values()
            .find(|h| (h.key == *key || Some(&h.key) == conversation.as_ref()) && h.spec == *spec)
            .cloned()
    }

    /// Holds `held`, or returns the one already held for its key (the same key under an equal
    /// spec: the router refuses a different policy spec, this the wire's own part of it, run
    /// limits and idle timeout); over capacity when full.
    fn insert(&self, held: Arc<Held>) -> Result<Arc<Held>, NotHeld> {
        let mut live = lock(&self.live);
        if let Some(h) = live.values().find(|h| h.key == held.key) {
            if h.limits != held.limits
                || h.idle != held.idle
                || h.env != held.env
                || h.lifetime != held.lifetime
            {
                return Err(NotHeld::Mismatch(key_spec_mismatch(h)));
            }
            h.touch();
            return Ok(Arc::clone(h));
        }
        if live.len() >= self.max_live {
            return Err(NotHeld::Full(full(self.max_live)));
        }
        live.insert(held.id.clone(), Arc::clone(&held));
        Ok(held)
    }

    /// The live sandbox `id`, whoever's it is (the server's own work: reclaim, drain); a
    /// caller's request goes through [`Sandboxes::get_for`].
    pub fn get(&self, id: &str) -> Result<Arc<Held>, ServerError> {
        lock(&self.live)
            .get(id)
            .cloned()
            .ok_or_else(|| no_sandbox(id))
    }

    /// The live sandbox `id` if `tenant` made it; another tenant's is answered exactly like an
    /// id that never existed.
    pub fn get_for(&self, tenant: &Tenant, id: &str) -> Result<Arc<Held>, ServerError> {
        match lock(&self.live).get(id) {
            Some(h) if h.tenant == *tenant => Ok(Arc::clone(h)),
            _ => Err(no_sandbox(id)),
        }
    }

    /// Whether `id` is a sandbox of `tenant`'s, live or paused.
    #[must_use]
    pub fn owns(&self, tenant: &Tenant, id: &str) -> bool {
        let live = lock(&self.live).get(id).map(|h| h.tenant == *tenant);
        live.unwrap_or_else(|| {
            lock(&self.paused)
                .get(id)
                .is_some_and(|r| r.tenant() == *tenant)
        })
    }

    /// Stop holding `held` and dispose of it through the router (its pause is recorded);
    /// false when it was no longer held (disposed of meanwhile).
    pub(crate) async fn end_live(&self, held: &Held) -> bool {
        if lock(&self.live).remove(&held.id).is_none() {
            return false;
        }
        self.exposures.end_sandbox(&held.id);
        let _ = self.router.dispose(&held.key).await;
        held.leave_budget();
        true
    }

    /// Dispose of `id`: a running run is cancelled, everything the sandbox wrote is freed.
    pub async fn dispose(&self, id: &str) -> Result<Disposed, ServerError> {
        let held = lock(&self.live).remove(id);
        let Some(h) = held else {
            if let Some(r) = self.dispose_paused(id) {
                return r;
            }
            return Err(self
                .get(id)
                .err()
                .unwrap_or_else(|| ServerError::not_found("no such sandbox")));
        };
        // No longer live, so no new exposure: end the ones it has (their connections close).
        self.exposures.end_sandbox(&h.id);
        let outcome = self.router.dispose(&h.key).await;
        h.leave_budget();
        Ok(Disposed {
            sandbox_id: h.id.clone(),
            failure: outcome.err(),
        })
    }

    /// Dispose of every sandbox of `tenant`'s conversation `(scope, thread_id)`.
    pub async fn dispose_scope(
        &self,
        tenant: &Tenant,
        scope: &str,
        thread_id: &str,
    ) -> ScopeRecord {
        let scope = &crate::tenancy::tenant::tenant_scope(tenant, scope);
        let mut ended = Vec::new();
        lock(&self.live).retain(|_, h| {
            let end = h.key.in_conversation(scope, thread_id);
            if end {
                ended.push(Arc::clone(h));
            }
            !end
        });
        for h in &ended {
            self.exposures.end_sandbox(&h.id);
        }
        let record = self.router.dispose_scope(scope, thread_id).await;
        ended.iter().for_each(|h| h.leave_budget());
        record
    }

    /// Registers a run's cancel token under its id, for `tenant`.
    pub fn run_started(&self, tenant: &Tenant, run_id: &str, cancel: CancelToken) {
        lock(&self.runs).insert(run_id.to_owned(), (tenant.clone(), cancel));
    }

    /// Forgets a run.
    pub fn run_ended(&self, run_id: &str) {
        lock(&self.runs).remove(run_id);
    }

    /// Runs in flight (registered and not yet ended), queued ones included.
    #[must_use]
    pub fn runs_in_flight(&self) -> usize {
        lock(&self.runs).len()
    }

    /// Cancel `tenant`'s run `run_id` (its terminal result follows on its own request);
    /// another tenant's run is answered like one that never existed.
    pub fn cancel_run(&self, tenant: &Tenant, run_id: &str) -> Result<(), ServerError> {
        match lock(&self.runs).get(run_id) {
            Some((owner, t)) if owner == tenant => {
                t.cancel();
                Ok(())
            }
            _ => Err(ServerError::not_found(format!(
                "no run {:?} in flight",
                run_id.chars().take(64).collect::<String>()
            ))),
        }
    }

    /// Every held sandbox (at most `max_live`), for `sandbox.list`.
    pub(crate) fn held(&self) -> Vec<Arc<Held>> {
        lock(&self.live).values().cloned().collect()
    }

    /// Live sandboxes.
    #[must_use]
    pub fn len(&self) -> usize {
        lock(&self.live).len()
    }

    /// The most sandboxes held live at once (`--max-sandboxes`).
    #[must_use]
    pub fn max_live(&self) -> usize {
        self.max_live
    }

    /// Whether none is live.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Dispose of everything (server shutdown).
    pub async fn dispose_all(&self) {
        let ids: Vec<String> = lock(&self.live).keys().cloned().collect();
        for id in ids {
            let _ = self.dispose(&id).await;
        }
    }
}
