//! Snapshot, pause, resume, fork and `from_snapshot`: a sandbox's files and its kernel's state
//! go to the state directory's store, and come back in a new sandbox with every layer a fresh
//! one has (made through the router under the policy, like any other).
//!
//! A pause is durable before it is answered: the snapshot, then the paused record, then the
//! sandbox is disposed. A server started on the same state directory finds its paused
//! sandboxes again; any call on one (or `sandbox.resume`) makes it again under the same id.
use std::sync::Arc;

use airlock_broker::kernel::{Branch, ForkError};
use airlock_broker::Limits;
use airlock_policy::{Capability, HostPolicy};
use airlock_router::Origin;
use airlock_snapshot::{Snapshot, SnapshotId};

use crate::json_doc::JsonDoc;
use crate::registry::error::ServerError;
use crate::registry::life::now_ms;
use crate::registry::request::NewSandbox;
use crate::registry::sandboxes::{lock, Disposed, Held, Sandboxes};
use crate::registry::snapshot_reservations::SnapshotReservation;
use crate::state_dir::{PausedRecord, StateDir};
use crate::tenancy::tenant::Tenant;

/// Most branches one `sandbox.fork` makes.
pub const MAX_FORK: usize = 16;

/// How a sandbox is made again (a paused one resumed, a branch of a fork): the face that
/// wrote its request reads it again, and resolves its run limits (the connection's ceilings).
pub trait Remake: Sync {
    /// The request `raw` (as the sandbox's face received it) parsed again under `host`'s
    /// policy, for `tenant`.
    fn request(
        &self,
        raw: &JsonDoc,
        host: &HostPolicy,
        tenant: &Tenant,
    ) -> Result<NewSandbox, ServerError>;

    /// The limits each run of a sandbox made for `p` gets.
    fn limits(&self, p: &NewSandbox) -> Result<Limits, ServerError>;
}

/// A snapshot written: whose, its id and size, and what the kernel kept and left out.
#[derive(Debug)]
pub struct Captured {
    /// The sandbox it holds.
    pub sandbox_id: String,
    /// Its id in the store.
    pub snapshot_id: SnapshotId,
    /// Its size on disk.
    pub bytes: u64,
    /// The kernel's report (`null` without a kernel state).
    pub kernel: JsonDoc,
}

/// A fork's branches.
#[derive(Debug)]
pub struct Forked {
    /// The sandbox forked.
    pub sandbox_id: String,
    /// The branches, new keyless sandboxes.
    pub branches: Vec<String>,
    /// Whether each branch shares its parent's memory until written (else a restored copy).
    pub copy_on_write: bool,
}

/// A sandbox claimed for a snapshot, a pause or a fork, released when dropped: also when the
/// request's task is dropped mid-capture (its connection aborted at the end of a shutdown's
/// timeout), so the drain's own pause that follows is not refused `busy` and the sandbox
/// disposed of (`serve::ops_redteam::a_snapshot_cut_by_the_shutdown_timeout_does_not_make_the_drain_dispose_its_sandbox`).
struct Claim<'a>(&'a Held);

impl<'a> Claim<'a> {
    fn take(held: &'a Held, what: &str) -> Result<Self, ServerError> {
        held.claim(what)?;
        Ok(Claim(held))
    }

    /// Leave the sandbox claimed for good (it is no longer live: a request that looked it up
    /// before it ended finds it `busy`).
    fn keep(self) {
        std::mem::forget(self);
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

impl Sandboxes {
    pub(crate) fn state(&self) -> Result<&Arc<StateDir>, ServerError> {
        self.state_dir().ok_or_else(|| {
            ServerError::refused(
                "this server keeps no snapshots: its state directory could not be opened \
                 (see its log; start it with --state-dir DIR)",
            )
        })
    }

    /// `sandbox.snapshot`: the sandbox's files and kernel state, kept until `snapshot.remove`.
    pub async fn snapshot(&self, held: &Arc<Held>) -> Result<Captured, ServerError> {
        held.allows(Capability::Snapshot)?;
        let state = self.state()?;
        // Held from before the capture until its mark is written (or it failed), so
        // concurrent snapshots of one tenant never pass its max_snapshots together.
        let _quota = self
            .reserve_snapshot(&held.tenant)
            .map_err(|r| r.to_error())?;
        let claim = Claim::take(held, "snapshot")?;
        let made = self.capture(held, state).await;
        drop(claim);
        let captured = made?;
        state
            .keep(&captured.snapshot_id, &held.tenant)
            .map_err(ServerError::internal)?;
        Ok(captured)
    }

    /// Write `held`'s snapshot (the caller holds its claim: no run in flight).
    async fn capture(
        &self,
        held: &Arc<Held>,
        state: &Arc<StateDir>,
    ) -> Result<Captured, ServerError> {
        state
            .room()
            .map_err(|why| ServerError::over_capacity(format!("sandbox {}: {why}", held.id)))?;
        let manifest = crate::state_dir::manifest(&held.id, &held.raw, &held.tenant);
        let made = held
            .sandbox
            .snapshot(Arc::clone(state.store()), manifest)
            .await
            .map_err(|e| {
                ServerError::refused(format!("sandbox {} could not be snapshotted: {e}", held.id))
            })?;
        Ok(Captured {
            sandbox_id: held.id.clone(),
            snapshot_id: made.id,
            bytes: made.bytes,
            kernel: JsonDoc(made.kernel),
        })
    }

    /// `sandbox.pause`: snapshot, record, then free every process and byte of memory. Not
    /// counted against a `max_snapshots` here: a client's pause reserves its place first
    /// ([`Sandboxes::reserve_snapshot`]), the server's own (idle reclaim, the drain) do not.
    pub async fn pause(&self, id: &str) -> Result<Captured, ServerError> {
        self.pause_within(id, None).await
    }

    /// [`Sandboxes::pause`] holding a client's place in its tenant's `max_snapshots`, given
    /// back the moment its paused record counts instead (holding it past that would count the
    /// pause twice while the sandbox is torn down, and refuse a concurrent capture that fits).
    pub(crate) async fn pause_within(
        &self,
        id: &str,
        quota: Option<SnapshotReservation<'_>>,
    ) -> Result<Captured, ServerError> {
        let state = self.state()?;
        let held = match self.get(id) {
            Err(_) if self.is_paused(id) => {
                return Err(ServerError::refused(format!(
                    "sandbox {id} is paused already"
                )));
            }
            got => got?,
        };
        held.allows(Capability::Snapshot)?;
        let claim = Claim::take(&held, "pause")?;
        let captured = self.capture(&held, state).await?;
        let record = PausedRecord {
            sandbox_id: held.id.clone(),
            snapshot_id: captured.snapshot_id.as_str().to_owned(),
            create: held.raw.clone(),
            metadata: held.life.metadata.clone(),
            paused_at_ms: now_ms(),
            idle_timeout_s: Some(held.life.idle_timeout().as_secs_f64()),
            tenant: Some(held.tenant.to_string()),
        };
        state
            .record_paused(&record)
            .map_err(ServerError::internal)?;
        lock(&self.paused).insert(held.id.clone(), record);
        drop(quota);
        // Live until now: a dispose that came meanwhile wins, and the pause is undone.
        let ended = self.end_live(&held).await;
        claim.keep();
        if !ended {
            let _ = self.dispose_paused(&held.id);
            return Err(ServerError::not_found(format!(
                "sandbox {} was disposed of while it was being paused",
                held.id
            )));
        }
        Ok(captured)
    }

    /// `tenant`'s paused sandbox whose request `made_by` recognizes (a create under the same
    /// key resumes it rather than making another), if any.
    #[must_use]
    pub fn paused_by(&self, tenant: &Tenant, made_by: impl Fn(&JsonDoc) -> bool) -> Option<String> {
        lock(&self.paused)
            .values()
            .find(|r| r.tenant() == *tenant && made_by(&r.create))
            .map(|r| r.sandbox_id.clone())
    }

    /// Whether `id` is paused.
    #[must_use]
    pub fn is_paused(&self, id: &str) -> bool {
        lock(&self.paused).contains_key(id)
    }

    /// The paused sandboxes' records (`sandbox.list`).
    pub(crate) fn paused_records(&self) -> Vec<PausedRecord> {
        lock(&self.paused).values().cloned().collect()
    }

    /// `sandbox.resume` (and any call on a paused sandbox): made again under its id, its
    /// files and kernel state restored; the live one if it is live.
    pub async fn resume(&self, id: &str, remake: &dyn Remake) -> Result<Arc<Held>, ServerError> {
        let _one_at_a_time = self.resuming.enter(id).await;
        if let Ok(h) = self.get(id) {
            return Ok(h);
        }
        let record = lock(&self.paused).get(id).cloned();
        let Some(record) = record else {
            return Err(self
                .get(id)
                .err()
                .unwrap_or_else(|| ServerError::internal("no sandbox")));
        };
        let state = self.state()?;
        let snapshot = self.read_snapshot(&record.snapshot_id).await?;
        let mut p = remake.request(&record.create, self.host_policy(), &record.tenant())?;
        p.metadata = record.metadata.clone();
        let limits = remake.limits(&p)?;
        let held = self
            .make_from(id.to_owned(), p, limits, Arc::new(snapshot))
            .await?;
        if let Some(t) = record
            .idle_timeout_s
            .and_then(|t| crate::registry::life::checked_idle("idle_timeout_s", t).ok())
        {
            held.life.set_idle_timeout(t);
        }
        state.forget_paused(id).map_err(ServerError::internal)?;
        lock(&self.paused).remove(id);
        self.drop_unless_held(&record.snapshot_id);
        Ok(held)
    }

    /// `sandbox.create` with `from_snapshot`: a new sandbox holding the snapshot's files and
    /// kernel state.
    pub async fn create_from(
        &self,
        p: NewSandbox,
        limits: Limits,
        snapshot: Arc<Snapshot>,
    ) -> Result<Arc<Held>, ServerError> {
        let id = self.fresh_id();
        self.make_from(id, p, limits, snapshot).await
    }

    /// `sandbox.fork`: `count` new keyless sandboxes, each holding what `held` holds now.
    pub async fn fork(
        &self,
        held: &Arc<Held>,
        count: usize,
        remake: &dyn Remake,
    ) -> Result<Forked, ServerError> {
        held.allows(Capability::Snapshot)?;
        if !(1..=MAX_FORK).contains(&count) {
            return Err(ServerError::invalid(format!(
                "sandbox.fork count must be 1 to {MAX_FORK}"
            )));
        }
        let state = self.state()?;
        let (p, limits) = self.branch_params(held, remake)?;
        // Forking the kernel changes the parent for good (its kernel becomes a branch of a
        // frozen one): the branches must fit before it does.
        self.room_for(&p, &limits, count)?;
        let claim = Claim::take(held, "fork")?;
        match held.sandbox.fork_kernel(count).await {
            Ok(branches) => {
                drop(claim);
                let branches = self.make_branches(branches, p, limits).await?;
                return Ok(Forked {
                    sandbox_id: held.id.clone(),
                    branches,
                    copy_on_write: true,
                });
            }
            Err(ForkError::NotForkable(why)) => {
                tracing::debug!(sandbox = %held.id, %why, "forked by a copy of its state");
            }
            Err(e @ ForkError::Failed(_)) => return Err(ServerError::refused(e.to_string())),
        }
        let made = self.capture(held, state).await;
        drop(claim);
        let snapshot_id = made?.snapshot_id;
        let branches = self.branches(&snapshot_id, count, p, limits).await;
        self.drop_unless_held(snapshot_id.as_str());
        Ok(Forked {
            sandbox_id: held.id.clone(),
            branches: branches?,
            copy_on_write: false,
        })
    }

    /// Keyless sandboxes of `p` made from the branches of a copy-on-write fork, one each (made
    /// through the router under the policy and the admission budget, like any); if one cannot
    /// be made, those made are disposed of again, and the branches not made end.
    async fn make_branches(
        &self,
        branches: Vec<Branch>,
        p: NewSandbox,
        limits: Limits,
    ) -> Result<Vec<String>, ServerError> {
        let mut ids = Vec::with_capacity(branches.len());
        for branch in branches {
            let made = self
                .create_as(
                    self.fresh_id(),
                    p.clone(),
                    limits.clone(),
                    Origin::Branch(branch),
                )
                .await;
            match made {
                Ok(b) => ids.push(b.id.clone()),
                Err(e) => {
                    for id in &ids {
                        let _ = self.dispose(id).await;
                    }
                    return Err(e);
                }
            }
        }
        Ok(ids)
    }

    /// What a branch of `parent` is made with: its spec without its key, its tenant, its
    /// metadata, and the limits the connection's ceilings give it.
    fn branch_params(
        &self,
        parent: &Held,
        remake: &dyn Remake,
    ) -> Result<(NewSandbox, Limits), ServerError> {
        let raw = parent.raw.without("key");
        let mut p = remake.request(&raw, self.host_policy(), &parent.tenant)?;
        p.metadata = parent.life.metadata.clone();
        let limits = remake.limits(&p)?;
        Ok((p, limits))
    }

    /// `count` keyless sandboxes of `p` made from the snapshot `snapshot_id` (read and verified
    /// once); if one cannot be made, those made are disposed of again.
    async fn branches(
        &self,
        snapshot_id: &SnapshotId,
        count: usize,
        p: NewSandbox,
        limits: Limits,
    ) -> Result<Vec<String>, ServerError> {
        let snapshot = Arc::new(self.read_snapshot(snapshot_id.as_str()).await?);
        let mut ids = Vec::with_capacity(count);
        for _ in 0..count {
            match self
                .create_from(p.clone(), limits.clone(), Arc::clone(&snapshot))
                .await
            {
                Ok(b) => ids.push(b.id.clone()),
                Err(e) => {
                    for id in &ids {
                        let _ = self.dispose(id).await;
                    }
                    return Err(e);
                }
            }
        }
        Ok(ids)
    }

    /// Make a sandbox under `id` and restore `snapshot` into it (disposed again on failure).
    async fn make_from(
        &self,
        id: String,
        p: NewSandbox,
        limits: Limits,
        snapshot: Arc<Snapshot>,
    ) -> Result<Arc<Held>, ServerError> {
        let held = self.create_as(id.clone(), p, limits, Origin::Fresh).await?;
        if held.id != id {
            return Err(ServerError::refused(format!(
                "its key is live as sandbox {}; dispose of it first",
                held.id
            )));
        }
        let spool = self.state()?.store().dir().to_path_buf();
        if let Err(e) = held.sandbox.restore(snapshot, spool).await {
            let _ = self.dispose(&id).await;
            return Err(ServerError::refused(format!(
                "the snapshot could not be restored: {e}"
            )));
        }
        Ok(held)
    }

    /// Read and verify a snapshot of the store.
    pub(crate) async fn read_snapshot(&self, id: &str) -> Result<Snapshot, ServerError> {
        let store = Arc::clone(self.state()?.store());
        let id = SnapshotId::parse(id).map_err(|e| ServerError::invalid(e.to_string()))?;
        tokio::task::spawn_blocking(move || store.read(&id))
            .await
            .map_err(ServerError::internal)?
            .map_err(|e| snapshot_error(&e))
    }

    /// Remove a snapshot a pause or fork made, unless kept on request or a paused sandbox
    /// still needs it.
    pub(crate) fn drop_unless_held(&self, id: &str) {
        let Ok(sid) = SnapshotId::parse(id) else {
            return;
        };
        let Ok(state) = self.state() else { return };
        let needed = lock(&self.paused).values().any(|r| r.snapshot_id == id);
        if needed || state.kept(&sid) {
            return;
        }
        if let Err(e) = state.store().remove(&sid) {
            tracing::warn!(snapshot = id, error = %e, "a used snapshot could not be removed");
        }
    }

    /// Dispose of a paused sandbox: its record goes (its snapshot too, unless kept).
    pub(crate) fn dispose_paused(&self, id: &str) -> Option<Result<Disposed, ServerError>> {
        let record = lock(&self.paused).remove(id)?;
        let r = self
            .state()
            .and_then(|s| s.forget_paused(id).map_err(ServerError::internal))
            .map(|()| Disposed {
                sandbox_id: id.to_owned(),
                failure: None,
            });
        self.drop_unless_held(&record.snapshot_id);
        Some(r)
    }
}

/// A store error: its reason names the failure (`SnapshotTampered`, `SnapshotTruncated`,
/// `SnapshotForeign`, ...), so a client can tell damage from a snapshot that is not this
/// server's without reading the message.
pub(crate) fn snapshot_error(e: &airlock_snapshot::SnapshotError) -> ServerError {
    use crate::registry::error::ErrorKind as K;
    use airlock_snapshot::SnapshotError as E;
    let (kind, reason) = match e {
        E::NotFound { .. } => (K::NotFound, "SnapshotNotFound"),
        E::Tampered { .. } => (K::Refused, "SnapshotTampered"),
        E::Truncated { .. } => (K::Refused, "SnapshotTruncated"),
        E::Foreign { .. } => (K::Refused, "SnapshotForeign"),
        E::TooLarge { .. } => (K::Refused, "SnapshotTooLarge"),
        E::Malformed(_) => (K::Refused, "SnapshotMalformed"),
        E::BadId(_) => (K::InvalidParams, "SnapshotBadId"),
        _ => (K::Refused, "SnapshotStore"),
    };
    ServerError::new(kind, e.to_string()).because(reason)
}
