//! `collect_outputs` against the fake: the phase order (declaration checks make zero sandbox
//! calls; nothing is delivered until every output was stat-ed, capped and read), each cap
//! named with its file, name collisions by case and Unicode form, required vs optional,
//! consume vs land, and the observer record.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_policy::{GuestRelPath, SandboxKey, SandboxSpec, TransferField, TransferLimits};
use airlock_router::fake::FakeBackend;
use airlock_router::names::NameError;
use airlock_router::outputs::{
    collect_outputs, CollectContext, CollectError, Collected, DeclaredOutput,
};
use airlock_router::sinks::{Artifact, LandedArtifact, MemorySink, OutputSink, SinkError};
use airlock_router::{
    Backend, DirEntry, ExecOptions, ExecResult, FileStat, Observers, Origin, OutputsCollected,
    RunOptions, RunResult, Sandbox, SandboxError, SandboxObserver,
};
use async_trait::async_trait;

/// Counts every call that reaches the wrapped sandbox.
#[derive(Debug)]
struct Counting {
    inner: Arc<dyn Sandbox>,
    calls: AtomicUsize,
    reads: AtomicUsize,
}

impl Counting {
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Sandbox for Counting {
    fn key(&self) -> &SandboxKey {
        self.inner.key()
    }
    async fn exec(&self, a: &[String], o: &ExecOptions) -> Result<ExecResult, SandboxError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.exec(a, o).await
    }
    async fn run_code(&self, c: &str, o: &RunOptions) -> Result<RunResult, SandboxError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.run_code(c, o).await
    }
    async fn write_file(&self, w: &str, p: &GuestRelPath, d: &[u8]) -> Result<(), SandboxError> {
        self.inner.write_file(w, p, d).await
    }
    async fn read_file(&self, w: &str, p: &GuestRelPath, m: u64) -> Result<Vec<u8>, SandboxError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read_file(w, p, m).await
    }
    async fn stat(&self, w: &str, p: &GuestRelPath) -> Result<Option<FileStat>, SandboxError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.stat(w, p).await
    }
    async fn list(&self, w: &str, d: Option<&GuestRelPath>) -> Result<Vec<DirEntry>, SandboxError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.list(w, d).await
    }
    async fn remove(&self, w: &str, p: &GuestRelPath) -> Result<(), SandboxError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.remove(w, p).await
    }
    async fn reclaim(&self, w: &str, d: &GuestRelPath, t: Duration) -> Result<(), SandboxError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.reclaim(w, d, t).await
    }
}

fn p(s: &str) -> GuestRelPath {
    GuestRelPath::parse(s).unwrap()
}

fn spec(limits: TransferLimits) -> SandboxSpec {
    SandboxSpec::builder("k").files_out(limits).build().unwrap()
}

async fn seeded(files: &[(&str, &[u8])]) -> Counting {
    let b = FakeBackend::new();
    let k = SandboxKey::new("t", "th", "a").unwrap();
    let sb = b
        .acquire(&k, &spec(TransferLimits::DEFAULT), Origin::Fresh)
        .await
        .unwrap();
    for (path, data) in files {
        sb.write_file("/work", &p(path), data).await.unwrap();
    }
    Counting {
        inner: sb,
        calls: AtomicUsize::new(0),
        reads: AtomicUsize::new(0),
    }
}

fn out(path: &str) -> DeclaredOutput {
    DeclaredOutput::new(p(path), "text/plain")
}

async fn collect(
    sb: &Counting,
    limits: TransferLimits,
    outs: &[DeclaredOutput],
    sink: Option<&dyn OutputSink>,
) -> Result<Vec<Collected>, CollectError> {
    collect_outputs(sb, &spec(limits), outs, sink, CollectContext::default()).await
}

#[tokio::test]
async fn lands_in_declaration_order_consumes_and_tolerates_optional_absence() {
    let sb = seeded(&[
        ("b.txt", b"bee"),
        ("a.bin", &[0, 255, 1]),
        ("c.json", b"{}"),
    ])
    .await;
    let sink = MemorySink::new();
    let outs = [
        out("b.txt"),
        out("missing.txt").optional(),
        DeclaredOutput::new(p("a.bin"), "application/octet-stream").named("renamed/a.bin"),
        out("c.json").consume(),
    ];
    let got = collect(&sb, TransferLimits::DEFAULT, &outs, Some(&sink))
        .await
        .unwrap();
    assert_eq!(got.len(), 4);
    assert!(matches!(&got[0], Collected::Landed(l) if l.name.as_str() == "b.txt" && l.size == 3));
    assert!(matches!(&got[1], Collected::Absent { name } if name.as_str() == "missing.txt"));
    assert!(matches!(&got[2], Collected::Landed(l) if l.name.as_str() == "renamed/a.bin"));
    assert!(matches!(&got[3], Collected::Consumed(a) if a.bytes == b"{}"));
    let landed: Vec<(String, Vec<u8>, String)> = sink
        .delivered()
        .into_iter()
        .map(|a| (a.name.to_string(), a.bytes, a.media_type))
        .collect();
    assert_eq!(
        landed,
        vec![
            ("b.txt".into(), b"bee".to_vec(), "text/plain".into()),
            (
                "renamed/a.bin".into(),
                vec![0, 255, 1],
                "application/octet-stream".into()
            ),
        ]
    );
}

#[tokio::test]
async fn declaration_failures_touch_no_sandbox() {
    let sb = seeded(&[("a.txt", b"a")]).await;
    let sink = MemorySink::new();
    // Ten thousand tiny outputs against max_files = 32: refused before any stat.
    let many: Vec<DeclaredOutput> = (0..10_000).map(|i| out(&format!("f{i}.txt"))).collect();
    let limits = TransferLimits {
        max_files: 32,
        ..TransferLimits::DEFAULT
    };
    let err = collect(&sb, limits, &many, Some(&sink)).await.unwrap_err();
    assert_eq!(
        err,
        CollectError::CapExceeded {
            cap: TransferField::MaxFiles,
            file: "f32.txt".into(),
            value: 33,
            limit: 32
        }
    );
    assert!(err.to_string().contains("max_files") && err.to_string().contains("f32.txt"));
    // Names that are one file by case or by Unicode form.
    for (a, b) in [
        ("Report.txt", "report.TXT"),
        ("caf\u{e9}.txt", "cafe\u{301}.txt"),
    ] {
        let outs = [out("x").named(a), out("y").named(b)];
        let err = collect(&sb, TransferLimits::DEFAULT, &outs, Some(&sink))
            .await
            .unwrap_err();
        assert!(matches!(err, CollectError::NameCollision { .. }), "{err:?}");
    }
    // A consumed output does not land, so it cannot collide.
    let outs = [out("a.txt").named("A"), out("a.txt").named("a").consume()];
    assert!(collect(&sb, TransferLimits::DEFAULT, &outs, Some(&sink))
        .await
        .is_ok());
    let before = sb.calls();
    // Invalid names, and a landing output with no sink.
    let err = collect(
        &sb,
        TransferLimits::DEFAULT,
        &[out("a.txt").named("../x")],
        Some(&sink),
    )
    .await
    .unwrap_err();
    assert!(matches!(
        err,
        CollectError::InvalidName {
            reason: NameError::BadSegment(_),
            ..
        }
    ));
    let err = collect(
        &sb,
        TransferLimits::DEFAULT,
        &[out("a.txt").named("n".repeat(256))],
        Some(&sink),
    )
    .await
    .unwrap_err();
    assert!(matches!(
        err,
        CollectError::InvalidName {
            reason: NameError::TooLong(256),
            ..
        }
    ));
    let err = collect(&sb, TransferLimits::DEFAULT, &[out("a.txt")], None)
        .await
        .unwrap_err();
    assert!(matches!(err, CollectError::NoSink { .. }));
    assert_eq!(sb.calls(), before, "declaration checks reached the sandbox");
    assert_eq!(sink.delivered().len(), 1);
}

#[tokio::test]
async fn every_cap_is_checked_from_stat_before_any_read() {
    let sb = seeded(&[("a", &[1; 10]), ("b", &[2; 10]), ("c", &[3; 10])]).await;
    let sink = MemorySink::new();
    let outs = [out("a"), out("b"), out("c")];
    let per_file = TransferLimits {
        max_bytes_per_file: 9,
        ..TransferLimits::DEFAULT
    };
    let err = collect(&sb, per_file, &outs, Some(&sink))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        CollectError::CapExceeded {
            cap: TransferField::MaxBytesPerFile,
            file: "a".into(),
            value: 10,
            limit: 9
        }
    );
    let total = TransferLimits {
        max_total_bytes: 25,
        ..TransferLimits::DEFAULT
    };
    let err = collect(&sb, total, &outs, Some(&sink)).await.unwrap_err();
    assert_eq!(
        err,
        CollectError::CapExceeded {
            cap: TransferField::MaxTotalBytes,
            file: "c".into(),
            value: 30,
            limit: 25
        }
    );
    assert_eq!(
        sb.reads.load(Ordering::SeqCst),
        0,
        "a byte was read before the caps held"
    );
    // A required output that is missing, after the others were stat-ed: nothing lands.
    let err = collect(
        &sb,
        TransferLimits::DEFAULT,
        &[out("a"), out("nope")],
        Some(&sink),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err,
        CollectError::Missing {
            file: "nope".into()
        }
    );
    assert!(sink.delivered().is_empty());
}

/// A sink that refuses its second delivery.
#[derive(Default)]
struct SecondRefused(Mutex<usize>);

#[async_trait]
impl OutputSink for SecondRefused {
    async fn deliver(&self, a: &Artifact) -> Result<LandedArtifact, SinkError> {
        let n = {
            let mut n = self.0.lock().unwrap();
            *n += 1;
            *n
        };
        if n == 2 {
            return Err(SinkError::Exists {
                name: a.name.to_string(),
            });
        }
        MemorySink::new().deliver(a).await
    }
}

#[derive(Default)]
struct Records(Mutex<Vec<OutputsCollected>>);

impl SandboxObserver for Records {
    fn outputs_collected(&self, e: &OutputsCollected) {
        self.0.lock().unwrap().push(e.clone());
    }
}

#[tokio::test]
async fn a_refused_delivery_names_what_already_landed_and_is_recorded() {
    let sb = seeded(&[("a", b"1"), ("b", b"22"), ("c", b"333")]).await;
    let rec = Arc::new(Records::default());
    let obs = Observers::new(Some(rec.clone() as Arc<dyn SandboxObserver>));
    let ctx = CollectContext {
        observers: Some(&obs),
        key: None,
    };
    let sink = SecondRefused::default();
    let err = collect_outputs(
        &sb,
        &spec(TransferLimits::DEFAULT),
        &[out("a"), out("b"), out("c")],
        Some(&sink),
        ctx,
    )
    .await
    .unwrap_err();
    let CollectError::Landing { source, landed } = &err else {
        panic!("{err:?}")
    };
    assert!(matches!(source, SinkError::Exists { name } if name == "b"));
    assert_eq!(landed.len(), 1);
    let r = rec.0.lock().unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].count, r[0].bytes, r[0].failure),
        (1, 1, Some("SandboxLandingExists"))
    );
}
