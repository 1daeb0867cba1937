//! The local backend's file surface under attack, with real sandboxed programs: symlinked
//! parents and leaves, hard links, FIFOs in place of outputs, a guest racing symlink swaps
//! while the host collects, 10,000 tiny files, names colliding by case or NFC form, and
//! occupied or linked destinations in the file-system sink.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_local::{FileSystemSink, LocalBackend, LocalConfig, LocalSandbox};
use airlock_policy::{GuestRelPath, SandboxKey, SandboxSpec, TransferField, TransferLimits};
use airlock_router::outputs::{
    collect_outputs, CollectContext, CollectError, Collected, DeclaredOutput,
};
use airlock_router::sinks::{MemorySink, OutputSink, SinkError};
use airlock_router::{Backend, Origin, RunOptions, Sandbox, SandboxError};

const SECRET: &[u8] = b"HOST-SECRET-5f1c";

fn p(s: &str) -> GuestRelPath {
    GuestRelPath::parse(s).unwrap()
}

fn spec() -> SandboxSpec {
    SandboxSpec::builder("files").build().unwrap()
}

async fn sandbox(agent: &str) -> (LocalBackend, Arc<LocalSandbox>) {
    let b = LocalBackend::new(LocalConfig::new(env!("CARGO_BIN_EXE_airlock"))).unwrap();
    let k = SandboxKey::new("t", "th", agent).unwrap();
    b.acquire(&k, &spec(), Origin::Fresh).await.unwrap();
    let sb = b.sandbox(&k).unwrap();
    (b, sb)
}

async fn guest(sb: &LocalSandbox, code: &str) {
    guest_out(sb, code).await;
}

/// Runs `code` in the sandbox, asserts it succeeded, returns its stdout.
async fn guest_out(sb: &LocalSandbox, code: &str) -> String {
    let r = sb.run_code(code, &RunOptions::default()).await.unwrap();
    assert_eq!(r.exit_code, Some(0), "guest program failed: {r:?}");
    r.stdout
}

/// A host directory outside every sandbox holding `secret.txt`.
fn host_secret() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("secret.txt"), SECRET).unwrap();
    t
}

async fn collect(
    sb: &LocalSandbox,
    outs: &[DeclaredOutput],
    sink: &dyn OutputSink,
) -> Result<Vec<Collected>, CollectError> {
    collect_outputs(sb, &spec(), outs, Some(sink), CollectContext::default()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_refuse_links_and_land_exact_bytes() {
    let (_b, sb) = sandbox("write").await;
    let host = host_secret();
    let h = host.path().display();
    guest(
        &sb,
        &format!(
            "import os\nos.symlink('{h}', 'evil')\nos.symlink('{h}/secret.txt', 'leaf')\n\
             os.symlink('{h}/fresh', 'dangling')"
        ),
    )
    .await;
    for target in ["evil/secret.txt", "evil/new.txt", "leaf", "dangling"] {
        let r = sb.write_file("/work", &p(target), b"pwned").await;
        assert!(
            matches!(r, Err(SandboxError::NotConfined { .. })),
            "{target}: {r:?}"
        );
    }
    assert_eq!(
        std::fs::read(host.path().join("secret.txt")).unwrap(),
        SECRET
    );
    assert!(!host.path().join("new.txt").exists());
    assert!(!host.path().join("fresh").exists());
    // A working directory outside the work dir is refused before anything is touched.
    let r = sb.write_file("/etc", &p("x"), b"x").await;
    assert!(matches!(r, Err(SandboxError::NotConfined { .. })), "{r:?}");
    // Parents are created, bytes are exact, and the guest reads what landed.
    let bytes: Vec<u8> = (0..=255).collect();
    sb.write_file("/work", &p("deep/er/f.bin"), &bytes)
        .await
        .unwrap();
    guest(
        &sb,
        "d = open('deep/er/f.bin','rb').read()\nassert d == bytes(range(256)), d",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hard_link_to_a_host_file_cannot_be_made_and_a_shared_inode_is_not_served() {
    let (_b, sb) = sandbox("hardlink").await;
    // The sandbox's files live on its own filesystem: no link to a host file can exist there.
    let out = guest_out(
        &sb,
        "import os, errno\nfor src in ['/usr/bin/dash', '/etc/passwd', '/etc/ld.so.cache']:\n    try:\n        os.link(src, 'hl'); print('LINKED', src)\n    except OSError as e:\n        print(errno.errorcode[e.errno])",
    )
    .await;
    assert!(!out.contains("LINKED"), "{out}");
    // A guest-made hard link pair is a shared inode: no size is served for it, reads and
    // declared outputs are refused.
    guest(
        &sb,
        "import os\nopen('a','w').write('x')\nos.link('a','hl')",
    )
    .await;
    let st = sb.stat("/work", &p("hl")).await.unwrap().unwrap();
    assert_eq!(st.size, None, "a shared inode reports no servable size");
    let r = sb.read_file("/work", &p("hl"), 1024).await;
    assert!(r.is_err(), "{r:?}");
    let err = collect(
        &sb,
        &[DeclaredOutput::new(p("hl"), "text/plain")],
        &MemorySink::new(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, CollectError::SizeUnknown { .. }), "{err:?}");
    // A write replaces the directory entry; the other name keeps its content.
    sb.write_file("/work", &p("hl"), b"guest data")
        .await
        .unwrap();
    assert_eq!(
        sb.read_file("/work", &p("hl"), 64).await.unwrap(),
        b"guest data"
    );
    assert_eq!(sb.read_file("/work", &p("a"), 64).await.unwrap(), b"x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifos_and_links_in_place_of_outputs_fail_closed_without_blocking() {
    let (_b, sb) = sandbox("fifo").await;
    let host = host_secret();
    guest(
        &sb,
        &format!(
            "import os\nos.mkfifo('out.txt')\nos.symlink('{}/secret.txt', 'link.txt')",
            host.path().display()
        ),
    )
    .await;
    let started = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        sb.read_file("/work", &p("out.txt"), 1024),
    )
    .await
    .expect("a FIFO read blocked");
    assert!(r.is_err(), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let r = sb.read_file("/work", &p("link.txt"), 1024).await;
    assert!(matches!(r, Err(SandboxError::NotConfined { .. })), "{r:?}");
    for name in ["out.txt", "link.txt"] {
        let st = sb.stat("/work", &p(name)).await.unwrap().unwrap();
        assert_eq!((st.size, st.is_dir), (None, false), "{name}");
        let err = collect(
            &sb,
            &[DeclaredOutput::new(p(name), "text/plain")],
            &MemorySink::new(),
        )
        .await
        .unwrap_err();
        assert_eq!(err, CollectError::SizeUnknown { file: name.into() });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_and_reclaim_unlink_links_and_never_follow_them() {
    let (_b, sb) = sandbox("remove").await;
    let host = host_secret();
    let h = host.path().display();
    guest(
        &sb,
        &format!(
            "import os\nos.symlink('{h}/secret.txt', 'l')\nos.makedirs('call/sub')\n\
             os.symlink('{h}', 'call/sub/out')\nopen('call/f','w').write('x')"
        ),
    )
    .await;
    sb.remove("/work", &p("l")).await.unwrap();
    assert!(sb.stat("/work", &p("l")).await.unwrap().is_none());
    // Removing it again is success (idempotent), as is a path under a missing parent.
    sb.remove("/work", &p("l")).await.unwrap();
    sb.remove("/work", &p("gone/deeper")).await.unwrap();
    sb.reclaim("/work", &p("call"), Duration::from_secs(10))
        .await
        .unwrap();
    assert!(sb.stat("/work", &p("call")).await.unwrap().is_none());
    assert_eq!(
        std::fs::read(host.path().join("secret.txt")).unwrap(),
        SECRET
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlink_swaps_during_collection_never_reach_the_host() {
    let (_b, sb) = sandbox("race").await;
    let host = host_secret();
    let h = host.path().display();
    // The guest swaps a parent directory and a leaf between real and symlinked, as fast as
    // it can, for four seconds.
    let program = format!(
        r#"import os, time
os.makedirs('d')
open('d/secret.txt', 'w').write('benign')
open('leaf.txt', 'w').write('benign')
end = time.time() + 4
swaps = 0
while time.time() < end:
    os.rename('d', 'd_real')
    os.symlink('{h}', 'd')
    os.symlink('{h}/secret.txt', 'leaf.tmp')
    os.replace('leaf.tmp', 'leaf.txt')
    os.unlink('d')
    os.rename('d_real', 'd')
    open('leaf.tmp', 'w').write('benign')
    os.replace('leaf.tmp', 'leaf.txt')
    swaps += 1
print(swaps)
"#
    );
    let racer = {
        let sb = Arc::clone(&sb);
        tokio::spawn(async move {
            let opts = RunOptions {
                timeout: Duration::from_secs(30),
                ..RunOptions::default()
            };
            sb.run_code(&program, &opts).await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let outs = [
        DeclaredOutput::new(p("d/secret.txt"), "text/plain").optional(),
        DeclaredOutput::new(p("leaf.txt"), "text/plain").optional(),
    ];
    let (mut landed, mut refused, mut reads) = (0u32, 0u32, 0u32);
    while !racer.is_finished() {
        let sink = MemorySink::new();
        match collect(&sb, &outs, &sink).await {
            Ok(_) => landed += 1,
            Err(_) => refused += 1,
        }
        for a in sink.delivered() {
            assert_eq!(a.bytes, b"benign", "collection read {:?}", a.bytes);
        }
        for path in ["d/secret.txt", "leaf.txt"] {
            if let Ok(bytes) = sb.read_file("/work", &p(path), 1024).await {
                assert_ne!(bytes, SECRET, "read_file followed a guest symlink");
                reads += 1;
            }
        }
    }
    let r = racer.await.unwrap().unwrap();
    let swaps: u64 = r.stdout.trim().parse().unwrap_or(0);
    assert!(swaps > 100, "the guest barely raced: {r:?}");
    assert!(landed + refused > 20, "the host barely collected");
    eprintln!("swaps={swaps} collections landed={landed} refused={refused} reads={reads}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_tiny_files() {
    let (_b, sb) = sandbox("many").await;
    guest(
        &sb,
        "import os\nos.mkdir('many')\nfor i in range(10000):\n    open(f'many/f{i}', 'w').write('x')",
    )
    .await;
    let outs: Vec<DeclaredOutput> = (0..10_000)
        .map(|i| DeclaredOutput::new(p(&format!("many/f{i}")), "text/plain"))
        .collect();
    let limits = TransferLimits {
        max_files: 32,
        ..TransferLimits::DEFAULT
    };
    let small = SandboxSpec::builder("files")
        .files_out(limits)
        .build()
        .unwrap();
    let sink = MemorySink::new();
    let err = collect_outputs(
        sb.as_ref(),
        &small,
        &outs,
        Some(&sink),
        CollectContext::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err,
        CollectError::CapExceeded {
            cap: TransferField::MaxFiles,
            file: "many/f32".into(),
            value: 33,
            limit: 32
        }
    );
    assert!(sink.delivered().is_empty());
    // Exactly 32 of them fit.
    let got = collect_outputs(
        sb.as_ref(),
        &small,
        &outs[..32],
        Some(&sink),
        CollectContext::default(),
    )
    .await
    .unwrap();
    assert_eq!(got.len(), 32);
    // A listing is bounded: 10,000 entries list, one more is an error, never a partial list.
    assert_eq!(
        sb.list("/work", Some(&p("many"))).await.unwrap().len(),
        10_000
    );
    sb.write_file("/work", &p("many/one-more"), b"x")
        .await
        .unwrap();
    assert!(sb.list("/work", Some(&p("many"))).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_colliding_by_case_or_form_are_refused_before_the_sandbox() {
    let (_b, sb) = sandbox("names").await;
    guest(&sb, "open('a','w').write('1')\nopen('b','w').write('2')").await;
    let sink = MemorySink::new();
    for (x, y) in [
        ("Out.txt", "out.TXT"),
        ("r\u{e9}sum\u{e9}", "re\u{301}sume\u{301}"),
    ] {
        let outs = [
            DeclaredOutput::new(p("a"), "text/plain").named(x),
            DeclaredOutput::new(p("b"), "text/plain").named(y),
        ];
        let err = collect(&sb, &outs, &sink).await.unwrap_err();
        assert!(matches!(err, CollectError::NameCollision { .. }), "{err:?}");
    }
    assert!(sink.delivered().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_system_sink_refuses_occupied_and_linked_destinations() {
    let (_b, sb) = sandbox("sink").await;
    guest(
        &sb,
        "for n in ['one','two','three']:\n    open(n,'w').write(n)",
    )
    .await;
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::write(r.join("taken"), b"old").unwrap();
    std::os::unix::fs::symlink(outside.path().join("created"), r.join("dangling")).unwrap();
    std::os::unix::fs::symlink(outside.path(), r.join("linkdir")).unwrap();
    std::fs::create_dir(r.join("adir")).unwrap();
    let sink = FileSystemSink::new(r).unwrap();
    let land = |path: &str, name: &str| DeclaredOutput::new(p(path), "text/plain").named(name);
    let root_str = r.display().to_string();
    for (name, want) in [
        ("taken", "SandboxLandingExists"),
        ("dangling", "SandboxLandingExists"),
        ("adir", "SandboxLandingExists"),
        ("linkdir/x", "SandboxLandingNotConfined"),
        ("taken/x", "SandboxLandingNotConfined"),
    ] {
        let err = collect(&sb, &[land("one", name)], &sink).await.unwrap_err();
        use airlock_router::observe::ErrorKind;
        assert_eq!(err.kind(), want, "{name}: {err}");
        assert!(!err.to_string().contains(&root_str), "host path in {err}");
        assert!(!err.to_string().contains("/tmp"), "host path in {err}");
    }
    assert_eq!(std::fs::read(r.join("taken")).unwrap(), b"old");
    assert!(!outside.path().join("created").exists());
    assert!(!outside.path().join("x").exists());
    // The third name occupied: the first two land and stay landed.
    std::fs::write(r.join("c3"), b"old").unwrap();
    let err = collect(
        &sb,
        &[
            land("one", "n/c1"),
            land("two", "n/c2"),
            land("three", "c3"),
        ],
        &sink,
    )
    .await
    .unwrap_err();
    let CollectError::Landing { source, landed } = err else {
        panic!()
    };
    assert!(matches!(source, SinkError::Exists { .. }));
    assert_eq!(landed.len(), 2);
    assert_eq!(std::fs::read(r.join("n/c1")).unwrap(), b"one");
    assert_eq!(std::fs::read(r.join("n/c2")).unwrap(), b"two");
    // Replace is opt-in: it replaces a file and a link (never writing through it), never a
    // directory.
    let replace = FileSystemSink::new(r).unwrap().replace_existing();
    collect(
        &sb,
        &[land("two", "taken"), land("three", "dangling")],
        &replace,
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read(r.join("taken")).unwrap(), b"two");
    assert_eq!(std::fs::read(r.join("dangling")).unwrap(), b"three");
    assert!(!outside.path().join("created").exists());
    assert!(collect(&sb, &[land("one", "adir")], &replace)
        .await
        .is_err());
    assert!(collect(&sb, &[land("one", "linkdir/y")], &replace)
        .await
        .is_err());
    assert!(!outside.path().join("y").exists());
}
