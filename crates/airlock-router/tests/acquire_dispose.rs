//! Single-flight acquire, scope addressing, coded disposal and the unclean-key refusal.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns; clippy.toml allows unwrap in tests"
)]

use std::sync::Arc;
use std::time::Duration;

use airlock_policy::{
    DisposalCode, DisposalFailure, Isolation, IsolationScope, Refusal, SandboxKey, SandboxSpec,
};
use airlock_router::fake::FakeBackend;
use airlock_router::{AcquireError, Origin, Router, Sandbox};

fn router(b: &Arc<FakeBackend>) -> Router<FakeBackend> {
    Router::builder(vec![Arc::clone(b)])
        .min_isolation(Isolation::None)
        .dispose_timeout(Duration::from_millis(200))
        .build()
        .unwrap()
}

fn key() -> SandboxKey {
    SandboxKey::new("tenant", "thread", "devops").unwrap()
}

fn spec() -> SandboxSpec {
    SandboxSpec::builder("k").build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acquires_of_one_key_yield_one_sandbox() {
    let b = Arc::new(FakeBackend::new().with_acquire_delay(Duration::from_millis(20)));
    let r = router(&b);
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let r = r.clone();
            tokio::spawn(async move { r.acquire(&key(), &spec()).await.unwrap() })
        })
        .collect();
    let mut got = Vec::new();
    for t in tasks {
        got.push(t.await.unwrap());
    }
    assert_eq!(b.created(), 1);
    assert_eq!(b.acquires().len(), 1, "the router single-flights the key");
    assert!(got.iter().all(|s| Arc::ptr_eq(s, &got[0])));
}

#[tokio::test]
async fn conversation_scope_shares_and_call_scope_separates() {
    let b = Arc::new(FakeBackend::new());
    let r = router(&b);
    let c1 = key().with_call_id("c1").unwrap();
    let c2 = key().with_call_id("c2").unwrap();
    let s1 = r.acquire(&c1, &spec()).await.unwrap();
    let s2 = r.acquire(&c2, &spec()).await.unwrap();
    assert!(Arc::ptr_eq(&s1, &s2));
    assert_eq!(s1.key().call_id(), None);

    let call = SandboxSpec::builder("k")
        .isolation_scope(IsolationScope::Call)
        .build()
        .unwrap();
    let t1 = r.acquire(&c1, &call).await.unwrap();
    let t2 = r.acquire(&c2, &call).await.unwrap();
    assert!(!Arc::ptr_eq(&t1, &t2));
    assert_eq!(t1.key().call_id(), Some("c1"));
    // A call-scoped sandbox needs a call id.
    assert!(matches!(
        r.acquire(&key(), &call).await,
        Err(AcquireError::Key(_))
    ));
}

#[tokio::test]
async fn a_branch_is_never_dropped_for_a_live_sandbox_under_its_key() {
    let b = Arc::new(FakeBackend::new());
    let r = router(&b);
    let live = r.acquire(&key(), &spec()).await.unwrap();
    let err = r
        .acquire_from(&key(), &spec(), Origin::Branch(()))
        .await
        .unwrap_err();
    assert!(matches!(err, AcquireError::KeyInUse { .. }), "{err:?}");
    assert_eq!(b.acquires().len(), 1, "the backend was not asked again");
    // Under a key of its own, the branch is made.
    let other = SandboxKey::new("s", "t2", "a").unwrap();
    let branch = r
        .acquire_from(&other, &spec(), Origin::Branch(()))
        .await
        .unwrap();
    assert!(!Arc::ptr_eq(&live, &branch));
    assert_eq!(b.created(), 2);
}

#[tokio::test]
async fn dispose_asks_every_backend_and_folds_failures() {
    let a = Arc::new(FakeBackend::new().with_name("a"));
    let b = Arc::new(FakeBackend::new().with_name("b"));
    let r = Router::builder(vec![Arc::clone(&a), Arc::clone(&b)])
        .min_isolation(Isolation::None)
        .build()
        .unwrap();
    r.acquire(&key(), &spec()).await.unwrap();
    a.fail_next_dispose(DisposalFailure::new(
        DisposalCode::Unreachable,
        "a: no route",
    ));
    b.fail_next_dispose(DisposalFailure::new(
        DisposalCode::Refused,
        "b: missing role",
    ));
    let f = r.dispose(&key()).await.unwrap_err();
    assert_eq!(f.code(), DisposalCode::Refused);
    assert_eq!(f.details().len(), 2);
    assert_eq!(a.disposes(), vec![key()]);
    assert_eq!(b.disposes(), vec![key()]);
}

#[tokio::test]
async fn an_undisposed_key_is_refused_until_a_disposal_lands() {
    let b = Arc::new(FakeBackend::new());
    let r = router(&b);
    r.acquire(&key(), &spec()).await.unwrap();
    b.fail_next_dispose(DisposalFailure::new(DisposalCode::Timeout, "slow"));
    assert!(r.dispose(&key()).await.is_err());
    assert!(r.is_unclean(&key()));
    let err = r.acquire(&key(), &spec()).await.unwrap_err();
    assert!(
        matches!(
            err,
            AcquireError::Refused(Refusal::Unclean {
                code: DisposalCode::Timeout,
                ..
            })
        ),
        "{err:?}"
    );
    assert_eq!(
        b.acquires().len(),
        1,
        "the refusal did not touch the backend"
    );
    // Another key is unaffected.
    let other = SandboxKey::new("tenant", "thread", "other").unwrap();
    assert!(r.acquire(&other, &spec()).await.is_ok());
    // A disposal that lands clears it.
    r.dispose(&key()).await.unwrap();
    assert!(!r.is_unclean(&key()));
    r.acquire(&key(), &spec()).await.unwrap();
    assert_eq!(b.created(), 3);
}

#[tokio::test]
async fn a_disposal_that_overruns_its_bound_is_a_timeout() {
    let b = Arc::new(FakeBackend::new().with_dispose_delay(Duration::from_secs(5)));
    let r = router(&b);
    r.acquire(&key(), &spec()).await.unwrap();
    let f = r.dispose(&key()).await.unwrap_err();
    assert_eq!(f.code(), DisposalCode::Timeout);
    assert!(r.is_unclean(&key()));
}

#[tokio::test]
async fn dispose_scope_counts_and_a_failed_purge_refuses_the_conversation() {
    let b = Arc::new(FakeBackend::new());
    let r = router(&b);
    for agent in ["x", "y"] {
        r.acquire(
            &SandboxKey::new("tenant", "thread", agent).unwrap(),
            &spec(),
        )
        .await
        .unwrap();
    }
    r.acquire(&SandboxKey::new("tenant", "other", "x").unwrap(), &spec())
        .await
        .unwrap();
    let rec = r.dispose_scope("tenant", "thread").await;
    assert_eq!(rec.disposed, 2);
    assert_eq!(rec.undisposed, None);
    assert_eq!(b.live(), 1);

    b.fail_next_purge(DisposalFailure::new(DisposalCode::Unreachable, "down"));
    let rec = r.dispose_scope("tenant", "other").await;
    assert_eq!(
        rec.undisposed.map(|f| f.code()),
        Some(DisposalCode::Unreachable)
    );
    let k = SandboxKey::new("tenant", "other", "z").unwrap();
    assert!(matches!(
        r.acquire(&k, &spec()).await,
        Err(AcquireError::Refused(Refusal::Unclean { .. }))
    ));
    let rec = r.dispose_scope("tenant", "other").await;
    assert_eq!(rec.undisposed, None);
    assert!(r.acquire(&k, &spec()).await.is_ok());
}

#[tokio::test]
async fn a_live_key_is_refused_to_a_different_spec_until_disposed() {
    let b = Arc::new(FakeBackend::new());
    let r = router(&b);
    let allow = SandboxSpec::builder("k")
        .egress(airlock_policy::Egress::Allowlist)
        .egress_allow(["example.com"])
        .build()
        .unwrap();
    let first = r.acquire(&key(), &allow).await.unwrap();
    // An equal spec gets the same sandbox.
    let again = r.acquire(&key(), &allow.clone()).await.unwrap();
    assert!(Arc::ptr_eq(&first, &again));
    // A different spec (closed egress) never gets the allowlisted sandbox back.
    let err = r.acquire(&key(), &spec()).await.unwrap_err();
    assert!(
        matches!(err, AcquireError::Refused(Refusal::KeySpecMismatch { .. })),
        "{err:?}"
    );
    assert_eq!(b.created(), 1);
    // Once disposed, the key is free for another spec.
    r.dispose(&key()).await.unwrap();
    r.acquire(&key(), &spec()).await.unwrap();
    assert_eq!(b.created(), 2);
}
