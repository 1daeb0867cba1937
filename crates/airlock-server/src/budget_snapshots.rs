//! A tenant's `max_snapshots` (policy.toml `[tenants.NAME]`): the snapshots it keeps
//! (`sandbox.snapshot`) and its paused sandboxes together, checked before a client's
//! `sandbox.snapshot` or `sandbox.pause` writes anything. The server's own pauses (idle
//! reclaim, the drain) are not refused by it: a sandbox is never lost to a quota. A fork's
//! snapshot is removed once its branches are made and is not counted.

use crate::budget::Refusal;
use crate::sandboxes::{lock, Sandboxes};
use crate::tenant::Tenant;

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

    /// Refuses one more snapshot or pause of `tenant`'s past its `max_snapshots`.
    pub(crate) fn check_snapshot_quota(&self, tenant: &Tenant) -> Result<(), Refusal> {
        let Some(max) = self.budget().quota(tenant).max_snapshots else {
            return Ok(());
        };
        let held = self.snapshots_held(tenant);
        if held >= max {
            return Err(Refusal::TenantSnapshots {
                tenant: tenant.to_string(),
                held,
            });
        }
        Ok(())
    }
}
