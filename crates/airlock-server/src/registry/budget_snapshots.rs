//! A tenant's `max_snapshots` (policy.toml `[tenants.NAME]`): the snapshots it keeps
//! (`sandbox.snapshot`) and its paused sandboxes together, **reserved** before a client's
//! `sandbox.snapshot` or `sandbox.pause` writes anything. The reservation is taken under one
//! lock that counts the tenant's marks and paused records *and* its captures in flight, so
//! concurrent captures can never together pass the quota; it is given back when the capture
//! fails, and after the mark (or the paused record) is written when it succeeds, so the count
//! never dips between the two. The server's own pauses (idle reclaim, the drain) are not
//! refused by it: a sandbox is never lost to a quota. A fork's snapshot is removed once its
//! branches are made and is not counted.
use crate::registry::budget::Refusal;
use crate::registry::sandboxes::{lock, Sandboxes};
use crate::registry::snapshot_reservations::SnapshotReservation;
use crate::tenancy::tenant::Tenant;

impl Sandboxes {
    /// What `tenant` holds of the store: its kept snapshots and its paused sandboxes.
    fn snapshots_held(&self, tenant: &Tenant) -> u64 {
        let paused = lock(&self.paused)
            .values()
            .filter(|r| r.tenant() == *tenant)
            .count();
        let kept = self.state_dir().map_or(0, |s| {
            let listed = s.store().list().unwrap_or_default();
            listed
                .iter()
                .filter(|m| s.keepers(&m.id).contains(tenant))
                .count()
        });
        u64::try_from(paused + kept).unwrap_or(u64::MAX)
    }

    /// Reserve one more snapshot or pause of `tenant`'s within its `max_snapshots`, or refuse
    /// it (`TenantMaxSnapshots`).
    pub(crate) fn reserve_snapshot(
        &self,
        tenant: &Tenant,
    ) -> Result<SnapshotReservation<'_>, Refusal> {
        let Some(max) = self.budget().quota(tenant).max_snapshots else {
            return Ok(SnapshotReservation::unlimited(tenant));
        };
        self.snapshots_in_flight
            .reserve(tenant, max, || self.snapshots_held(tenant))
    }
}
