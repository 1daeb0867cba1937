//! The `local` backend against the router's conformance suites, with the real `airlock`
//! binary as its executor (so every exec and run_code is a real sandboxed run), plus the
//! properties the suites cannot see: the honest rung, the declarations, the router wiring,
//! dispose removing the work dir, and call scope on a backend whose guest sees its work dir
//! at its host path.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::sync::Arc;

use airlock_local::{LocalBackend, LocalConfig, LocalSandbox};
use airlock_policy::{Capability, Egress, Isolation, IsolationScope, SandboxKey, SandboxSpec};
use airlock_router::conformance::{
    call_scope_suite, egress_suite, exec_suite, files_delete_suite, files_in_suite,
    files_out_suite, links_suite, run_code_suite, EgressProbe, Fetch,
};
use airlock_router::{Backend, Origin, Router, Sandbox};

#[path = "egress/server.rs"]
#[allow(
    dead_code,
    reason = "shared with the egress suite; not every helper is used here"
)]
mod egress_server;

fn backend() -> LocalBackend {
    LocalBackend::new(LocalConfig::new(env!("CARGO_BIN_EXE_airlock"))).unwrap()
}

fn key(agent: &str) -> SandboxKey {
    SandboxKey::new("tenant", "thread", agent).unwrap()
}

fn spec() -> SandboxSpec {
    SandboxSpec::builder("local-test").build().unwrap()
}

async fn local(b: &LocalBackend, k: &SandboxKey) -> Arc<LocalSandbox> {
    b.acquire(k, &spec(), Origin::Fresh).await.unwrap();
    b.sandbox(k).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_passes_the_conformance_suites() {
    let b = backend();
    let sb = local(&b, &key("conformance")).await;
    let wd = sb.work_dir().to_owned();
    let dynsb: &dyn Sandbox = sb.as_ref();
    for report in [
        exec_suite(dynsb, &wd).await,
        run_code_suite(dynsb).await,
        files_in_suite(dynsb, &wd).await,
        files_out_suite(dynsb, &wd).await,
        files_delete_suite(dynsb, &wd).await,
        links_suite(dynsb, &wd).await,
    ] {
        report.assert_passed();
    }
    // The spec's own work dir names the same directory for the file methods.
    let p = airlock_policy::GuestRelPath::parse("via-spec.txt").unwrap();
    sb.write_file("/work", &p, b"same").await.unwrap();
    assert_eq!(sb.read_file(&wd, &p, 4).await.unwrap(), b"same");
    let call = SandboxSpec::builder("local-test")
        .isolation_scope(IsolationScope::Call)
        .build()
        .unwrap();
    call_scope_suite(&b, &call, &key("calls"))
        .await
        .assert_passed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rung_and_declarations_are_honest() {
    let b = backend();
    let probe = b.probe().clone();
    let want = if probe.namespaces && probe.cgroups {
        Isolation::Container
    } else {
        Isolation::OsProcess
    };
    assert_eq!(b.isolation(), want, "{}", probe.detail);
    // The ladder stops at container: seccomp and Landlock narrow a shared kernel.
    assert!(b.isolation() <= Isolation::Container);
    let caps = b.declarations().effective_capabilities();
    for c in [Capability::Snapshot, Capability::AttachedIdentity] {
        assert!(!caps.contains(&c));
    }
    // allowlist is declared exactly where the broker-side proxy can be enforced here.
    let proxy = airlock_egress::availability().is_ok();
    let mut modes: std::collections::BTreeSet<Egress> = [Egress::Closed].into_iter().collect();
    if proxy {
        modes.insert(Egress::Allowlist);
    }
    assert_eq!(b.declarations().effective_egress_modes(), modes);
    // Under the default microvm floor the router refuses it; opted down, it serves.
    assert!(Router::builder(vec![Arc::new(backend())]).build().is_err());
    let router = Router::builder(vec![Arc::new(backend())])
        .min_isolation(Isolation::OsProcess)
        .build()
        .unwrap();
    router.ensure_can_serve(&spec()).unwrap();
    let allowlist = SandboxSpec::builder("k")
        .egress(Egress::Allowlist)
        .build()
        .unwrap();
    assert_eq!(router.ensure_can_serve(&allowlist).is_ok(), proxy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_passes_the_egress_suite() {
    // Stand-ins on loopback addresses: one allowlisted (with its port), one not. The host opts
    // the loopback range in; the spec only names hosts.
    let allowed = egress_server::Server::start("127.0.0.2");
    let denied = egress_server::Server::start("127.0.0.3");
    let mut config = LocalConfig::new(env!("CARGO_BIN_EXE_airlock"));
    config.egress_allow_private = vec!["127.0.0.0/8".into()];
    let seen = Arc::new(EgressRecorder::default());
    config.observer = airlock_router::Observers::new(Some(seen.clone()));
    let b = LocalBackend::new(config).unwrap();
    let spec = SandboxSpec::builder("egress")
        .egress(Egress::Allowlist)
        .egress_allow([allowed.addr.to_string()])
        .build()
        .unwrap();
    let k = key("egress");
    b.acquire(&k, &spec, Origin::Fresh).await.unwrap();
    let sb = b.sandbox(&k).unwrap();
    let fetch = "import urllib.request, sys\ntry:\n    urllib.request.urlopen('{url}', timeout=10).read()\nexcept Exception as e:\n    print(e); sys.exit(1)";
    let probe = EgressProbe {
        allowed_url: format!("http://{}/", allowed.addr),
        denied_url: format!("http://{}/", denied.addr),
        fetch: Fetch::Python(fetch.into()),
    };
    egress_suite(sb.as_ref(), &probe).await.assert_passed();
    assert!(allowed.hits() >= 1);
    assert_eq!(denied.hits(), 0, "the denied stand-in saw a connection");
    // Every decision reached the observer, keyed by the sandbox.
    let events = seen.0.lock().unwrap().clone();
    let port = |s: &egress_server::Server| s.addr.port();
    assert!(
        events
            .iter()
            .any(|e| e.allowed && e.port == port(&allowed) && e.key == k),
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| !e.allowed && e.port == port(&denied)),
        "{events:?}"
    );
}

/// `Shmem:` of /proc/meminfo in bytes.
fn shmem() -> u64 {
    let s = std::fs::read_to_string("/proc/meminfo").unwrap();
    s.lines()
        .find(|l| l.starts_with("Shmem:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap()
        * 1024
}

#[derive(Default)]
struct EgressRecorder(std::sync::Mutex<Vec<airlock_router::EgressDecided>>);

impl airlock_router::SandboxObserver for EgressRecorder {
    fn egress_decided(&self, event: &airlock_router::EgressDecided) {
        self.0.lock().unwrap().push(event.clone());
    }
}

/// The tests that put tens of MiB in a sandbox's filesystem run one at a time: the dispose
/// test reads the host's `Shmem`, which another test's filling or freeing would move.
static SHMEM: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispose_removes_the_work_dir_and_stops_a_running_program() {
    let _one_at_a_time = SHMEM.lock().await;
    let b = Arc::new(backend());
    let k = key("dispose");
    let sb = local(&b, &k).await;
    assert_eq!(sb.work_dir(), "/work");
    // 64 MiB in the sandbox's filesystem (tmpfs: counted in the host's Shmem).
    let base = shmem();
    let r = sb
        .run_code(
            "import os\nos.makedirs('/work/locked')\nopen('/work/locked/big', 'wb').write(b'x' * (64 << 20))\nos.chmod('/work/locked', 0o300)",
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.status, airlock_router::RunStatus::Completed, "{r:?}");
    assert!(
        shmem() > base + (48 << 20),
        "the file is not in the sandbox"
    );
    let running = {
        let sb = Arc::clone(&sb);
        tokio::spawn(async move {
            let opts = airlock_router::RunOptions {
                timeout: std::time::Duration::from_secs(60),
                ..Default::default()
            };
            let started = std::time::Instant::now();
            let r = sb.run_code("while True: pass", &opts).await;
            (r, started.elapsed())
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(b.dispose(&k).await, None);
    let (r, took) = running.await.unwrap();
    assert!(r.is_err(), "a disposed run reports failure: {r:?}");
    assert!(took < std::time::Duration::from_secs(30), "{took:?}");
    // Disposal freed everything the sandbox wrote, the 0300 directory included.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while shmem() > base + (16 << 20) {
        assert!(
            std::time::Instant::now() < until,
            "the sandbox's files were not freed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(b.live(), 0);
    // Disposing again is success, and a later run on the old handle is refused.
    assert_eq!(b.dispose(&k).await, None);
    assert!(sb.run_code("print(1)", &Default::default()).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_sandbox_persists_across_runs_and_scope_purge_clears_it() {
    let b = backend();
    let k = key("persist");
    let sb = local(&b, &k).await;
    let r = sb
        .run_code("open('state.txt', 'w').write('kept')", &Default::default())
        .await
        .unwrap();
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    let again = b.acquire(&k, &spec(), Origin::Fresh).await.unwrap();
    let r = again
        .run_code("print(open('state.txt').read())", &Default::default())
        .await
        .unwrap();
    assert_eq!(r.stdout, "kept\n");
    let call_key = k.clone().with_call_id("c1").unwrap();
    local(&b, &call_key).await;
    assert_eq!(b.live(), 2);
    let purge = b.dispose_scope("tenant", "thread").await;
    assert_eq!((purge.disposed, purge.failure), (2, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_tool_goes_through_the_registry() {
    use airlock_local::{CommandBody, RegistryTools};
    use airlock_policy::Identity;
    use airlock_router::host_tools::{HostTool, HostToolLimits, HostToolRegistry, ToolDeclaration};
    use airlock_router::{HostToolCalled, Observers, SandboxObserver};

    #[derive(Default)]
    struct Records(std::sync::Mutex<Vec<HostToolCalled>>);
    impl SandboxObserver for Records {
        fn host_tool_called(&self, e: &HostToolCalled) {
            self.0.lock().unwrap().push(e.clone());
        }
    }
    let rec = Arc::new(Records::default());
    let mut reg = HostToolRegistry::new()
        .observers(Observers::new(
            Some(rec.clone() as Arc<dyn SandboxObserver>),
        ))
        .limits(HostToolLimits {
            max_calls_per_run: 4,
            ..HostToolLimits::default()
        });
    reg.register(HostTool {
        name: "echo".into(),
        description: "returns its arguments".into(),
        schema: serde_json::json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"]
        }),
        declaration: ToolDeclaration::new(Some("host-command"), None, Some(Identity::App)),
        body: Arc::new(CommandBody::new("echo", "cat")),
    })
    .unwrap();
    let tools = Arc::new(RegistryTools::new(reg.seal()));
    let b = LocalBackend::new(LocalConfig::new(env!("CARGO_BIN_EXE_airlock")))
        .unwrap()
        .with_tools(tools);
    let sb = local(&b, &key("tools")).await;
    let program = r#"
print(call_tool('echo', {'n': 41})['n'] + 1)
for name, args in [('nope\x1b', {}), ('echo', {'n': 'x'}), ('echo', {'n': 1}), ('echo', {'n': 2})]:
    try:
        call_tool(name, args)
        print('served')
    except ToolError as e:
        print(e.data['code'], e.data['retryable'])
"#;
    let r = sb.run_code(program, &Default::default()).await.unwrap();
    assert_eq!(
        r.stdout,
        "42\nunknown_tool False\ninvalid_arguments True\nserved\ncall_cap_exhausted False\n",
        "{r:?}"
    );
    assert_eq!(r.tool_calls, 5);
    assert_eq!(rec.0.lock().unwrap().len(), 5);
    // The cap is per run: the next run starts at zero.
    let r = sb
        .run_code(
            "print(call_tool('echo', {'n': 7})['n'])",
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.stdout, "7\n", "{r:?}");
}

/// A run that fills its sandbox's filesystem ends as `disk_limit`, also when the program exits
/// at once, before the broker's watch on the filesystem looks again; what it wrote stayed
/// within the backend's bound, as the next run of the same sandbox finds: the file no larger
/// than the bound, on a filesystem of exactly the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filled_disk_is_a_disk_limit_and_the_bound_is_the_backend_s() {
    let _one_at_a_time = SHMEM.lock().await;
    let mut config = LocalConfig::new(env!("CARGO_BIN_EXE_airlock"));
    config.limits.max_disk_bytes = 32 << 20;
    let b = LocalBackend::new(config).unwrap();
    let sb = local(&b, &key("disk")).await;
    let fill = "import os\ntry:\n    with open('/work/fill', 'wb') as f:\n        while True:\n            f.write(b'x' * (1 << 20)); f.flush()\nexcept OSError:\n    os._exit(3)";
    let r = sb.run_code(fill, &Default::default()).await.unwrap();
    assert_eq!(r.status, airlock_router::RunStatus::DiskLimit, "{r:?}");
    let look = "import os\nst = os.statvfs('/work')\nprint(os.path.getsize('/work/fill'), st.f_blocks * st.f_frsize)";
    let r = sb.run_code(look, &Default::default()).await.unwrap();
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    let sizes: Vec<u64> = r
        .stdout
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(sizes[1], 32 << 20, "the filesystem is the bound: {r:?}");
    assert!(
        (16 << 20..=32 << 20).contains(&sizes[0]),
        "the file filled the bound and no more: {r:?}"
    );
}

/// A run the broker ends (here: a forbidden system call kills it) is `Failed`, and the broker's
/// reason follows what the program wrote on stderr: a caller is never left with a bare
/// `Failed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_says_why_on_stderr() {
    let b = Arc::new(backend());
    let sb = local(&b, &key("why")).await;
    let code = "import ctypes, sys\nsys.stderr.write('before')\nsys.stderr.flush()\nctypes.CDLL(None).ptrace(0, 0, 0, 0)";
    let r = sb.run_code(code, &Default::default()).await.unwrap();
    assert_eq!(r.status, airlock_router::RunStatus::Failed, "{r:?}");
    assert!(
        r.stderr
            .starts_with("before\nairlock: killed: killed by the seccomp filter"),
        "{r:?}"
    );
    // A program's own error keeps its traceback alone.
    let r = sb
        .run_code("raise ValueError('own')", &Default::default())
        .await
        .unwrap();
    assert!(
        r.stderr.contains("ValueError: own") && !r.stderr.contains("airlock:"),
        "{r:?}"
    );
}
