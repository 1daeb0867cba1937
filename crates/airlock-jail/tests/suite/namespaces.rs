//! User, net, pid, mount and uts namespaces, and the executor stage's whole sequence
//! (supervisor + pid 1), including signal forwarding and exit-status propagation.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::{assert_passed, probe, probe_cmd, stdout, BOTH};

#[test]
fn userns_maps_the_requested_inside_ids() {
    for nonroot in BOTH {
        assert_passed(&probe(nonroot, &["userns", "1000", "1000"]));
        assert_passed(&probe(nonroot, &["userns", "4242", "1234"]));
    }
}

#[test]
fn netns_has_only_loopback_and_it_comes_up() {
    for nonroot in BOTH {
        assert_passed(&probe(nonroot, &["netns"]));
    }
}

const CHAIN_SCRIPT: &str = r#"
fail() { echo "FAIL $1"; exit 1; }
[ "$(id -u)" = 1000 ] || fail uid
[ "$(id -g)" = 1000 ] || fail gid
[ "$(hostname)" = airlock ] || fail hostname
[ "$$" = 1 ] || fail pid1
[ "$(readlink /proc/self)" != "" ] || fail procfs
grep -q '^CapEff:	0000000000000000' /proc/self/status || fail capeff
grep -q '^CapBnd:	0000000000000000' /proc/self/status || fail capbnd
grep -q '^NoNewPrivs:	1' /proc/self/status || fail nnp
grep -q '^Seccomp:	2' /proc/self/status || fail seccomp
[ -e /proc/self/fd/9 ] && fail leaked-fd
[ -e /proc/self/fd/2 ] || fail stderr-closed
[ "$(ulimit -n)" = 256 ] || fail nofile
[ "$(ulimit -c)" = 0 ] || fail core
[ "$(ls /proc/sys/net/ipv4/conf | sort | tr '\n' ' ')" = "all default lo " ] || fail netns
cat @OUTSIDE@/secret 2>/dev/null && fail landlock-read
echo x 2>/dev/null > @OUTSIDE@/new && fail landlock-write
echo x > @WORK@/out || fail work-dir-write
[ "$(cat @WORK@/out)" = x ] || fail work-dir-read
unshare -U true 2>/dev/null && fail unshare
echo ALL-OK
exit 5
"#;

#[test]
fn full_executor_chain_jails_the_command() {
    use std::os::unix::fs::PermissionsExt;
    for nonroot in BOTH {
        let outside = super::open_tempdir();
        let work = super::open_tempdir();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "secret").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
        let script = CHAIN_SCRIPT
            .replace("@OUTSIDE@", outside.path().to_str().unwrap())
            .replace("@WORK@", work.path().to_str().unwrap());
        let out = probe(nonroot, &["chain", &script, work.path().to_str().unwrap()]);
        let text = stdout(&out);
        assert!(text.contains("ALL-OK"), "chain checks failed:\n{text}");
        assert_eq!(out.status.code(), Some(5), "exit code not propagated");
    }
}

/// Starts `chain SCRIPT` and reads until the script prints `ready`; returns the child pid.
fn start_chain(script: &str) -> (Child, i32) {
    let mut child = probe_cmd(false, &["chain", script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn probe");
    let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
    let mut inner = 0;
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            reader.read_line(&mut line).expect("read") > 0,
            "probe ended early"
        );
        if let Some(pid) = line.trim().strip_prefix("child ") {
            inner = pid.parse().expect("pid");
        }
        if line.trim() == "ready" {
            break;
        }
    }
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    (child, inner)
}

fn wait_timeout(child: &mut Child, t: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < t {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn sigterm_to_the_supervisor_reaches_a_pid1_that_handles_it() {
    let (mut child, _) =
        start_chain("trap 'exit 42' TERM; echo ready; while :; do sleep 0.05; done");
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = wait_timeout(&mut child, Duration::from_secs(10)).expect("supervisor ended");
    assert_eq!(status.code(), Some(42));
}

#[test]
fn pid1_without_a_handler_ignores_sigterm_and_dies_with_the_supervisor() {
    let (mut child, inner) = start_chain("echo ready; sleep 60");
    assert!(inner > 0);
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    // The kernel drops signals to a pid-namespace init that has no handler for them.
    assert!(
        wait_timeout(&mut child, Duration::from_millis(700)).is_none(),
        "pid 1 died of SIGTERM"
    );
    child.kill().expect("kill supervisor");
    let status = child.wait().expect("wait");
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    // PR_SET_PDEATHSIG takes pid 1, and with it the whole pid namespace, down.
    let start = Instant::now();
    while airlock_jail::procfs::process_exists(inner) && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !airlock_jail::procfs::process_exists(inner),
        "pid 1 outlived its supervisor"
    );
}

#[test]
fn supervisor_dies_by_the_same_signal_as_pid1() {
    let (mut child, inner) = start_chain("echo ready; sleep 60");
    // SIGKILL from an ancestor namespace is always delivered, even to pid 1.
    airlock_jail::process::kill(inner, libc::SIGKILL).expect("kill pid 1");
    let status = wait_timeout(&mut child, Duration::from_secs(10)).expect("supervisor ended");
    assert_eq!(status.signal(), Some(libc::SIGKILL));
}
