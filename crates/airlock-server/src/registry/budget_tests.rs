//! The budget's arithmetic, its tenants' quotas and concurrent reservations.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};

use super::*;
use crate::registry::error::{ErrorKind, Fact};

const M: u64 = MIB;

fn claim(disk_mb: u64, mem_mb: u64) -> Claim {
    Claim::new(disk_mb * M, mem_mb * M, false)
}

#[test]
fn a_sandbox_claims_its_disk_its_run_memory_and_its_machine_s_bound() {
    assert_eq!(claim(256, 512).bytes(), 768 * M);
    let machine = Claim::new(256 * M, 512 * M, true);
    assert_eq!(machine.memory_bytes, 1024 * M);
    assert_eq!(machine.bytes(), 1280 * M);
}

#[test]
fn creates_fit_until_the_budget_then_the_refusal_says_the_numbers() {
    let b = Budget::new(768 * M, BTreeMap::new());
    let t = Tenant::single();
    let r1 = b.reserve(&t, claim(128, 128)).unwrap();
    let _r2 = b.reserve(&t, claim(128, 128)).unwrap();
    let _r3 = b.reserve(&t, claim(128, 128)).unwrap();
    assert_eq!(b.held(), 768 * M);
    let e = b.reserve(&t, claim(128, 128)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "over the server's memory budget: a new sandbox may hold 256 MiB (disk 128 MiB + \
         memory 128 MiB); the budget is 768 MiB and 768 MiB of it is held by 3 live sandboxes"
    );
    let typed = e.to_error();
    assert_eq!(typed.kind, ErrorKind::OverCapacity);
    assert_eq!(typed.reason.as_deref(), Some("MemoryBudgetExceeded"));
    assert!(typed.facts.contains(&("budget_mb", Fact::Number(768))));
    assert!(typed.facts.contains(&("held_mb", Fact::Number(768))));
    // A disposal gives its share back; the next create fits.
    drop(r1);
    assert_eq!(b.held(), 512 * M);
    let _r4 = b.reserve(&t, claim(128, 128)).unwrap();
    // A sandbox larger than the whole budget is refused even on an empty server.
    let small = Budget::new(100 * M, BTreeMap::new());
    assert!(small.reserve(&t, claim(64, 64)).is_err());
    assert_eq!(small.held(), 0);
}

#[test]
fn concurrent_reservations_never_pass_the_budget() {
    let b = Budget::new(10 * 256 * M, BTreeMap::new());
    let admitted = AtomicU64::new(0);
    let peak = AtomicU64::new(0);
    std::thread::scope(|s| {
        for i in 0..32 {
            let (b, admitted, peak) = (&b, &admitted, &peak);
            s.spawn(move || {
                let t = Tenant::new(&format!("t{}", i % 4));
                for _ in 0..200 {
                    if let Ok(r) = b.reserve(&t, claim(128, 128)) {
                        admitted.fetch_add(1, Ordering::Relaxed);
                        peak.fetch_max(b.held(), Ordering::Relaxed);
                        std::thread::yield_now();
                        drop(r);
                    }
                }
            });
        }
    });
    assert!(admitted.load(Ordering::Relaxed) > 0);
    assert!(peak.load(Ordering::Relaxed) <= 10 * 256 * M);
    assert_eq!(b.held(), 0, "every reservation was given back");
    assert!(lock(&b.0.state).tenants.is_empty());
}

fn quotas(name: &str, q: TenantQuota) -> BTreeMap<String, TenantQuota> {
    BTreeMap::from([(name.to_owned(), q)])
}

#[test]
fn a_tenant_at_its_max_sandboxes_is_refused_while_another_still_creates() {
    let q = TenantQuota {
        max_sandboxes: Some(2),
        ..TenantQuota::default()
    };
    let b = Budget::new(u64::MAX, quotas("a", q));
    let (a, other) = (Tenant::new("a"), Tenant::new("b"));
    let _a1 = b.reserve(&a, claim(1, 1)).unwrap();
    let _a2 = b.reserve(&a, claim(1, 1)).unwrap();
    let e = b.reserve(&a, claim(1, 1)).unwrap_err();
    assert_eq!(e.kind(), "TenantMaxSandboxes");
    assert_eq!(
        e.to_string(),
        "tenant a holds 2 live sandboxes, its max_sandboxes"
    );
    // A tenant with no section has the server's limits only.
    let others: Vec<_> = (0..10)
        .map(|_| b.reserve(&other, claim(1, 1)).unwrap())
        .collect();
    assert_eq!(others.len(), 10);
}

#[test]
fn a_tenant_s_disk_and_memory_shares_bound_the_sum_of_its_sandboxes() {
    let q = TenantQuota {
        disk_mb: Some(300),
        memory_budget_mb: Some(1000),
        ..TenantQuota::default()
    };
    let b = Budget::new(u64::MAX, quotas("a", q));
    let a = Tenant::new("a");
    let _r1 = b.reserve(&a, claim(200, 100)).unwrap();
    let e = b.reserve(&a, claim(200, 100)).unwrap_err();
    assert_eq!(e.kind(), "TenantDiskQuota");
    assert!(
        e.to_string()
            .contains("to 400 MiB, over its disk_mb of 300 MiB"),
        "{e}"
    );
    let _r2 = b.reserve(&a, claim(100, 500)).unwrap();
    let e = b.reserve(&a, Claim::new(0, 200 * M, true)).unwrap_err();
    assert_eq!(e.kind(), "TenantMemoryBudget");
    assert!(
        e.to_string()
            .contains("may hold 400 MiB; its memory_budget_mb is 1000 MiB and 900 MiB"),
        "{e}"
    );
}

#[test]
fn a_tenant_at_its_concurrent_runs_is_refused_and_one_ending_makes_room() {
    let q = TenantQuota {
        max_concurrent_runs: Some(1),
        egress_allow: Some(BTreeSet::new()),
        ..TenantQuota::default()
    };
    let b = Budget::new(u64::MAX, quotas("a", q));
    let a = Tenant::new("a");
    let run = b.begin_run(&a).unwrap();
    let e = b.begin_run(&a).unwrap_err();
    assert_eq!(e.kind(), "TenantMaxConcurrentRuns");
    assert_eq!(e.to_error().kind, ErrorKind::OverCapacity);
    let _other = b.begin_run(&Tenant::new("b")).unwrap();
    drop(run);
    let _again = b.begin_run(&a).unwrap();
}
