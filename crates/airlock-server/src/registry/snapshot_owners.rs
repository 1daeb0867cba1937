//! Whose snapshots are whose: `snapshot.list`, `snapshot.remove` and `from_snapshot` see only
//! the caller's tenant's snapshots — those it kept (`sandbox.snapshot`) and those holding its
//! paused sandboxes. A snapshot id is the digest of its content, so two tenants can make the
//! same id; each holds its own mark on it, and the file goes when no mark and no paused
//! sandbox needs it. Another tenant's snapshot is answered exactly like one never made.
use std::time::UNIX_EPOCH;

use airlock_snapshot::{Snapshot, SnapshotError, SnapshotId};

use crate::registry::error::ServerError;
use crate::registry::pause::snapshot_error;
use crate::registry::sandboxes::{lock, Sandboxes};
use crate::state_dir::manifest_tenant;
use crate::tenancy::tenant::Tenant;

/// One of a tenant's snapshots (`snapshot.list`).
#[derive(Debug)]
pub struct SnapshotInfo {
    /// Its id.
    pub snapshot_id: SnapshotId,
    /// Its size on disk.
    pub bytes: u64,
    /// When it was made, seconds since the Unix epoch.
    pub made_unix: u64,
    /// Whether the tenant kept it (`sandbox.snapshot`).
    pub kept: bool,
    /// The tenant's paused sandboxes it holds.
    pub paused_sandboxes: Vec<String>,
}

impl Sandboxes {
    /// Whether `tenant` may address snapshot `id`: it kept it, or it holds one of its paused
    /// sandboxes.
    fn sees(&self, tenant: &Tenant, id: &SnapshotId) -> bool {
        let holds_paused = lock(&self.paused)
            .values()
            .any(|r| r.snapshot_id == id.as_str() && r.tenant() == *tenant);
        holds_paused
            || self
                .state_dir()
                .is_some_and(|s| s.keepers(id).contains(tenant))
    }

    /// Read and verify `tenant`'s snapshot `id` (`from_snapshot`).
    pub(crate) async fn read_snapshot_for(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<Snapshot, ServerError> {
        let state = self.state()?;
        let sid = SnapshotId::parse(id).map_err(|e| ServerError::invalid(e.to_string()))?;
        if self.sees(tenant, &sid) {
            return self.read_snapshot(id).await;
        }
        if !self.unowned(&sid) {
            return Err(snapshot_error(&SnapshotError::NotFound(sid)));
        }
        // A file nobody holds a mark on (put in the store by hand, or whose pause was cut after
        // the last start): verified like any read, a damaged or foreign one said so; a whole
        // one is adopted by the tenant its manifest names, and is no other's.
        let snapshot = self.read_snapshot(id).await?;
        if manifest_tenant(snapshot.manifest()) != *tenant {
            return Err(snapshot_error(&SnapshotError::NotFound(sid)));
        }
        state.keep(&sid, tenant).map_err(ServerError::internal)?;
        Ok(snapshot)
    }

    /// No tenant kept `id` and no paused sandbox needs it.
    fn unowned(&self, id: &SnapshotId) -> bool {
        let needed = lock(&self.paused)
            .values()
            .any(|r| r.snapshot_id == id.as_str());
        !needed && self.state_dir().is_some_and(|s| s.keepers(id).is_empty())
    }

    /// At start: every whole snapshot no one holds (a pause or fork cut by the server's death
    /// after the file was published) is kept for the tenant its manifest names, so that
    /// tenant can list, use and remove it; a file that does not verify stays unowned.
    pub(crate) fn adopt_orphans(&self) {
        let Some(state) = self.state_dir() else {
            return;
        };
        let Ok(list) = state.store().list() else {
            return;
        };
        for s in list.into_iter().filter(|s| self.unowned(&s.id)) {
            match state.store().read(&s.id) {
                Ok(snapshot) => {
                    let tenant = manifest_tenant(snapshot.manifest());
                    if let Err(e) = state.keep(&s.id, &tenant) {
                        tracing::warn!(snapshot = %s.id, error = %e, "an orphan snapshot could not be kept");
                    }
                }
                Err(e) => {
                    tracing::warn!(snapshot = %s.id, error = %e, "an orphan snapshot does not verify")
                }
            }
        }
    }

    /// `snapshot.list`: `tenant`'s snapshots.
    pub fn list_snapshots(&self, tenant: &Tenant) -> Result<Vec<SnapshotInfo>, ServerError> {
        let state = self.state()?;
        let paused: Vec<_> = self
            .paused_records()
            .into_iter()
            .filter(|r| r.tenant() == *tenant)
            .collect();
        let list = state.store().list().map_err(ServerError::internal)?;
        let items = list
            .iter()
            .filter_map(|s| {
                // The tenant's own: kept by it, or holding one of its paused sandboxes (what
                // `sees` decides, from the records and the mark read once here).
                let by: Vec<String> = paused
                    .iter()
                    .filter(|r| r.snapshot_id == s.id.as_str())
                    .map(|r| r.sandbox_id.clone())
                    .collect();
                let kept = state.keepers(&s.id).contains(tenant);
                (kept || !by.is_empty()).then(|| SnapshotInfo {
                    snapshot_id: s.id.clone(),
                    bytes: s.stored_bytes,
                    made_unix: s
                        .created
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs()),
                    kept,
                    paused_sandboxes: by,
                })
            })
            .collect();
        Ok(items)
    }

    /// `snapshot.remove`: drops `tenant`'s mark (the file goes once nothing needs it);
    /// refused while one of its paused sandboxes needs it.
    pub fn remove_snapshot(&self, tenant: &Tenant, id: &str) -> Result<(), ServerError> {
        let state = self.state()?;
        let sid = SnapshotId::parse(id).map_err(|e| ServerError::invalid(e.to_string()))?;
        if !self.sees(tenant, &sid) {
            return Err(snapshot_error(&SnapshotError::NotFound(sid)));
        }
        let holder = lock(&self.paused)
            .values()
            .find(|r| r.snapshot_id == id && r.tenant() == *tenant)
            .map(|r| r.sandbox_id.clone());
        if let Some(sb) = holder {
            return Err(ServerError::refused(format!(
                "snapshot {id} holds paused sandbox {sb}; resume or dispose of it first"
            )));
        }
        let still_kept = state.unkeep(&sid, tenant).map_err(ServerError::internal)?;
        let needed = lock(&self.paused).values().any(|r| r.snapshot_id == id);
        if !still_kept && !needed {
            match state.store().remove(&sid) {
                Ok(()) | Err(SnapshotError::NotFound(_)) => {}
                Err(e) => return Err(snapshot_error(&e)),
            }
        }
        Ok(())
    }
}
