//! The admission budget: how much of the host's memory the server's live sandboxes may hold,
//! and each tenant's quotas (policy.toml `[tenants.NAME]`).
//!
//! A sandbox's files are a tmpfs, host memory for its whole life, so every live sandbox
//! accounts what it *may* hold — its disk bound, its run memory limit, and its machine's bound
//! when it has background processes ([`Claim`]) — and a create (or resume) that would take the
//! sum past the budget is refused `over_capacity` with the numbers, before anything is
//! assembled: the host is never overcommitted, so it never has to OOM later. A
//! [`Reservation`] is taken before the router is asked and released when it is dropped, after
//! the sandbox's disposal has freed its tmpfs.
//!
//! Every check is a few integer comparisons under one `std` mutex that is never held across an
//! await: a tenant at its quota never slows another's create or run.
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use airlock_policy::TenantQuota;

use crate::registry::error::{Fact, ServerError};
use crate::tenancy::tenant::Tenant;

const MIB: u64 = 1024 * 1024;

/// The state, even after a panic elsewhere poisoned it (its counts are updated in one step).
fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one live sandbox may hold of the host's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    /// Its tmpfs's size bound (`/work`, `/tmp`, `/dev/shm` together).
    pub disk_bytes: u64,
    /// Its run memory limit, twice when a machine's background processes may hold as much
    /// beside a run.
    pub memory_bytes: u64,
}

impl Claim {
    /// A sandbox with `disk_bytes` of tmpfs whose runs are bounded by `run_memory_bytes`, and
    /// (`machine`) whose background processes are bounded by as much again.
    #[must_use]
    pub fn new(disk_bytes: u64, run_memory_bytes: u64, machine: bool) -> Claim {
        let bounds = if machine { 2 } else { 1 };
        Claim {
            disk_bytes,
            memory_bytes: run_memory_bytes.saturating_mul(bounds),
        }
    }

    /// Disk and memory together.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.disk_bytes.saturating_add(self.memory_bytes)
    }
}

/// Why a sandbox or a run was not admitted: always `over_capacity`, with the numbers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The server's budget would be passed.
    #[error(
        "over the server's memory budget: a new sandbox may hold {} MiB (disk {} MiB + memory \
         {} MiB); the budget is {budget_mb} MiB and {held_mb} MiB of it is held by {live} live \
         sandboxes",
        mib(need.bytes()), mib(need.disk_bytes), mib(need.memory_bytes)
    )]
    ServerBudget {
        /// What the sandbox would hold.
        need: Claim,
        /// The budget, MiB.
        budget_mb: u64,
        /// What live sandboxes hold, MiB.
        held_mb: u64,
        /// How many are live.
        live: u64,
    },
    /// The tenant holds its `max_sandboxes`.
    #[error("tenant {tenant} holds {live} live sandboxes, its max_sandboxes")]
    TenantSandboxes {
        /// The tenant.
        tenant: String,
        /// Its live sandboxes.
        live: u64,
    },
    /// The tenant's live disks would pass its `disk_mb`.
    #[error(
        "tenant {tenant}: a new sandbox's disk of {disk_mb} MiB would take its live sandboxes' \
         disks to {sum_mb} MiB, over its disk_mb of {quota_mb} MiB"
    )]
    TenantDisk {
        /// The tenant.
        tenant: String,
        /// The new sandbox's disk bound, MiB.
        disk_mb: u64,
        /// The sum it would make, MiB.
        sum_mb: u64,
        /// The quota, MiB.
        quota_mb: u64,
    },
    /// The tenant's share of the budget would be passed.
    #[error(
        "tenant {tenant}: a new sandbox may hold {need_mb} MiB; its memory_budget_mb is \
         {quota_mb} MiB and {held_mb} MiB of it is held"
    )]
    TenantMemory {
        /// The tenant.
        tenant: String,
        /// What the sandbox would hold, MiB.
        need_mb: u64,
        /// The quota, MiB.
        quota_mb: u64,
        /// What the tenant's live sandboxes hold, MiB.
        held_mb: u64,
    },
    /// The tenant has its `max_concurrent_runs` executing.
    #[error(
        "tenant {tenant} has {runs} runs executing, its max_concurrent_runs; try again when \
         one ends"
    )]
    TenantRuns {
        /// The tenant.
        tenant: String,
        /// Its runs executing.
        runs: u64,
    },
    /// The tenant holds its `max_snapshots` (kept snapshots, paused sandboxes and captures
    /// being written).
    #[error(
        "tenant {tenant} holds {held} snapshots and paused sandboxes ({writing} of them being \
         written), its max_snapshots of {max}; remove one (snapshot.remove) or resume one first"
    )]
    TenantSnapshots {
        /// The tenant.
        tenant: String,
        /// What it holds, those being written included.
        held: u64,
        /// Its snapshots and pauses being written now.
        writing: u64,
        /// Its `max_snapshots`.
        max: u64,
    },
}

fn mib(bytes: u64) -> u64 {
    bytes.div_ceil(MIB)
}

impl Refusal {
    /// `data.kind` on the wire.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::ServerBudget { .. } => "MemoryBudgetExceeded",
            Refusal::TenantSandboxes { .. } => "TenantMaxSandboxes",
            Refusal::TenantDisk { .. } => "TenantDiskQuota",
            Refusal::TenantMemory { .. } => "TenantMemoryBudget",
            Refusal::TenantRuns { .. } => "TenantMaxConcurrentRuns",
            Refusal::TenantSnapshots { .. } => "TenantMaxSnapshots",
        }
    }

    /// The registry's error: over capacity, the message, its reason (and the server
    /// budget's numbers, MiB).
    #[must_use]
    pub fn to_error(&self) -> ServerError {
        let e = ServerError::over_capacity(self.to_string()).because(self.kind());
        match self {
            Refusal::ServerBudget {
                need,
                budget_mb,
                held_mb,
                live,
            } => e
                .with("need_mb", Fact::Number(mib(need.bytes())))
                .with("budget_mb", Fact::Number(*budget_mb))
                .with("held_mb", Fact::Number(*held_mb))
                .with("live", Fact::Number(*live)),
            _ => e,
        }
    }
}

/// What one tenant holds now.
#[derive(Debug, Default, Clone, Copy)]
struct Use {
    sandboxes: u64,
    disk: u64,
    bytes: u64,
    runs: u64,
}

#[derive(Debug, Default)]
struct State {
    held: u64,
    live: u64,
    tenants: HashMap<Tenant, Use>,
}

#[derive(Debug)]
struct Inner {
    total: u64,
    quotas: BTreeMap<String, TenantQuota>,
    state: Mutex<State>,
}

/// The server's admission budget and the tenants' quotas. Cheap to clone; clones share it.
#[derive(Debug, Clone)]
pub struct Budget(Arc<Inner>);

impl Budget {
    /// A budget of `total_bytes`, with `quotas` by tenant name.
    #[must_use]
    pub fn new(total_bytes: u64, quotas: BTreeMap<String, TenantQuota>) -> Budget {
        Budget(Arc::new(Inner {
            total: total_bytes,
            quotas,
            state: Mutex::new(State::default()),
        }))
    }

    /// No budget and no quotas (a registry built without one).
    #[must_use]
    pub fn unlimited() -> Budget {
        Budget::new(u64::MAX, BTreeMap::new())
    }

    /// The budget, bytes.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.0.total
    }

    /// What live sandboxes hold, bytes.
    #[must_use]
    pub fn held(&self) -> u64 {
        lock(&self.0.state).held
    }

    /// `tenant`'s quotas (the default — the server's limits — when it has no section).
    #[must_use]
    pub fn quota(&self, tenant: &Tenant) -> TenantQuota {
        self.0
            .quotas
            .get(tenant.as_str())
            .cloned()
            .unwrap_or_default()
    }

    /// Reserve `claim` for a new sandbox of `tenant`, or say why not. Atomic: concurrent
    /// reservations can never together pass the budget or a quota.
    pub fn reserve(&self, tenant: &Tenant, claim: Claim) -> Result<Reservation, Refusal> {
        let quota = self.0.quotas.get(tenant.as_str());
        let mut s = lock(&self.0.state);
        let used = s.tenants.get(tenant).copied().unwrap_or_default();
        if let Some(q) = quota {
            check_tenant(tenant, q, &used, claim)?;
        }
        let after = s.held.saturating_add(claim.bytes());
        if after > self.0.total {
            return Err(Refusal::ServerBudget {
                need: claim,
                budget_mb: self.0.total / MIB,
                held_mb: mib(s.held),
                live: s.live,
            });
        }
        s.held = after;
        s.live += 1;
        let u = s.tenants.entry(tenant.clone()).or_default();
        u.sandboxes += 1;
        u.disk = u.disk.saturating_add(claim.disk_bytes);
        u.bytes = u.bytes.saturating_add(claim.bytes());
        Ok(Reservation {
            budget: self.clone(),
            tenant: tenant.clone(),
            claim,
        })
    }

    fn release(&self, tenant: &Tenant, claim: Claim) {
        let mut s = lock(&self.0.state);
        s.held = s.held.saturating_sub(claim.bytes());
        s.live = s.live.saturating_sub(1);
        if let Some(u) = s.tenants.get_mut(tenant) {
            u.sandboxes = u.sandboxes.saturating_sub(1);
            u.disk = u.disk.saturating_sub(claim.disk_bytes);
            u.bytes = u.bytes.saturating_sub(claim.bytes());
            if u.sandboxes == 0 && u.runs == 0 {
                s.tenants.remove(tenant);
            }
        }
    }

    /// Admit one more run of `tenant` (its `max_concurrent_runs`: refused, never queued, so a
    /// tenant at its quota holds no slot another tenant's run waits for).
    pub fn begin_run(&self, tenant: &Tenant) -> Result<RunTicket, Refusal> {
        let max = self
            .0
            .quotas
            .get(tenant.as_str())
            .and_then(|q| q.max_concurrent_runs);
        let mut s = lock(&self.0.state);
        let u = s.tenants.entry(tenant.clone()).or_default();
        if let Some(max) = max {
            if u.runs >= max {
                return Err(Refusal::TenantRuns {
                    tenant: tenant.to_string(),
                    runs: u.runs,
                });
            }
        }
        u.runs += 1;
        Ok(RunTicket {
            budget: self.clone(),
            tenant: tenant.clone(),
        })
    }

    fn end_run(&self, tenant: &Tenant) {
        let mut s = lock(&self.0.state);
        if let Some(u) = s.tenants.get_mut(tenant) {
            u.runs = u.runs.saturating_sub(1);
            if u.sandboxes == 0 && u.runs == 0 {
                s.tenants.remove(tenant);
            }
        }
    }
}

fn check_tenant(tenant: &Tenant, q: &TenantQuota, used: &Use, claim: Claim) -> Result<(), Refusal> {
    if let Some(max) = q.max_sandboxes {
        if used.sandboxes >= max {
            return Err(Refusal::TenantSandboxes {
                tenant: tenant.to_string(),
                live: used.sandboxes,
            });
        }
    }
    if let Some(quota_mb) = q.disk_mb {
        let sum = used.disk.saturating_add(claim.disk_bytes);
        if sum > quota_mb.saturating_mul(MIB) {
            return Err(Refusal::TenantDisk {
                tenant: tenant.to_string(),
                disk_mb: mib(claim.disk_bytes),
                sum_mb: mib(sum),
                quota_mb,
            });
        }
    }
    if let Some(quota_mb) = q.memory_budget_mb {
        if used.bytes.saturating_add(claim.bytes()) > quota_mb.saturating_mul(MIB) {
            return Err(Refusal::TenantMemory {
                tenant: tenant.to_string(),
                need_mb: mib(claim.bytes()),
                quota_mb,
                held_mb: mib(used.bytes),
            });
        }
    }
    Ok(())
}

/// One live sandbox's share of the budget, given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Budget,
    tenant: Tenant,
    claim: Claim,
}

impl Reservation {
    /// What it holds.
    #[must_use]
    pub fn claim(&self) -> Claim {
        self.claim
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.release(&self.tenant, self.claim);
    }
}

/// One run of a tenant's, counted until dropped.
#[derive(Debug)]
pub struct RunTicket {
    budget: Budget,
    tenant: Tenant,
}

impl Drop for RunTicket {
    fn drop(&mut self) {
        self.budget.end_run(&self.tenant);
    }
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;
