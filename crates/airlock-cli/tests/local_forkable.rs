//! Issue 27's copy-on-write fork at the `local` backend: a forkable kernel's door and its
//! branches. These tests count the seccomp listeners held by every process under the test
//! process, so they live in a test binary of their own (another test's run, in the same
//! process, holds its own listener) and run one at a time.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use airlock_local::{LocalBackend, LocalConfig};
use airlock_policy::{SandboxKey, SandboxSpec};
use airlock_router::{Backend, Origin, Sandbox};

fn key(agent: &str) -> SandboxKey {
    SandboxKey::new("tenant", "thread", agent).unwrap()
}

/// A backend whose stateful sandboxes' kernels fork by copy-on-write.
fn forkable_backend() -> LocalBackend {
    let mut config = LocalConfig::new(env!("CARGO_BIN_EXE_airlock"));
    config.cow_fork = true;
    LocalBackend::new(config).unwrap()
}

fn stateful() -> SandboxSpec {
    SandboxSpec::builder("local-test")
        .stateful(true)
        .build()
        .unwrap()
}

/// What a cell of a stateful kernel finds when it tries the fork door itself: a raw clone with
/// exactly the branch flags, its seccomp listener fds, and a write through the read-only root.
const DOOR_PROBE: &str = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(56, 0x7E020011, 0, 0, 0, 0)
print("clone", r, ctypes.get_errno())
links = []
for f in os.listdir("/proc/self/fd"):
    try:
        links.append(os.readlink("/proc/self/fd/" + f))
    except OSError:  # the listing's own fd, gone by now
        pass
print("listeners", [l for l in links if "seccomp" in l])
for path in ("/usr/lib/airlock-forkable-probe", "/etc/airlock-forkable-probe"):
    try:
        open(path, "w").write("x")
        print("wrote", path)
    except OSError as e:
        print("refused", path, e.errno)
x = 41
"#;

/// The forkable-kernel tests count seccomp listeners in this process and under it: one at a
/// time, so another test's kernel is not counted.
static FORKABLE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The seccomp listener fds of process `pid` (`anon_inode:seccomp notify`).
fn listeners_of(pid: impl std::fmt::Display) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|l| l.to_string_lossy().contains("seccomp notify"))
                .count()
        })
        .unwrap_or(0)
}

/// Issue 27's copy-on-write fork, its first part: a forkable kernel's door. Cells run as in
/// any kernel; the broker (this process) holds the kernel's seccomp listener and no process
/// under it does; a branch clone nobody asked for is refused (`EPERM`, no process made); the
/// data rights its Landlock domain has beneath `/` do not make the read-only root writable
/// (EROFS, and nothing appeared on the host).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forkable_kernels_door_is_held_by_the_broker_and_refuses_what_it_did_not_ask() {
    let _one_at_a_time = FORKABLE.lock().await;
    let b = forkable_backend();
    let k = key("forkable");
    let stateful = stateful();
    b.acquire(&k, &stateful, Origin::Fresh).await.unwrap();
    let sb = b.sandbox(&k).unwrap();
    let before = listeners_of(std::process::id());
    let r = sb.run_code(DOOR_PROBE, &Default::default()).await.unwrap();
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "clone -1 1", "{r:?}");
    assert_eq!(lines[1], "listeners []", "{r:?}");
    assert_eq!(
        lines[2], "refused /usr/lib/airlock-forkable-probe 30",
        "{r:?}"
    );
    assert_eq!(lines[3], "refused /etc/airlock-forkable-probe 30", "{r:?}");
    for host in [
        "/usr/lib/airlock-forkable-probe",
        "/etc/airlock-forkable-probe",
    ] {
        assert!(
            !std::path::Path::new(host).exists(),
            "{host} appeared on the host"
        );
    }
    assert_eq!(
        listeners_of(std::process::id()),
        before + 1,
        "the broker holds the kernel's listener"
    );
    let under: Vec<(i32, usize)> =
        airlock_jail::procfs::descendants(std::process::id().cast_signed())
            .into_iter()
            .map(|pid| (pid, listeners_of(pid)))
            .collect();
    assert!(
        under.iter().all(|(_, n)| *n == 0),
        "no process under the broker holds one: {under:?}"
    );
    let r = sb
        .run_code("print(x + 1)", &Default::default())
        .await
        .unwrap();
    assert_eq!(
        r.stdout, "42\n",
        "the kernel lives on after the refusal: {r:?}"
    );
    b.dispose(&k).await;
}

/// Issue 27's copy-on-write fork at the backend: a forkable kernel forks into two branches
/// that new sandboxes are made from; each holds the parent's variables and files at the fork, what
/// one changes no other sees, and the parent goes on with its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forkable_kernel_forks_into_branches_that_share_nothing_after() {
    let _one_at_a_time = FORKABLE.lock().await;
    let b = forkable_backend();
    let stateful = stateful();
    let k = key("cow-parent");
    b.acquire(&k, &stateful, Origin::Fresh).await.unwrap();
    let parent = b.sandbox(&k).unwrap();
    let setup = "x = 41\nopen('f.txt', 'w').write('parent')";
    let r = parent.run_code(setup, &Default::default()).await.unwrap();
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    let branches = parent.fork_kernel(2).await.unwrap();
    assert_eq!(branches.len(), 2);
    let mut kids = Vec::new();
    for (i, branch) in branches.into_iter().enumerate() {
        let kk = key(&format!("cow-branch-{i}"));
        let kid = b
            .acquire(&kk, &stateful, Origin::Branch(branch))
            .await
            .unwrap();
        kids.push(kid);
    }
    for (i, kid) in kids.iter().enumerate() {
        let code = format!(
            "x += {n}\nopen('f.txt', 'a').write('-{i}')\nimport os\nprint(x, open('f.txt').read(), os.getpid())",
            n = i + 1
        );
        let r = kid.run_code(&code, &Default::default()).await.unwrap();
        assert_eq!(r.stdout, format!("{} parent-{i} 1\n", 41 + i + 1), "{r:?}");
    }
    let r = parent
        .run_code(
            "import os\nprint(x, open('f.txt').read(), os.getpid())",
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        r.stdout, "41 parent 1\n",
        "the parent goes on as it was: {r:?}"
    );
    for (i, kid) in kids.iter().enumerate() {
        let r = kid.run_code("print(x)", &Default::default()).await.unwrap();
        assert_eq!(r.stdout, format!("{}\n", 41 + i + 1), "{r:?}");
    }
}
