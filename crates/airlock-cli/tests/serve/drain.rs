//! The graceful drain (issue 29) through the real binary, the server as root and as
//! `airlock-test`: SIGTERM lets a run in flight finish with its real result, refuses new work
//! with the documented error, pauses every sandbox whose spec allows `snapshot` to the state
//! directory and disposes of the others, and exits 0; a successor on the same directory resumes
//! the paused ones byte-exact. A run longer than `--drain-grace` is cancelled at the grace and
//! still answered; a second SIGTERM cuts the grace short and the sandboxes are still paused.
//! Asserted by external evidence: host /proc (no process left), the state directory's files,
//! the server's log and exit status, and what the sandboxes answer to the successor.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::snapshots::{
    cell, listed, ok, sandbox, sh, stateful, StateDir, FILES, IDENTITIES, NOT_FOUND,
};
use super::support::session_probes::{snapshot, wait_gone};
use super::support::*;

const SHUTDOWN: i64 = -32012;
/// Live sandboxes whose spec allows `snapshot`.
const PAUSABLE: usize = 20;
/// What the first test's drain may take after its run ends: 21 sandboxes parked.
const BOUND: Duration = Duration::from_secs(30);

/// Kernel variables (a dict of lists, random bytes, an instance of a class) and files in /work
/// (nested, random bytes, a link), all different in every sandbox.
const FILL: &str = r#"
import os, random
rng = random.Random(os.urandom(16))
table = {'k%02d' % i: [rng.randrange(1 << 60) for _ in range(rng.randrange(1, 20))] for i in range(50)}
blob = os.urandom(1 << 16)
class Box:
    def __init__(self, v):
        self.v = v
box = Box(rng.randrange(1 << 30))
os.makedirs('/work/d/e')
with open('/work/d/e/f.bin', 'wb') as fh:
    fh.write(os.urandom(100000 + rng.randrange(1000)))
with open('/work/note.txt', 'w') as fh:
    fh.write(repr(table['k07']))
os.symlink('d/e/f.bin', '/work/link')
"#;

/// A digest of [`FILL`]'s variables.
const DIGEST: &str = r#"
import hashlib as _h
print(_h.sha256(repr((sorted(table.items()), _h.sha256(blob).hexdigest(), box.v,
      type(box).__name__)).encode()).hexdigest())
"#;

/// A server on `state` as `user`, logging at info (the drain's lines), with `grace`.
fn serve(state: &StateDir, user: Option<&str>, grace: &str) -> WsServer {
    let dir = state.dir.to_str().unwrap();
    // 21 sandboxes of the default bounds (1 GiB disk + 512 MiB memory each) may hold more
    // than this host's default admission budget; they hold a few MiB, and the budget is not
    // this test's subject (serve::budget is).
    let args = [
        "--state-dir",
        dir,
        "--drain-grace",
        grace,
        "--log-level",
        "info",
        "--memory-budget-mb",
        "1048576",
    ];
    WsServer::start_as(user, &args)
}

/// Wait (bounded) until the server's log has `needle`.
fn log_has(server: &WsServer, needle: &str) {
    let end = Instant::now() + PATIENCE;
    while !server.stderr().contains(needle) {
        assert!(
            Instant::now() < end,
            "no {needle:?} in the log: {}",
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The log lines that have `what` and name `sandbox`.
fn logged(server: &WsServer, what: &str, sandbox: &str) -> usize {
    let id = format!("sandbox={sandbox}");
    let stderr = server.stderr();
    stderr
        .lines()
        .filter(|l| l.contains(what) && l.contains(&id))
        .count()
}

/// Send a streamed run and wait until its program has printed `started` (it is in flight).
async fn start_streamed(c: &mut WsClient, method: &str, params: Value) -> i64 {
    let id = c.request(method, params).await;
    loop {
        let m = c
            .recv()
            .await
            .expect("connection closed before the run started");
        assert_ne!(m["id"], json!(id), "the run ended before it started: {m}");
        if m["method"] == "output"
            && m["params"]["data"]
                .as_str()
                .unwrap_or("")
                .contains("started")
        {
            return id;
        }
    }
}

/// The refusal a draining server gives, checked whole.
fn assert_draining(resp: &Value, what: &str) {
    assert_eq!(error_code(resp), SHUTDOWN, "{what}: {resp}");
    assert_eq!(resp["error"]["data"]["kind"], "Draining", "{what}: {resp}");
}

/// One pausable sandbox as it was before the drain: its variables' digest and its files.
struct Before {
    digest: String,
    files: String,
}

/// `PAUSABLE` filled stateful sandboxes (with `snapshot`) and one without `snapshot`.
async fn fill(c: &mut WsClient) -> (BTreeMap<String, Before>, String) {
    let mut before = BTreeMap::new();
    for _ in 0..PAUSABLE {
        let sid = stateful(c).await;
        cell(c, &sid, FILL).await;
        let digest = cell(c, &sid, DIGEST).await;
        let files = sh(c, &sid, FILES).await;
        assert!(files.contains("/work/link l d/e/f.bin\n"), "{files}");
        before.insert(sid, Before { digest, files });
    }
    let spec = json!({"spec": {"requires": ["run_code", "exec", "files_in", "files_out"]}});
    let plain = ok(c, "sandbox.create", spec).await["sandbox_id"]
        .as_str()
        .unwrap()
        .to_string();
    sh(c, &plain, "echo never-on-disk > /work/secret").await;
    (before, plain)
}

/// Every new kind of work is refused, on a connection opened during the drain and on one
/// opened before it.
async fn refused_while_draining(server: &WsServer, old: &mut WsClient, sid: &str) {
    let mut fresh = server.connect().await;
    let r = fresh
        .call(
            "sandbox.create",
            json!({"spec": {"requires": ["run_code"]}}),
        )
        .await;
    assert_draining(&r, "sandbox.create on a new connection");
    let r = old
        .call("sandbox.run_code", json!({"sandbox_id": sid, "code": "1"}))
        .await;
    assert_draining(&r, "sandbox.run_code");
    let r = old
        .call("sandbox.fork", json!({"sandbox_id": sid, "count": 1}))
        .await;
    assert_draining(&r, "sandbox.fork");
    let r = fresh
        .execute(7, json!({"code": "print(1)"}), &no_tools)
        .await;
    assert_draining(&r, "execute");
}

async fn drain_and_resume(user: Option<&str>) {
    let state = StateDir::new(user);
    let mut server = serve(&state, user, "20");
    let mut c = server.connect().await;
    let (before, plain) = fill(&mut c).await;
    let busy = before.keys().next().unwrap().clone();
    let mut runner = server.connect().await;
    let code = "import time\nprint('started', flush=True)\ntime.sleep(2)\nlate = 'finished'\nprint('done')";
    let run = start_streamed(
        &mut runner,
        "sandbox.run_code",
        json!({"sandbox_id": busy, "code": code, "stream": true}),
    )
    .await;
    let seen = snapshot(server.pid());
    assert!(seen.len() >= PAUSABLE, "{user:?}: the kernels: {seen:?}");
    let t0 = Instant::now();
    signal(server.pid(), libc_sigterm());
    log_has(&server, "draining: nothing new is admitted");
    let other = before.keys().nth(1).unwrap().clone();
    refused_while_draining(&server, &mut c, &other).await;
    // The run in flight completes with its real result.
    let (resp, _) = runner.wait_for(run, &no_tools).await;
    let r = result_of(&resp);
    assert_eq!(r["status"], "completed", "{user:?}: {r}");
    assert_eq!(r["stdout"], "started\ndone\n", "{user:?}: {r}");
    let status = wait_bounded(&mut server.child, BOUND + Duration::from_secs(20))
        .expect("the server did not exit after the drain");
    let took = t0.elapsed();
    assert_eq!(status.code(), Some(0), "{user:?}: {status:?}");
    assert!(
        took < Duration::from_secs(20),
        "{user:?}: waited out the grace: {took:?}"
    );
    let left = wait_gone(&seen, Duration::from_secs(10));
    assert!(
        left.is_empty(),
        "{user:?}: sandbox processes left: {left:?}"
    );
    for sid in before.keys() {
        assert_eq!(
            logged(&server, "drain: paused", sid),
            1,
            "{sid}: {}",
            server.stderr()
        );
    }
    assert_eq!(
        logged(&server, "drain: disposed", &plain),
        1,
        "{}",
        server.stderr()
    );
    assert_eq!(state.records().len(), PAUSABLE, "{:?}", state.records());
    eprintln!("{user:?}: {PAUSABLE} paused, 1 disposed, exit 0 {took:?} after SIGTERM");
    drop((c, runner, server));
    successor_resumes(&state, user, &before, &busy, &plain).await;
}

/// A server started on the same state directory resumes every paused sandbox byte-exact; the
/// one without `snapshot` is gone.
async fn successor_resumes(
    state: &StateDir,
    user: Option<&str>,
    before: &BTreeMap<String, Before>,
    busy: &str,
    plain: &str,
) {
    let server = serve(state, user, "0");
    let mut c = server.connect().await;
    let listed_now = listed(&mut c).await;
    assert_eq!(listed_now.len(), PAUSABLE, "{user:?}: {listed_now:?}");
    for e in &listed_now {
        assert_eq!(e["state"], "paused", "{e}");
        assert!(
            before.contains_key(e["sandbox_id"].as_str().unwrap()),
            "{e}"
        );
    }
    for (sid, b) in before {
        assert_eq!(
            cell(&mut c, sid, DIGEST).await,
            b.digest,
            "{user:?}: {sid}: variables"
        );
        assert_eq!(
            sh(&mut c, sid, FILES).await,
            b.files,
            "{user:?}: {sid}: files"
        );
    }
    assert_eq!(cell(&mut c, busy, "print(late)").await, "finished\n");
    let r = c
        .call("sandbox.connect", json!({"sandbox_id": plain}))
        .await;
    assert_eq!(error_code(&r), NOT_FOUND, "{user:?}: {r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_lets_the_run_finish_pauses_20_sandboxes_and_a_successor_resumes_them_byte_exact() {
    for user in IDENTITIES {
        drain_and_resume(user).await;
    }
}

/// How the grace of [`long_run`] ends.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// At `--drain-grace 2`.
    Grace,
    /// By a second SIGTERM, a second after the first (the grace is 120 s).
    SecondSignal,
}

/// A run longer than the grace, in a sandbox that allows `snapshot`: cancelled when the grace
/// ends (or a second signal cuts it), answered, and the sandbox is still paused with its file.
async fn long_run(user: Option<&str>, cut: Cut) {
    let state = StateDir::new(user);
    let grace = match cut {
        Cut::Grace => "2",
        Cut::SecondSignal => "120",
    };
    let mut server = serve(&state, user, grace);
    let mut c = server.connect().await;
    let sid = sandbox(&mut c, json!({})).await;
    sh(&mut c, &sid, "echo kept > /work/kept").await;
    let argv = json!(["sh", "-c", "echo started; sleep 60"]);
    let run = start_streamed(
        &mut c,
        "sandbox.exec",
        json!({"sandbox_id": sid, "argv": argv, "stream": true}),
    )
    .await;
    let seen = snapshot(server.pid());
    let t0 = Instant::now();
    signal(server.pid(), libc_sigterm());
    if let Cut::SecondSignal = cut {
        log_has(&server, "draining: nothing new is admitted");
        tokio::time::sleep(Duration::from_secs(1)).await;
        signal(server.pid(), libc_sigterm());
    }
    let (resp, _) = c.wait_for(run, &no_tools).await;
    let answered = t0.elapsed();
    let r = result_of(&resp);
    assert_eq!(r["status"], "cancelled", "{user:?} {cut:?}: {r}");
    assert_eq!(r["error"]["code"], SHUTDOWN, "{user:?} {cut:?}: {r}");
    let (lo, hi) = match cut {
        Cut::Grace => (Duration::from_millis(1900), Duration::from_secs(12)),
        Cut::SecondSignal => (Duration::from_millis(900), Duration::from_secs(12)),
    };
    assert!(
        answered >= lo && answered < hi,
        "{user:?} {cut:?}: answered after {answered:?}"
    );
    let status = wait_bounded(&mut server.child, Duration::from_secs(30)).expect("no exit");
    assert_eq!(status.code(), Some(0), "{user:?} {cut:?}: {status:?}");
    let left = wait_gone(&seen, Duration::from_secs(10));
    assert!(
        left.is_empty(),
        "{user:?} {cut:?}: processes left: {left:?}"
    );
    assert_eq!(
        logged(&server, "drain: paused", &sid),
        1,
        "{}",
        server.stderr()
    );
    eprintln!("{user:?} {cut:?}: answered cancelled after {answered:?}, exit 0");
    drop((c, server));
    let server = serve(&state, user, "0");
    let mut c = server.connect().await;
    assert_eq!(
        sh(&mut c, &sid, "cat /work/kept").await,
        "kept\n",
        "{user:?} {cut:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_longer_than_the_grace_is_cancelled_at_the_grace_and_still_answered() {
    for user in IDENTITIES {
        long_run(user, Cut::Grace).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_sigterm_skips_the_grace_and_the_sandboxes_are_still_paused() {
    for user in IDENTITIES {
        long_run(user, Cut::SecondSignal).await;
    }
}

/// `airlock serve --stdio` drains the same way (one code path): a run in flight finishes, a
/// create is refused, the sandbox is paused and a successor on the same directory has it.
/// Root only: the stdio helper runs the server as the test's own user.
#[test]
fn a_stdio_server_drains_the_same_way() {
    let state = StateDir::new(None);
    let dir = state.dir.to_str().unwrap();
    let args = [
        "--state-dir",
        dir,
        "--drain-grace",
        "20",
        "--log-level",
        "info",
    ];
    let mut server = StdioServer::start(&args);
    let spec = json!({"spec": {"requires": ["exec", "snapshot"]}});
    let (r, _) = server.call(1, "sandbox.create", spec);
    let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_string();
    let write = json!({"sandbox_id": sid, "argv": ["sh", "-c", "echo kept > /work/kept"]});
    assert_eq!(
        result_of(&server.call(2, "sandbox.exec", write).0)["exit_code"],
        0
    );
    let slow = json!({"sandbox_id": sid, "argv": ["sh", "-c", "sleep 2; echo done"]});
    server.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "sandbox.exec", "params": slow}));
    std::thread::sleep(Duration::from_millis(500));
    signal(server.child.id() as i32, libc_sigterm());
    let stderr = server.dir.path().join("stderr");
    let end = Instant::now() + PATIENCE;
    while !std::fs::read_to_string(&stderr)
        .unwrap_or_default()
        .contains("draining: nothing new is admitted")
    {
        assert!(Instant::now() < end, "no drain in the log");
        std::thread::sleep(Duration::from_millis(20));
    }
    let create = json!({"spec": {"requires": ["exec"]}});
    server.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "sandbox.create", "params": create}));
    let mut answers = BTreeMap::new();
    while answers.len() < 2 {
        let m = server.recv().expect("eof before the answers");
        answers.insert(m["id"].as_i64().unwrap(), m);
    }
    assert_eq!(
        result_of(&answers[&3])["stdout"],
        "done\n",
        "{:?}",
        answers[&3]
    );
    assert_draining(&answers[&4], "sandbox.create over stdio");
    let status = wait_bounded(&mut server.child, Duration::from_secs(30)).expect("no exit");
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(state.records().len(), 1, "{:?}", state.records());
    drop(server);
    let mut successor = StdioServer::start(&["--state-dir", dir]);
    let read = json!({"sandbox_id": sid, "argv": ["cat", "/work/kept"]});
    let (r, _) = successor.call(1, "sandbox.exec", read);
    assert_eq!(result_of(&r)["stdout"], "kept\n", "{r}");
}
