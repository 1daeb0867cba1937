//! What a tenant's `max_snapshots` holds besides its marks and paused records: the client
//! snapshots and pauses being written ([`SnapshotsInFlight`]), each a [`SnapshotReservation`]
//! taken under one lock together with the count of what the tenant holds, given back when
//! dropped. `crate::registry::budget_snapshots` takes them for `sandbox.snapshot` and `sandbox.pause`.
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::registry::budget::Refusal;
use crate::tenancy::tenant::Tenant;

/// Captures in flight by tenant: each holds one of its tenant's `max_snapshots` from its check
/// until its mark is written or it fails.
#[derive(Debug, Default)]
pub(crate) struct SnapshotsInFlight(Mutex<HashMap<Tenant, u64>>);

impl SnapshotsInFlight {
    fn counts(&self) -> MutexGuard<'_, HashMap<Tenant, u64>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One of `tenant`'s `max` for a capture, when what it holds — `held()`, read under the
    /// lock — and its captures in flight leave room for it.
    pub(crate) fn reserve(
        &self,
        tenant: &Tenant,
        max: u64,
        held: impl FnOnce() -> u64,
    ) -> Result<SnapshotReservation<'_>, Refusal> {
        let mut counts = self.counts();
        let writing = counts.get(tenant).copied().unwrap_or(0);
        let holds = held().saturating_add(writing);
        if holds >= max {
            return Err(Refusal::TenantSnapshots {
                tenant: tenant.to_string(),
                held: holds,
                writing,
                max,
            });
        }
        *counts.entry(tenant.clone()).or_default() += 1;
        Ok(SnapshotReservation {
            slots: Some(self),
            tenant: tenant.clone(),
        })
    }

    fn release(&self, tenant: &Tenant) {
        let mut counts = self.counts();
        if let Some(n) = counts.get_mut(tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(tenant);
            }
        }
    }
}

/// One capture's place in its tenant's `max_snapshots`, given back when dropped: drop it only
/// once the capture failed or its mark (or paused record) is written.
#[derive(Debug)]
#[must_use = "the reservation is given back when dropped"]
pub(crate) struct SnapshotReservation<'a> {
    /// None for a tenant without the quota (nothing to give back).
    slots: Option<&'a SnapshotsInFlight>,
    tenant: Tenant,
}

impl SnapshotReservation<'_> {
    /// The reservation of a tenant without the quota: nothing to give back.
    pub(crate) fn unlimited(tenant: &Tenant) -> SnapshotReservation<'static> {
        SnapshotReservation {
            slots: None,
            tenant: tenant.clone(),
        }
    }
}

impl Drop for SnapshotReservation<'_> {
    fn drop(&mut self) {
        if let Some(slots) = self.slots {
            slots.release(&self.tenant);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Barrier};

    use super::*;

    #[test]
    fn captures_in_flight_count_until_they_are_given_back() {
        let slots = SnapshotsInFlight::default();
        let alice = Tenant::new("alice");
        let first = slots.reserve(&alice, 2, || 0).unwrap();
        let second = slots.reserve(&alice, 2, || 0).unwrap();
        let e = slots.reserve(&alice, 2, || 0).unwrap_err();
        assert_eq!(e.kind(), "TenantMaxSnapshots");
        assert_eq!(
            e.to_string(),
            "tenant alice holds 2 snapshots and paused sandboxes (2 of them being written), its \
             max_snapshots of 2; remove one (snapshot.remove) or resume one first"
        );
        // Another tenant's captures are not counted against alice.
        let _bob = slots.reserve(&Tenant::new("bob"), 2, || 0).unwrap();
        // A failed capture gives its place back.
        drop(first);
        let third = slots.reserve(&alice, 2, || 0).unwrap();
        // A capture that succeeded: its mark is counted by `held`, its reservation dropped.
        drop(second);
        drop(third);
        assert!(slots.reserve(&alice, 2, || 2).is_err());
        assert!(slots.reserve(&alice, 2, || 1).is_ok());
    }

    #[test]
    fn concurrent_reservations_never_pass_the_quota() {
        const THREADS: usize = 16;
        let slots = Arc::new(SnapshotsInFlight::default());
        let marks = Arc::new(AtomicU64::new(0));
        let start = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let (slots, marks, start) = (slots.clone(), marks.clone(), start.clone());
                std::thread::spawn(move || {
                    let t = Tenant::new("alice");
                    start.wait();
                    let Ok(r) = slots.reserve(&t, 3, || marks.load(Ordering::SeqCst)) else {
                        return false;
                    };
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    // The capture succeeded: the mark first, then the reservation goes.
                    marks.fetch_add(1, Ordering::SeqCst);
                    drop(r);
                    true
                })
            })
            .collect();
        let made = handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|ok| *ok)
            .count();
        assert_eq!(made, 3);
        assert_eq!(marks.load(Ordering::SeqCst), 3);
    }
}
