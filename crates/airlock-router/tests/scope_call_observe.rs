//! The scope guard, per-call reclaim, and the observer seam.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns; clippy.toml allows unwrap in tests"
)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_policy::{
    CallerContext, DisposalCode, DisposalFailure, FailedReclaimPolicy, Isolation, IsolationScope,
    SandboxKey, SandboxSpec,
};
use airlock_router::fake::{FakeBackend, Fault};
use airlock_router::{
    AcquireError, CallError, ReclaimDisposal, ReclaimFailure, Router, SandboxAcquired,
    SandboxDisposed, SandboxObserver, ToolCallEnded, CALLS_DIR,
};

fn router_with(
    b: &Arc<FakeBackend>,
    f: impl FnOnce(
        airlock_router::RouterBuilder<FakeBackend>,
    ) -> airlock_router::RouterBuilder<FakeBackend>,
) -> Router<FakeBackend> {
    f(Router::builder(vec![Arc::clone(b)]).min_isolation(Isolation::None))
        .build()
        .unwrap()
}

fn spec() -> SandboxSpec {
    SandboxSpec::builder("k").build().unwrap()
}

fn key(agent: &str) -> SandboxKey {
    SandboxKey::new("tenant", "thread", agent).unwrap()
}

fn ctx() -> CallerContext {
    CallerContext::new(|| "tenant".to_owned(), || "thread".to_owned())
}

#[derive(Debug, thiserror::Error)]
#[error("body failed: secret detail 10.0.0.1")]
struct BodyError;

#[tokio::test]
async fn scope_disposes_on_ok_and_on_err_without_masking() {
    let b = Arc::new(FakeBackend::new());
    let r = router_with(&b, |x| x);
    let (v, rec) = r
        .scope("tenant", "thread", || async {
            r.acquire(&key("a"), &spec()).await.unwrap();
            7
        })
        .await;
    assert_eq!(v, 7);
    assert_eq!(rec.disposed, 1);
    assert_eq!(b.live(), 0);

    // The purge fails, and the body's error still comes back untouched.
    b.fail_next_purge(DisposalFailure::new(DisposalCode::Refused, "no role"));
    let (v, rec): (Result<(), BodyError>, _) = r
        .scope("tenant", "thread", || async {
            r.acquire(&key("a"), &spec()).await.unwrap();
            Err(BodyError)
        })
        .await;
    assert!(matches!(v, Err(BodyError)));
    assert_eq!(
        rec.undisposed.map(|f| f.code()),
        Some(DisposalCode::Refused)
    );
    assert_eq!(b.purges().len(), 2);
}

#[tokio::test]
async fn scope_disposes_on_panic_and_the_panic_propagates() {
    let b = Arc::new(FakeBackend::new());
    let r = router_with(&b, |x| x);
    let r2 = r.clone();
    let joined = tokio::spawn(async move {
        r2.scope("tenant", "thread", || async {
            r2.acquire(&key("a"), &spec()).await.unwrap();
            panic!("body panicked");
        })
        .await
    })
    .await;
    let err = joined.unwrap_err();
    assert!(err.is_panic());
    assert_eq!(b.purges(), vec![("tenant".to_owned(), "thread".to_owned())]);
    assert_eq!(b.live(), 0);
}

#[tokio::test]
async fn scope_disposes_on_cancel() {
    let b = Arc::new(FakeBackend::new());
    let r = router_with(&b, |x| x);
    let r2 = r.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        r2.scope("tenant", "thread", || async {
            r2.acquire(&key("a"), &spec()).await.unwrap();
            let _ = tx.send(());
            std::future::pending::<()>().await;
        })
        .await
    });
    rx.await.unwrap();
    assert_eq!(b.live(), 1);
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    for _ in 0..100 {
        if b.live() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(b.live(), 0);
    assert_eq!(b.purges().len(), 1);
}

#[tokio::test]
async fn a_call_reclaims_its_guest_path_however_it_ends() {
    let b = Arc::new(FakeBackend::new());
    let r = router_with(&b, |x| x);
    let seen = Arc::new(Mutex::new(None));
    let seen2 = Arc::clone(&seen);
    let out = r
        .call(&ctx(), "devops", "tool", &spec(), |s| async move {
            let p = s.guest_call_path().join(&"f.txt".parse().unwrap());
            s.sandbox()
                .write_file(s.work_dir(), &p, b"secret")
                .await
                .unwrap();
            *seen2.lock().unwrap() = Some(s.guest_call_path().clone());
            Ok::<_, BodyError>(1)
        })
        .await
        .unwrap();
    assert_eq!(out, 1);
    let path = seen.lock().unwrap().clone().unwrap();
    assert!(path.as_str().starts_with(&format!("{CALLS_DIR}/")));
    let sb = b.sandbox(&key("devops")).unwrap();
    assert_eq!(sb.reclaims(), vec![path.under("/work")]);
    assert!(sb.files().is_empty(), "the call's file was reclaimed");

    // An error from the body: reclaimed, and the error comes back as the body's.
    let err = r
        .call(&ctx(), "devops", "tool", &spec(), |_s| async {
            Err::<(), _>(BodyError)
        })
        .await
        .unwrap_err();
    assert!(matches!(err, CallError::Body(BodyError)));
    assert_eq!(sb.reclaims().len(), 2);

    // A panic: reclaimed, then the panic propagates.
    let r2 = r.clone();
    let j = tokio::spawn(async move {
        r2.call(&ctx(), "devops", "tool", &spec(), |_s| async {
            panic!("boom") as Result<(), BodyError>
        })
        .await
    })
    .await;
    assert!(j.unwrap_err().is_panic());
    assert_eq!(sb.reclaims().len(), 3);
    // Each call had its own path.
    let r = sb.reclaims();
    assert!(r[0] != r[1] && r[1] != r[2]);
}

#[tokio::test]
async fn a_cancelled_call_still_reclaims() {
    let b = Arc::new(FakeBackend::new());
    let r = router_with(&b, |x| x);
    let r2 = r.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        r2.call(&ctx(), "devops", "tool", &spec(), |_s| async move {
            let _ = tx.send(());
            std::future::pending::<Result<(), BodyError>>().await
        })
        .await
    });
    rx.await.unwrap();
    task.abort();
    let _ = task.await;
    let sb = b.sandbox(&key("devops")).unwrap();
    for _ in 0..100 {
        if !sb.reclaims().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(sb.reclaims().len(), 1);
}

#[tokio::test]
async fn a_failed_reclaim_disposes_by_default_and_tells_the_host_after() {
    let b = Arc::new(FakeBackend::new().with_fault(Fault::FailReclaim));
    let told: Arc<Mutex<Vec<ReclaimFailure>>> = Arc::default();
    let told2 = Arc::clone(&told);
    let r = router_with(&b, |x| {
        x.on_reclaim_failure(move |f| told2.lock().unwrap().push(f.clone()))
    });
    r.call(&ctx(), "devops", "tool", &spec(), |_s| async {
        Ok::<_, BodyError>(())
    })
    .await
    .unwrap();
    let told = told.lock().unwrap().clone();
    assert_eq!(told.len(), 1);
    assert_eq!(told[0].disposal, ReclaimDisposal::Disposed);
    assert_eq!(told[0].failure, "SandboxBackendFailure");
    assert_eq!(b.disposes(), vec![key("devops")]);
    assert_eq!(b.live(), 0);
}

#[tokio::test]
async fn a_failed_reclaim_whose_disposal_fails_leaves_the_key_refused() {
    let b = Arc::new(FakeBackend::new().with_fault(Fault::FailReclaim));
    let told: Arc<Mutex<Vec<ReclaimFailure>>> = Arc::default();
    let told2 = Arc::clone(&told);
    let r = router_with(&b, |x| {
        x.on_reclaim_failure(move |f| told2.lock().unwrap().push(f.clone()))
    });
    b.fail_next_dispose(DisposalFailure::new(DisposalCode::Unreachable, "down"));
    r.call(&ctx(), "devops", "tool", &spec(), |_s| async {
        Ok::<_, BodyError>(())
    })
    .await
    .unwrap();
    assert_eq!(
        told.lock().unwrap()[0].disposal,
        ReclaimDisposal::Failed(DisposalCode::Unreachable)
    );
    let err = r
        .call(&ctx(), "devops", "tool", &spec(), |_s| async {
            Ok::<_, BodyError>(())
        })
        .await
        .unwrap_err();
    assert!(matches!(err, CallError::Acquire(AcquireError::Refused(_))));
}

#[tokio::test]
async fn keep_is_an_explicit_host_opt_down() {
    let b = Arc::new(FakeBackend::new().with_fault(Fault::FailReclaim));
    let told: Arc<Mutex<Vec<ReclaimFailure>>> = Arc::default();
    let told2 = Arc::clone(&told);
    let r = router_with(&b, |x| {
        x.failed_reclaim(FailedReclaimPolicy::Keep)
            .on_reclaim_failure(move |f| told2.lock().unwrap().push(f.clone()))
    });
    r.call(&ctx(), "devops", "tool", &spec(), |_s| async {
        Ok::<_, BodyError>(())
    })
    .await
    .unwrap();
    assert_eq!(told.lock().unwrap()[0].disposal, ReclaimDisposal::Kept);
    assert!(b.disposes().is_empty());
    assert_eq!(b.live(), 1);
}

#[tokio::test]
async fn a_call_scoped_sandbox_is_disposed_when_the_call_returns() {
    let b = Arc::new(FakeBackend::new());
    let r = router_with(&b, |x| x);
    let call = SandboxSpec::builder("k")
        .isolation_scope(IsolationScope::Call)
        .build()
        .unwrap();
    for _ in 0..3 {
        r.call(&ctx(), "devops", "tool", &call, |s| async move {
            assert!(s.key().call_id().is_some());
            Ok::<_, BodyError>(())
        })
        .await
        .unwrap();
    }
    assert_eq!(b.created(), 3);
    assert_eq!(b.disposes().len(), 3);
    assert_eq!(b.live(), 0);
}

#[derive(Default)]
struct Recorder {
    acquired: Mutex<Vec<SandboxAcquired>>,
    disposed: Mutex<Vec<SandboxDisposed>>,
    ended: Mutex<Vec<ToolCallEnded>>,
}

impl SandboxObserver for Recorder {
    fn sandbox_acquired(&self, e: &SandboxAcquired) {
        self.acquired.lock().unwrap().push(e.clone());
    }
    fn sandbox_disposed(&self, e: &SandboxDisposed) {
        self.disposed.lock().unwrap().push(e.clone());
    }
    fn tool_call_ended(&self, e: &ToolCallEnded) {
        self.ended.lock().unwrap().push(e.clone());
    }
}

#[tokio::test]
async fn observer_records_failures_as_kinds_never_messages() {
    let b = Arc::new(FakeBackend::new().with_fault(Fault::FailAcquire));
    let rec = Arc::new(Recorder::default());
    let r = router_with(&b, |x| {
        x.observer(Arc::clone(&rec) as Arc<dyn SandboxObserver>)
    });
    let err = r.acquire(&key("a"), &spec()).await.unwrap_err();
    assert!(
        err.to_string().contains("10.0.0.1"),
        "the error itself keeps its detail"
    );
    let err = r
        .call(&ctx(), "devops", "tool", &spec(), |_s| async {
            Ok::<_, BodyError>(())
        })
        .await
        .unwrap_err();
    assert!(matches!(err, CallError::Acquire(_)));
    let acquired = rec.acquired.lock().unwrap().clone();
    assert_eq!(acquired.len(), 2);
    assert_eq!(acquired[0].failure, Some("BackendUnreachable"));
    assert_eq!(acquired[0].backend.as_deref(), Some("none"));
    assert!(!format!("{acquired:?}").contains("10.0.0.1"));
    let ended = rec.ended.lock().unwrap().clone();
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].failure, Some("BackendUnreachable"));
    assert_eq!(ended[0].keys.len(), 1);
}

#[tokio::test]
async fn observer_sees_body_errors_by_type_and_disposals_by_code() {
    let b = Arc::new(FakeBackend::new());
    let rec = Arc::new(Recorder::default());
    let r = router_with(&b, |x| {
        x.observer(Arc::clone(&rec) as Arc<dyn SandboxObserver>)
    });
    let _ = r
        .call(&ctx(), "devops", "tool", &spec(), |_s| async {
            Err::<(), _>(BodyError)
        })
        .await;
    let ended = rec.ended.lock().unwrap().clone();
    assert_eq!(ended[0].failure, Some("BodyError"));
    assert!(!format!("{ended:?}").contains("secret"));
    b.fail_next_dispose(DisposalFailure::new(
        DisposalCode::Refused,
        "role missing at 10.0.0.1",
    ));
    let _ = r.dispose(&key("devops")).await;
    let disposed = rec.disposed.lock().unwrap().clone();
    assert_eq!(
        disposed.last().unwrap().failure,
        Some(DisposalCode::Refused)
    );
    assert!(rec.acquired.lock().unwrap()[0].failure.is_none());
}

struct Panicky;
impl SandboxObserver for Panicky {
    fn sandbox_acquired(&self, _: &SandboxAcquired) {
        panic!("observer bug");
    }
    fn tool_call_ended(&self, _: &ToolCallEnded) {
        panic!("observer bug");
    }
}

#[tokio::test]
async fn observer_panics_are_contained() {
    let b = Arc::new(FakeBackend::new());
    let r = router_with(&b, |x| x.observer(Arc::new(Panicky)));
    assert!(r.acquire(&key("a"), &spec()).await.is_ok());
    let v = r
        .call(&ctx(), "devops", "tool", &spec(), |_s| async {
            Ok::<_, BodyError>(5)
        })
        .await
        .unwrap();
    assert_eq!(v, 5);
}
