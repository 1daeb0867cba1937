//! Snapshots, pause/resume and fork (issue 27) attacked through the real binary: what survives a
//! SIGKILLed server and what a cut pause leaves, what the store refuses (damaged, truncated,
//! foreign, not its own), what a restore never makes (set-id bits, devices, hard links, a link
//! followed out), who can read the store, and how separate a fork's branches are. Every attack
//! runs the server as root and as `airlock-test` on a state directory of its own, and asserts
//! by external evidence: the store's files on the host, host /proc (pids, namespaces, markers),
//! the host's own files, and what the sandboxes answer.
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::support::*;

/// The identities the attacks run the server as.
pub(super) const IDENTITIES: [Option<&str>; 2] = [None, Some("airlock-test")];

const REFUSED: i64 = -32007;
pub(super) const NOT_FOUND: i64 = -32016;
const INVALID_PARAMS: i64 = -32602;

/// What the sandboxes here ask for.
pub(super) const REQUIRES: [&str; 6] = [
    "run_code",
    "exec",
    "files_in",
    "files_out",
    "files_list",
    "snapshot",
];

// =============================================================================================
// The state directory, on the host.
// =============================================================================================

/// A state directory for a server running as `user`: `<tempdir>/state`, 0700 and the user's,
/// in a tempdir others may traverse (so that only the state directory's own modes keep them
/// out).
pub(super) struct StateDir {
    tmp: tempfile::TempDir,
    pub(super) dir: PathBuf,
}

impl StateDir {
    pub(super) fn new(user: Option<&str>) -> StateDir {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let dir = tmp.path().join("state");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        if let Some(u) = user {
            chown(u, &dir);
        }
        StateDir { tmp, dir }
    }

    /// A server on this state directory.
    pub(super) fn serve(&self, user: Option<&str>) -> WsServer {
        WsServer::start_as(user, &["--state-dir", self.dir.to_str().unwrap()])
    }

    /// A server on this state directory that forks copy-on-write.
    pub(super) fn serve_cow(&self, user: Option<&str>, cow: bool) -> WsServer {
        let dir = self.dir.to_str().unwrap();
        if cow {
            WsServer::start_as(user, &["--state-dir", dir, "--fork-copy-on-write"])
        } else {
            self.serve(user)
        }
    }

    fn snapshot_path(&self, id: &str) -> PathBuf {
        self.dir.join("snapshots").join(id)
    }

    /// The names in `snapshots/`, sorted.
    fn snapshot_files(&self) -> Vec<String> {
        names_in(&self.dir.join("snapshots"))
    }

    /// The names in `paused/`, sorted.
    fn paused_files(&self) -> Vec<String> {
        names_in(&self.dir.join("paused"))
    }

    /// The paused records (`paused/*.json`, temporary files left out), sorted.
    pub(super) fn records(&self) -> Vec<String> {
        let mut names = self.paused_files();
        names.retain(|n| !n.starts_with(".tmp-") && n.ends_with(".json"));
        names
    }

    /// The `.tmp-*` names in the subdirectory `sub` ("" for the state directory itself).
    fn temps_in(&self, sub: &str) -> Vec<String> {
        let mut names = names_in(&self.dir.join(sub));
        names.retain(|n| n.starts_with(".tmp-"));
        names
    }

    /// Every `.tmp-*` anywhere in the state directory.
    fn temp_leftovers(&self) -> Vec<PathBuf> {
        walk(&self.dir)
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(".tmp-"))
            })
            .collect()
    }
}

fn chown(user: &str, path: &Path) {
    let st = Command::new("chown")
        .args(["-R", &format!("{user}:")])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success(), "chown {user} {path:?}");
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Every path beneath `dir` (not following links).
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if std::fs::symlink_metadata(&p).unwrap().is_dir() {
                todo.push(p.clone());
            }
            out.push(p);
        }
    }
    out
}

/// SIGKILL the server and wait for it to be gone.
fn kill9(server: &mut WsServer) {
    signal(server.pid(), 9);
    wait_bounded(&mut server.child, Duration::from_secs(10)).expect("the server did not die");
}

/// The uid a server as `user` runs as.
fn uid_of_user(user: Option<&str>) -> u32 {
    let Some(u) = user else { return 0 };
    let out = Command::new("id").args(["-u", u]).output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Whether `user` can run `argv` successfully (`runuser`, as root).
fn as_user_succeeds(user: &str, argv: &[&str]) -> bool {
    Command::new("runuser")
        .args(["-u", user, "--"])
        .args(argv)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success()
}

// =============================================================================================
// The wire.
// =============================================================================================

/// The result of `method` (an error fails the test).
pub(super) async fn ok(c: &mut WsClient, method: &str, params: Value) -> Value {
    let r = c.call(method, params).await;
    result_of(&r).clone()
}

/// A sandbox made from `spec` (the snapshot capability and the usual ones required).
pub(super) async fn sandbox(c: &mut WsClient, extra: Value) -> String {
    let mut spec = json!({ "requires": REQUIRES });
    if let (Value::Object(s), Value::Object(e)) = (&mut spec, extra) {
        s.extend(e);
    }
    let r = ok(c, "sandbox.create", json!({ "spec": spec })).await;
    r["sandbox_id"].as_str().unwrap().to_string()
}

/// A stateful sandbox (run_code cells share one interpreter).
pub(super) async fn stateful(c: &mut WsClient) -> String {
    sandbox(c, json!({ "stateful": true })).await
}

/// The stdout of a cell, which must complete.
pub(super) async fn cell(c: &mut WsClient, sid: &str, code: &str) -> String {
    let r = ok(
        c,
        "sandbox.run_code",
        json!({ "sandbox_id": sid, "code": code }),
    )
    .await;
    assert_eq!(r["status"], "completed", "{sid}: {r}");
    r["stdout"].as_str().unwrap().to_string()
}

/// The stdout of `sh -c script` in the sandbox, which must exit 0.
pub(super) async fn sh(c: &mut WsClient, sid: &str, script: &str) -> String {
    let r = ok(
        c,
        "sandbox.exec",
        json!({ "sandbox_id": sid, "argv": ["sh", "-c", script] }),
    )
    .await;
    assert_eq!(r["exit_code"], 0, "{sid}: {script}: {r}");
    r["stdout"].as_str().unwrap().to_string()
}

/// `sandbox.list`'s entries.
pub(super) async fn listed(c: &mut WsClient) -> Vec<Value> {
    ok(c, "sandbox.list", json!({})).await["sandboxes"]
        .as_array()
        .unwrap()
        .clone()
}

/// The ids `sandbox.list` shows, with their state.
async fn listed_states(c: &mut WsClient) -> BTreeMap<String, String> {
    listed(c)
        .await
        .iter()
        .map(|e| {
            (
                e["sandbox_id"].as_str().unwrap().to_string(),
                e["state"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// `snapshot.list`'s ids, sorted.
async fn snapshot_ids(c: &mut WsClient) -> Vec<String> {
    let r = ok(c, "snapshot.list", json!({})).await;
    let mut ids: Vec<String> = r["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["snapshot_id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// `sandbox.create {from_snapshot}`: the new sandbox's id.
async fn from_snapshot(c: &mut WsClient, id: &str) -> String {
    let r = ok(c, "sandbox.create", json!({ "from_snapshot": id })).await;
    r["sandbox_id"].as_str().unwrap().to_string()
}

/// What the host sees of a sandbox's files: every entry of /work, /tmp and /dev/shm beneath
/// them (type, mode, size and mtime to the nanosecond; a link's target text), then the SHA-256
/// of every file — read by the system's find and sha256sum in a run of the sandbox.
pub(super) const FILES: &str = "cd / && \
    find /work /tmp /dev/shm -mindepth 1 \\( -type d -printf '%p d %m %T@\\n' \\) \
      -o \\( -type f -printf '%p f %m %s %T@\\n' \\) -o \\( -type l -printf '%p l %l\\n' \\) \
      -o -printf '%p other %y\\n' | sort && \
    find /work /tmp /dev/shm -type f -exec sha256sum {} + | sort";

// =============================================================================================
// Host /proc: a sandbox's kernel process, found by the pid namespace it reports.
// =============================================================================================

pub(super) fn ns_of(pid: i32, ns: &str) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/{ns}"))
        .map(|l| l.display().to_string())
        .unwrap_or_default()
}

fn nspid(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("NSpid:"))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

use super::support::session_probes::start_time;

/// The server's descendants in the pid namespace `pidns` (a `pid:[n]` link).
fn in_pidns(server: i32, pidns: &str) -> Vec<i32> {
    all_descendants(server)
        .into_iter()
        .filter(|p| ns_of(*p, "pid") == pidns)
        .collect()
}

/// The host pid of a stateful sandbox's kernel: pid 1 of the pid namespace its cell reports.
pub(super) async fn kernel_pid(c: &mut WsClient, server: i32, sid: &str) -> i32 {
    let pidns = cell(
        c,
        sid,
        "import os as _os\nprint(_os.readlink('/proc/self/ns/pid'))",
    )
    .await;
    let found: Vec<i32> = in_pidns(server, pidns.trim())
        .into_iter()
        .filter(|p| nspid(*p).last() == Some(&1))
        .collect();
    assert_eq!(found.len(), 1, "{sid}: the kernel of {pidns}: {found:?}");
    found[0]
}

/// The namespaces whose separation a branch must have.
const NAMESPACES: [&str; 7] = ["user", "mnt", "pid", "net", "ipc", "uts", "cgroup"];

/// A host file as it is: its bytes, and its mode, owner, size, mtime and ctime.
fn host_file(path: &str) -> (Vec<u8>, String) {
    let m = std::fs::symlink_metadata(path).unwrap();
    let meta = format!(
        "{path} mode {:o} uid {} gid {} size {} mtime {}.{} ctime {}.{}",
        m.mode(),
        m.uid(),
        m.gid(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    );
    (std::fs::read(path).unwrap(), meta)
}

// =============================================================================================
// 1. Paused sandboxes survive a SIGKILLed server, byte for byte.
// =============================================================================================

/// Fills a stateful sandbox: random files (a 3 MB one, nested dirs, links, modes, set mtimes)
/// in /work, /tmp and /dev/shm, and kernel variables (a dict of lists, 5 MB of bytes, a
/// function, a class and an instance of it, a closure, and a generator part-way through,
/// which pickling cannot keep and the kernel's process image does).
const FILL: &str = r#"
import os, random
rng = random.Random(os.urandom(16))
data = {'k%03d' % i: [rng.randrange(1 << 62) for _ in range(rng.randrange(1, 40))] for i in range(200)}
big = os.urandom(5 << 20)
def square(v):
    return v * v + len(data)
class Point:
    dims = 2
    def __init__(self, x, y):
        self.x, self.y = x, y
    def norm2(self):
        return square(self.x) + self.y * self.y
pt = Point(rng.randrange(1 << 16), 7)
def make_adder(n):
    def add(v):
        return v + n
    return add
add5 = make_adder(rng.randrange(1 << 16))
gen = (i * 7 for i in range(3))
first = next(gen)
os.makedirs('/work/a/b/c')
os.makedirs('/tmp/t/u')
sizes = {'/work/big.bin': 3 << 20, '/work/a/b/c/deep.bin': 4097, '/work/empty': 0,
         '/tmp/t/u/x.bin': 70000, '/dev/shm/s.bin': 1234}
for path, n in sizes.items():
    with open(path, 'wb') as fh:
        fh.write(os.urandom(n))
os.symlink('a/b/c/deep.bin', '/work/link')
os.symlink('/nonexistent/target', '/tmp/dangling')
for path, mode in [('/work/a/b/c/deep.bin', 0o640), ('/work/big.bin', 0o751),
                   ('/tmp/t/u/x.bin', 0o600), ('/work/a/b', 0o700), ('/tmp/t', 0o750)]:
    os.chmod(path, mode)
stamped = ['/work/a/b/c/deep.bin', '/work/a/b/c', '/work/a/b', '/work/a', '/work/big.bin',
           '/work/empty', '/tmp/t/u/x.bin', '/tmp/t/u', '/tmp/t', '/dev/shm/s.bin']
for i, path in enumerate(stamped):
    t = 1_234_567_890_123_456_789 + i * 1_000_003 + rng.randrange(1000)
    os.utime(path, ns=(t, t))
"#;

/// A digest of the kernel's variables (a canonical repr, functions and classes called), and
/// where the generator stands (its frame's next instruction; reading it does not advance it).
const DIGEST: &str = r#"
import hashlib as _h
print(_h.sha256(repr((sorted(data.items()), _h.sha256(big).hexdigest(), len(big), square(12),
      Point.dims, Point(3, 4).norm2(), pt.norm2(), pt.x, pt.y, type(pt).__name__,
      type(pt) is Point, add5(10), add5.__closure__[0].cell_contents, make_adder(3)(4))).encode()
      ).hexdigest(), first, gen.gi_frame.f_lasti)
"#;

async fn survive_sigkill(user: Option<&str>) {
    let state = StateDir::new(user);
    let mut server = state.serve(user);
    let mut c = server.connect().await;
    let mut before = BTreeMap::new();
    for _ in 0..2 {
        let sid = stateful(&mut c).await;
        cell(&mut c, &sid, FILL).await;
        let digest = cell(&mut c, &sid, DIGEST).await;
        let fields: Vec<&str> = digest.split_whitespace().collect();
        assert!(fields.len() == 3 && fields[1] == "0", "{digest}");
        let files = sh(&mut c, &sid, FILES).await;
        for entry in [
            "/work/link l a/b/c/deep.bin\n",
            "/work/big.bin f 751 3145728 1234567890.",
            "/work/a/b d 700 1234567890.",
            "/tmp/t/u/x.bin f 600 70000 ",
            "/dev/shm/s.bin f 644 1234 ",
            "/tmp/dangling l /nonexistent/target\n",
        ] {
            assert!(files.contains(entry), "{entry:?} not in {files}");
        }
        assert_eq!(files.matches("  /").count(), 5, "five digests: {files}");
        let p = ok(&mut c, "sandbox.pause", json!({ "sandbox_id": sid })).await;
        assert_eq!(p["state"], "paused", "{p}");
        assert_eq!(p["sandbox_id"], sid.as_str(), "{p}");
        let saved: BTreeSet<&str> = p["kernel"]["saved"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for name in ["data", "big", "square", "Point", "pt", "make_adder", "add5"] {
            assert!(saved.contains(name), "{name} not saved: {p}");
        }
        // Carried as the kernel's process image: nothing left out, the generator kept.
        assert_eq!(p["kernel"]["carried"], "image", "{p}");
        assert!(saved.contains("gen"), "{p}");
        assert_eq!(p["kernel"]["not_saved"], json!({}), "{p}");
        before.insert(sid, (digest, files, p["snapshot_id"].clone()));
    }
    let digests: BTreeSet<&String> = before.values().map(|(d, _, _)| d).collect();
    assert_eq!(digests.len(), 2, "two sandboxes, one state: {before:?}");
    // Paused: nothing of either sandbox runs any more.
    let left = settle(server.pid(), Duration::from_secs(5));
    assert!(
        left.is_empty(),
        "{user:?}: processes of paused sandboxes: {left:?}"
    );
    kill9(&mut server);
    drop(c);
    drop(server);

    let server = state.serve(user);
    let mut c = server.connect().await;
    assert!(
        state.temp_leftovers().is_empty(),
        "{:?}",
        state.temp_leftovers()
    );
    let listed_now = listed(&mut c).await;
    for (sid, (_, _, snap)) in &before {
        let e = listed_now.iter().find(|e| e["sandbox_id"] == sid.as_str());
        let e = e.unwrap_or_else(|| panic!("{user:?}: {sid} not listed: {listed_now:?}"));
        assert_eq!(e["state"], "paused", "{e}");
        assert_eq!(&e["snapshot_id"], snap, "{e}");
    }
    assert_eq!(listed_now.len(), 2, "{listed_now:?}");
    for (sid, (digest, files, _)) in &before {
        // The first call on a paused id makes it again: same id, same state.
        let after = cell(&mut c, sid, DIGEST).await;
        assert_eq!(&after, digest, "{user:?}: {sid}: variables");
        // The generator goes on where it stood: its next two values, then its end.
        let rest = cell(&mut c, sid, "print(list(gen))").await;
        assert_eq!(rest, "[7, 14]\n", "{user:?}: {sid}: the generator");
        let files_after = sh(&mut c, sid, FILES).await;
        assert_eq!(&files_after, files, "{user:?}: {sid}: files");
    }
    let states = listed_states(&mut c).await;
    let want: BTreeMap<String, String> = before
        .keys()
        .map(|s| (s.clone(), "idle".to_string()))
        .collect();
    assert_eq!(states, want, "{user:?}: live again under the same ids");
    // Resumed: the records are gone, and so are the snapshots (they were not kept).
    assert!(
        state.paused_files().is_empty(),
        "{:?}",
        state.paused_files()
    );
    assert!(snapshot_ids(&mut c).await.is_empty());
    assert!(
        state.snapshot_files().is_empty(),
        "{:?}",
        state.snapshot_files()
    );
    assert!(
        state.temp_leftovers().is_empty(),
        "{:?}",
        state.temp_leftovers()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn paused_sandboxes_survive_a_sigkilled_server_byte_exact() {
    for user in IDENTITIES {
        survive_sigkill(user).await;
    }
}

// =============================================================================================
// 2. A pause cut by SIGKILL leaves a whole snapshot or none.
// =============================================================================================

/// Tens of MB of kernel state (zeros and random bytes) and a file; prints what [`HELD`] must
/// print again wherever this state is restored.
const HEAVY: &str = r#"
import os, hashlib
blob = bytes(24 << 20)
rnd = os.urandom(8 << 20)
open('/work/rnd', 'wb').write(rnd[:1 << 20])
print(len(blob), hashlib.sha256(rnd).hexdigest())
"#;

/// What a sandbox holding [`HEAVY`]'s state prints: the lengths and digests of all of it.
const HELD: &str = r#"
import hashlib
print(len(blob), hashlib.sha256(rnd).hexdigest())
assert not any(blob)
assert open('/work/rnd', 'rb').read() == rnd[:1 << 20]
"#;

/// When a pause is cut.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// This long after it was asked for.
    AfterMs(u64),
    /// As soon as the store has a temporary file (the snapshot is being written).
    WhileWriting,
    /// As soon as the snapshot has its name (its paused record may not be written yet).
    OncePublished,
    /// After the answer.
    Answered,
}

/// Wait (bounded) until a name in `snapshots/` passes `pick`.
async fn store_has(state: &StateDir, pick: impl Fn(&str) -> bool) {
    let end = Instant::now() + PATIENCE;
    while !state.snapshot_files().iter().any(|n| pick(n)) {
        assert!(Instant::now() < end, "the store never had it");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// SIGKILL the server at `cut` of a pause; start another on the state directory and check
/// what the cut left. Returns what it found.
async fn cut_pause(user: Option<&str>, state: &StateDir, cut: Cut) -> String {
    let mut server = state.serve(user);
    let mut c = server.connect().await;
    assert!(snapshot_ids(&mut c).await.is_empty(), "not a clean store");
    assert!(listed(&mut c).await.is_empty(), "not a clean server");
    let sid = stateful(&mut c).await;
    let want = cell(&mut c, &sid, HEAVY).await;
    let asked = c
        .request("sandbox.pause", json!({ "sandbox_id": sid }))
        .await;
    let started = Instant::now();
    match cut {
        Cut::AfterMs(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
        Cut::WhileWriting => store_has(state, |n| n.starts_with(".tmp-")).await,
        Cut::OncePublished => store_has(state, |n| !n.starts_with(".tmp-")).await,
        Cut::Answered => {
            let (r, _) = c.wait_for(asked, &no_tools).await;
            assert_eq!(result_of(&r)["state"], "paused", "{r}");
        }
    }
    let cut_at = started.elapsed();
    kill9(&mut server);
    drop(c);
    drop(server);

    let server = state.serve(user);
    let mut c = server.connect().await;
    let how = format!("{user:?}, cut {cut:?} ({cut_at:?})");
    // The dead writer's temporary file (if any) is swept; what is left is whole. (A cut paused
    // record's temporary file is another matter: `a_paused_record_cut_by_sigkill_...`.)
    for sub in ["", "snapshots"] {
        assert!(
            state.temps_in(sub).is_empty(),
            "{how}: {:?}",
            state.temps_in(sub)
        );
    }
    let files = state.snapshot_files();
    assert_eq!(snapshot_ids(&mut c).await, files, "{how}");
    for id in &files {
        let copy = from_snapshot(&mut c, id).await;
        assert_eq!(cell(&mut c, &copy, HELD).await, want, "{how}: {id}");
        ok(&mut c, "sandbox.dispose", json!({ "sandbox_id": copy })).await;
    }
    let states = listed_states(&mut c).await;
    let found = if states.get(&sid).map(String::as_str) == Some("paused") {
        assert_eq!(states.len(), 1, "{how}: {states:?}");
        assert_eq!(state.records(), [format!("{sid}.json")], "{how}");
        assert_eq!(
            files.len(),
            1,
            "{how}: the paused sandbox's snapshot: {files:?}"
        );
        assert_eq!(cell(&mut c, &sid, HELD).await, want, "{how}: resumed");
        ok(&mut c, "sandbox.dispose", json!({ "sandbox_id": sid })).await;
        "paused"
    } else {
        assert!(states.is_empty(), "{how}: {states:?}");
        assert!(state.records().is_empty(), "{how}: {:?}", state.records());
        let r = c.call("sandbox.resume", json!({ "sandbox_id": sid })).await;
        assert_eq!(error_code(&r), NOT_FOUND, "{how}: {r}");
        if files.is_empty() {
            "nothing"
        } else {
            "a whole snapshot, no record"
        }
    };
    // A clean store for the next cut.
    for id in snapshot_ids(&mut c).await {
        ok(&mut c, "snapshot.remove", json!({ "snapshot_id": id })).await;
    }
    assert!(state.snapshot_files().is_empty(), "{how}");
    format!("{how}: {found}")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pause_cut_by_sigkill_leaves_a_whole_snapshot_or_none() {
    for user in IDENTITIES {
        let state = StateDir::new(user);
        let mut seen = Vec::new();
        for cut in [
            Cut::AfterMs(0),
            Cut::AfterMs(20),
            Cut::AfterMs(150),
            Cut::WhileWriting,
            Cut::OncePublished,
            Cut::AfterMs(400),
            Cut::Answered,
        ] {
            seen.push(cut_pause(user, &state, cut).await);
        }
        eprintln!("{}", seen.join("\n"));
        // Cut mid-write: the temporary file went, and with it every trace of the pause.
        assert!(seen[3].ends_with(": nothing"), "{seen:?}");
        assert!(!seen[4].ends_with(": nothing"), "{seen:?}");
        assert!(seen[6].ends_with(": paused"), "{seen:?}");
    }
}

/// A pause cut while its paused record is being written (a `.tmp-*` in `paused/` at the
/// instant of the SIGKILL, and no record after it) leaves no temporary file once the next
/// server has started: the next server sweeps `paused/` and `kept/` once it holds the state
/// directory's lock (it failed before that sweep: `paused/.tmp-<sandbox_id>.json-<pid>` stayed
/// for good).
#[tokio::test(flavor = "multi_thread")]
async fn a_paused_record_cut_by_sigkill_leaves_no_temporary_file() {
    let state = StateDir::new(None);
    for attempt in 0..20 {
        let mut server = state.serve(None);
        let mut c = server.connect().await;
        let sid = stateful(&mut c).await;
        cell(&mut c, &sid, "x = bytes(4 << 20)").await;
        c.request("sandbox.pause", json!({ "sandbox_id": sid }))
            .await;
        let paused = state.dir.join("paused");
        let record = format!("{sid}.json");
        // Spin on the directory, and SIGKILL the instant a temporary record is there.
        let caught = tokio::task::block_in_place(|| loop {
            let names = names_in(&paused);
            if names.iter().any(|n| n.starts_with(".tmp-")) {
                server.child.kill().unwrap();
                return true;
            }
            if names.contains(&record) {
                return false;
            }
        });
        kill9(&mut server);
        drop((c, server));
        if !caught {
            continue;
        }
        let server = state.serve(None);
        let mut c = server.connect().await;
        if listed_states(&mut c).await.contains_key(&sid) {
            // The rename won the race: a whole record. Try again.
            ok(&mut c, "sandbox.dispose", json!({ "sandbox_id": sid })).await;
            continue;
        }
        assert!(
            state.temps_in("paused").is_empty(),
            "attempt {attempt}: a cut record's temporary file outlived a restart: {:?}",
            state.temps_in("paused")
        );
        return;
    }
    panic!("no SIGKILL landed while a paused record was being written");
}

// =============================================================================================
// 3. A damaged, truncated, foreign or not-its-own snapshot is refused, and nothing is made.
// =============================================================================================

/// A snapshot of `sid` after writing `text` to /work/n (so each one is another file).
async fn snapshot_with(c: &mut WsClient, sid: &str, text: &str) -> String {
    cell(
        c,
        sid,
        &format!("open('/work/n', 'w').write({text:?})\nx = {text:?}"),
    )
    .await;
    let r = ok(c, "sandbox.snapshot", json!({ "sandbox_id": sid })).await;
    r["snapshot_id"].as_str().unwrap().to_string()
}

/// Flip one byte in the middle of `path`, in place (its owner and mode stay).
fn flip_middle(path: &Path) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let at = f.metadata().unwrap().len() / 2;
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x5a], at).unwrap();
}

/// `from_snapshot` of `id` is refused naming `why`, and no sandbox (nor a mount namespace
/// the server holds) was made.
/// `from_snapshot` of `id` is refused, its message naming every `why`, and nothing is made;
/// returns the refusal's `data.kind`.
async fn refused_from(c: &mut WsClient, server: &WsServer, id: &str, why: &[&str]) -> String {
    let before = (listed_states(c).await, mount_ns_fds(server.pid()));
    let r = c
        .call("sandbox.create", json!({ "from_snapshot": id }))
        .await;
    assert_eq!(error_code(&r), REFUSED, "{id}: {r}");
    let kind = r["error"]["data"]["kind"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let msg = r["error"]["message"].as_str().unwrap();
    for w in why {
        assert!(msg.contains(w), "{id}: {w:?} not in {msg:?}");
    }
    let after = (listed_states(c).await, mount_ns_fds(server.pid()));
    assert_eq!(before, after, "{id}: something was made");
    kind
}

async fn refuse_damage(user: Option<&str>) {
    // Another server's store, with a key of its own, makes a snapshot.
    let other = StateDir::new(user);
    let foreign = {
        let s = other.serve(user);
        let mut c = s.connect().await;
        let sid = stateful(&mut c).await;
        snapshot_with(&mut c, &sid, "made elsewhere").await
    };

    let state = StateDir::new(user);
    let server = state.serve(user);
    let mut c = server.connect().await;
    let sid = stateful(&mut c).await;
    let whole = snapshot_with(&mut c, &sid, "whole").await;
    let flipped = snapshot_with(&mut c, &sid, "flipped").await;
    let short = snapshot_with(&mut c, &sid, "short").await;
    let open = snapshot_with(&mut c, &sid, "0644").await;
    let owned = snapshot_with(&mut c, &sid, "owned").await;
    // The control: an intact one restores.
    let copy = from_snapshot(&mut c, &whole).await;
    assert_eq!(
        cell(&mut c, &copy, "print(x, open('/work/n').read())").await,
        "whole whole\n"
    );
    ok(&mut c, "sandbox.dispose", json!({ "sandbox_id": copy })).await;

    flip_middle(&state.snapshot_path(&flipped));
    let kind = refused_from(&mut c, &server, &flipped, &["damaged or was altered"]).await;
    assert_eq!(kind, "SnapshotTampered");

    let path = state.snapshot_path(&short);
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let kind = refused_from(&mut c, &server, &short, &["truncated"]).await;
    assert_eq!(kind, "SnapshotTruncated");

    // The other store's file, under its own name, the server's and 0600: only the key differs.
    let there = other.snapshot_path(&foreign);
    let here = state.snapshot_path(&foreign);
    std::fs::copy(&there, &here).unwrap();
    std::fs::set_permissions(&here, std::fs::Permissions::from_mode(0o600)).unwrap();
    if let Some(u) = user {
        chown(u, &here);
    }
    let kind = refused_from(
        &mut c,
        &server,
        &foreign,
        &["not made by this store", "another key"],
    )
    .await;
    assert_eq!(kind, "SnapshotForeign");

    let path = state.snapshot_path(&open);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    refused_from(&mut c, &server, &open, &["not made by this store", "0644"]).await;

    // Another uid's file: a root server opens it and refuses its owner; a server as
    // airlock-test cannot open it while it is 0600, and refuses its owner once it can.
    let path = state.snapshot_path(&owned);
    chown("nobody", &path);
    if user.is_some() {
        refused_from(&mut c, &server, &owned, &["Permission denied"]).await;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    refused_from(
        &mut c,
        &server,
        &owned,
        &["not made by this store", "owned by uid 65534"],
    )
    .await;

    // A paused sandbox whose snapshot was altered is not made again.
    let victim = stateful(&mut c).await;
    cell(&mut c, &victim, "x = 'victim'").await;
    let p = ok(&mut c, "sandbox.pause", json!({ "sandbox_id": victim })).await;
    flip_middle(&state.snapshot_path(p["snapshot_id"].as_str().unwrap()));
    let before = (listed_states(&mut c).await, mount_ns_fds(server.pid()));
    assert_eq!(before.0.get(&victim).map(String::as_str), Some("paused"));
    for (method, params) in [
        ("sandbox.resume", json!({ "sandbox_id": victim })),
        (
            "sandbox.run_code",
            json!({ "sandbox_id": victim, "code": "print(x)" }),
        ),
        (
            "sandbox.exec",
            json!({ "sandbox_id": victim, "argv": ["true"] }),
        ),
    ] {
        let r = c.call(method, params).await;
        assert_eq!(error_code(&r), REFUSED, "{user:?}: {method}: {r}");
        let msg = r["error"]["message"].as_str().unwrap();
        assert!(msg.contains("damaged or was altered"), "{method}: {msg}");
        let after = (listed_states(&mut c).await, mount_ns_fds(server.pid()));
        assert_eq!(before, after, "{user:?}: {method}: something was made");
    }
    // What verifies still restores.
    let copy = from_snapshot(&mut c, &whole).await;
    assert_eq!(cell(&mut c, &copy, "print(x)").await, "whole\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tampered_truncated_or_foreign_snapshot_is_refused() {
    for user in IDENTITIES {
        refuse_damage(user).await;
    }
}

// =============================================================================================
// 4. A restore makes no set-id bit, no device, no hard link, and follows no link out.
// =============================================================================================

/// Set-id files, a sticky dir, links out of the sandbox, a hard link, and attempts at devices
/// and a FIFO; prints what each attempt gave.
const PLANT: &str = "cd /work && \
    printf su > su; chmod 4755 su; echo su=$?; \
    printf sg > sg; chmod 2755 sg; echo sg=$?; \
    mkdir sticky; chmod 1777 sticky; echo sticky=$?; \
    ln -s /etc/passwd out; ln -s ../../../../etc/shadow up; \
    printf hard > h1; ln h1 h2; echo ln=$?; \
    mknod chr c 1 3 2>/dev/null; echo chr=$?; mknod blk b 7 0 2>/dev/null; echo blk=$?; \
    mkfifo fifo; echo fifo=$?; true";

/// Each entry of /work: name, type, mode, link count, inode, link target.
const ENTRIES: &str =
    "find /work -mindepth 1 -printf '%P %y %m %n %i %l\\n' | sort; cat /work/h1 /work/h2";

fn entry_fields(listing: &str, name: &str) -> Vec<String> {
    listing
        .lines()
        .find(|l| l.split(' ').next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} in {listing}"))
        .split(' ')
        .map(str::to_string)
        .collect()
}

async fn restore_is_inert(user: Option<&str>) {
    let host = [host_file("/etc/passwd"), host_file("/etc/shadow")];
    let state = StateDir::new(user);
    let server = state.serve(user);
    let mut c = server.connect().await;
    let sid = sandbox(&mut c, json!({})).await;
    let tried = sh(&mut c, &sid, PLANT).await;
    let source = sh(&mut c, &sid, ENTRIES).await;
    // What the sandbox could make: the set-id bits (if chmod let it), never a device.
    let setid_made = tried.contains("su=0\n");
    if setid_made {
        assert_eq!(entry_fields(&source, "su")[2], "4755", "{source}");
        assert_eq!(entry_fields(&source, "sg")[2], "2755", "{source}");
    } else {
        assert!(tried.contains("su=1\n"), "{tried}");
        assert_eq!(entry_fields(&source, "su")[2], "644", "{source}");
    }
    assert!(
        tried.contains("chr=1\n") && tried.contains("blk=1\n"),
        "{tried}"
    );
    assert!(
        !source
            .lines()
            .any(|l| matches!(l.split(' ').nth(1), Some("c" | "b"))),
        "{user:?}: a device was made: {source}"
    );
    assert_eq!(entry_fields(&source, "h1")[3], "2", "{source}");
    let snap = ok(&mut c, "sandbox.snapshot", json!({ "sandbox_id": sid })).await;
    let copy = from_snapshot(&mut c, snap["snapshot_id"].as_str().unwrap()).await;
    let restored = sh(&mut c, &copy, ENTRIES).await;
    let how = format!("{user:?} (set-id made: {setid_made}):\n{restored}");
    for name in ["su", "sg"] {
        assert_eq!(entry_fields(&restored, name)[1..3], ["f", "755"], "{how}");
    }
    assert_eq!(
        entry_fields(&restored, "sticky")[1..3],
        ["d", "1777"],
        "{how}"
    );
    assert_eq!(entry_fields(&restored, "out")[1], "l", "{how}");
    assert_eq!(entry_fields(&restored, "out")[5], "/etc/passwd", "{how}");
    assert_eq!(entry_fields(&restored, "up")[1], "l", "{how}");
    assert_eq!(
        entry_fields(&restored, "up")[5],
        "../../../../etc/shadow",
        "{how}"
    );
    let (h1, h2) = (entry_fields(&restored, "h1"), entry_fields(&restored, "h2"));
    assert_eq!(h1[1..4], h2[1..4], "{how}");
    assert_eq!(h1[3], "1", "{how}: a hard link came back");
    assert_ne!(h1[4], h2[4], "{how}: one inode");
    assert!(restored.ends_with("hardhard"), "{how}");
    // No device, FIFO or socket at all, and nothing the source did not have.
    let types: BTreeSet<&str> = restored
        .lines()
        .filter_map(|l| l.split(' ').nth(1))
        .collect();
    assert!(types.iter().all(|t| matches!(*t, "f" | "d" | "l")), "{how}");
    let names = |s: &str| -> BTreeSet<String> {
        s.lines()
            .filter_map(|l| l.split(' ').next())
            .map(str::to_string)
            .collect()
    };
    let mut expected = names(&source);
    expected.remove("fifo");
    assert_eq!(names(&restored), expected, "{how}");
    // Separate files: a write to one is not in the other.
    let split = sh(&mut c, &copy, "echo more >> /work/h1; cat /work/h2").await;
    assert_eq!(split, "hard", "{how}");
    // The host's files the links name are as they were.
    assert_eq!(
        [host_file("/etc/passwd"), host_file("/etc/shadow")],
        host,
        "{user:?}: the host's /etc changed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restored_snapshot_carries_no_setid_bit_device_or_link_out() {
    for user in IDENTITIES {
        restore_is_inert(user).await;
    }
}

// =============================================================================================
// 5. Another user cannot read the store.
// =============================================================================================

async fn store_is_closed(user: Option<&str>) {
    let other = if user.is_some() {
        "nobody"
    } else {
        "airlock-test"
    };
    let state = StateDir::new(user);
    let server = state.serve(user);
    let mut c = server.connect().await;
    let kept = stateful(&mut c).await;
    cell(&mut c, &kept, "secret = 'kept'").await;
    let snap = ok(&mut c, "sandbox.snapshot", json!({ "sandbox_id": kept })).await;
    let snap = snap["snapshot_id"].as_str().unwrap().to_string();
    let paused = stateful(&mut c).await;
    cell(&mut c, &paused, "secret = 'paused'").await;
    ok(&mut c, "sandbox.pause", json!({ "sandbox_id": paused })).await;
    let dir = &state.dir;
    let p = |rel: &str| dir.join(rel).to_str().unwrap().to_string();
    // The control: the other user can read a plain file beside the store.
    let beside = state.tmp.path().join("beside");
    std::fs::write(&beside, "x").unwrap();
    std::fs::set_permissions(&beside, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(as_user_succeeds(other, &["cat", beside.to_str().unwrap()]));
    let attempts: [Vec<String>; 7] = [
        vec!["cat".into(), p("key")],
        vec!["cat".into(), p(&format!("snapshots/{snap}"))],
        vec!["ls".into(), p("snapshots")],
        vec!["cat".into(), p(&format!("paused/{paused}.json"))],
        vec!["ls".into(), p("paused")],
        vec!["ls".into(), p("")],
        vec!["touch".into(), p("snapshots/planted")],
    ];
    for argv in &attempts {
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        assert!(
            !as_user_succeeds(other, &argv),
            "{user:?}: {other} could {argv:?}"
        );
    }
    // Every directory 0700 and every file 0600, all the server's.
    let uid = uid_of_user(user);
    let mut all = walk(dir);
    all.push(dir.clone());
    assert!(all.len() >= 7, "{all:?}");
    for path in all {
        let m = std::fs::symlink_metadata(&path).unwrap();
        let want = if m.is_dir() { 0o700 } else { 0o600 };
        assert!(m.is_dir() || m.is_file(), "{path:?}");
        assert_eq!(m.mode() & 0o7777, want, "{user:?}: {path:?}");
        assert_eq!(m.uid(), uid, "{user:?}: {path:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn another_user_cannot_read_the_store() {
    for user in IDENTITIES {
        store_is_closed(user).await;
    }
}

// =============================================================================================
// 6. A branch cannot see, signal or write its siblings or its parent.
// =============================================================================================

/// Every pid the cell sees in /proc, then SIGKILL to each but itself, to `others` (host pids
/// of the other kernels) and to -1; prints what it saw and what each kill did.
fn attack(others: &[i32]) -> String {
    format!(
        r#"
import os, json
seen = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
hit = []
for p in [p for p in seen if p != os.getpid()] + {others:?}:
    try:
        os.kill(p, 9)
        hit.append(p)
    except OSError:
        pass
try:
    os.kill(-1, 9)
    all_ = 'sent'
except OSError as e:
    all_ = e.errno
print(json.dumps({{'seen': seen, 'hit': hit, 'all': all_}}))
"#
    )
}

/// What each sandbox holds: `x` and /work/f.
async fn holds(c: &mut WsClient, sid: &str) -> String {
    cell(c, sid, "print(x, open('/work/f').read())").await
}

async fn branches_are_apart(user: Option<&str>, cow: bool) {
    let state = StateDir::new(user);
    let server = state.serve_cow(user, cow);
    let mut c = server.connect().await;
    let parent = stateful(&mut c).await;
    cell(
        &mut c,
        &parent,
        "x = 1\nopen('/work/f', 'w').write('parent')",
    )
    .await;
    let r = ok(
        &mut c,
        "sandbox.fork",
        json!({ "sandbox_id": parent, "count": 3 }),
    )
    .await;
    assert_eq!(r["sandbox_id"], parent.as_str(), "{r}");
    assert_eq!(r["copy_on_write"], cow, "{r}");
    let branches: Vec<String> = r["sandbox_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(branches.len(), 3, "{r}");
    let mut all = vec![parent.clone()];
    all.extend(branches.iter().cloned());
    assert_eq!(all.iter().collect::<BTreeSet<_>>().len(), 4, "{all:?}");
    // Each branch starts from the parent's state, then changes it its own way.
    for (i, b) in branches.iter().enumerate() {
        assert_eq!(holds(&mut c, b).await, "1 parent\n", "{b}");
        cell(
            &mut c,
            b,
            &format!("x = {}\nopen('/work/f', 'w').write('b{i}')", 100 + i),
        )
        .await;
    }
    let want: Vec<String> = std::iter::once("1 parent\n".to_string())
        .chain((0..3).map(|i| format!("{} b{i}\n", 100 + i)))
        .collect();
    // The kernels on the host: one per sandbox, each in namespaces of its own.
    let mut kernels = Vec::new();
    for sid in &all {
        let pid = kernel_pid(&mut c, server.pid(), sid).await;
        kernels.push((pid, start_time(pid).unwrap()));
    }
    for ns in NAMESPACES {
        let links: BTreeSet<String> = kernels.iter().map(|(p, _)| ns_of(*p, ns)).collect();
        assert_eq!(links.len(), 4, "{user:?}: {ns} shared: {links:?}");
        assert!(
            !links.contains(&ns_of(server.pid(), ns)),
            "{user:?}: the server's {ns}"
        );
    }
    for (i, b) in branches.iter().enumerate() {
        let me = kernels[i + 1].0;
        let others: Vec<i32> = kernels
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| *p != me)
            .collect();
        // What the branch may see: exactly its own pid namespace's processes.
        let mine: BTreeSet<i32> = in_pidns(server.pid(), &ns_of(me, "pid"))
            .into_iter()
            .filter_map(|p| nspid(p).last().copied())
            .collect();
        let out: Value = serde_json::from_str(&cell(&mut c, b, &attack(&others)).await).unwrap();
        let seen: BTreeSet<i32> = out["seen"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| i32::try_from(v.as_i64().unwrap()).unwrap())
            .collect();
        assert!(
            seen.is_subset(&mine) && seen.contains(&1),
            "{user:?}: {b} saw {seen:?}, has {mine:?}"
        );
        let hit = out["hit"].as_array().unwrap();
        let hit_other = hit
            .iter()
            .any(|p| others.contains(&i32::try_from(p.as_i64().unwrap()).unwrap()));
        assert!(!hit_other, "{user:?}: {b} signalled another kernel: {out}");
    }
    // Every kernel lives on (the same process) and holds its own state, no other's.
    let gone: Vec<_> = kernels
        .iter()
        .filter(|(p, t)| start_time(*p) != Some(*t))
        .collect();
    assert!(gone.is_empty(), "{user:?}: killed: {gone:?} of {kernels:?}");
    for (sid, want) in all.iter().zip(&want) {
        assert_eq!(&holds(&mut c, sid).await, want, "{user:?}: {sid}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_branch_cannot_see_signal_or_write_its_siblings_or_parent() {
    for user in IDENTITIES {
        branches_are_apart(user, false).await;
    }
}

/// The same attacks on a copy-on-write fork (`--fork-copy-on-write`): each branch a clone of
/// the live kernel, finished from outside.
#[tokio::test(flavor = "multi_thread")]
async fn a_copy_on_write_branch_cannot_see_signal_or_write_its_siblings_or_parent() {
    for user in IDENTITIES {
        branches_are_apart(user, true).await;
    }
}

// =============================================================================================
// 7. A branch attests like a fresh sandbox.
// =============================================================================================

/// One JSON line of what a kernel sees of itself (after `zygote_sessions.rs`'s probe): status
/// (caps, no_new_privs, seccomp, ids), namespaces, mounts with their ids out, rlimits, umask,
/// fds, environment, cgroup, and what Landlock lets it write and list.
const PROBE: &str = r#"
import os, sys, json, re, resource, errno
def attempt(f):
    try:
        f()
        return 'ok'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def write(path):
    def f():
        with open(path, 'w') as fh:
            fh.write('x')
    return f
status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())
keep = ['NoNewPrivs', 'Seccomp', 'Seccomp_filters', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd',
        'CapAmb', 'Uid', 'Gid', 'Groups', 'Umask', 'SigBlk', 'SigIgn', 'NSpid', 'NSpgid',
        'NSsid', 'Cpus_allowed_list', 'Mems_allowed_list', 'Speculation_Store_Bypass']
out = {'status': {k: status.get(k, '').strip() for k in keep}}
out['ns'] = {n: os.readlink('/proc/self/ns/' + n) for n in sorted(os.listdir('/proc/self/ns'))}
out['maps'] = [open('/proc/self/' + m).read().split() for m in ('uid_map', 'gid_map')]
out['setgroups'] = open('/proc/self/setgroups').read()
out['interfaces'] = sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').read().splitlines()[2:])
out['pid'] = os.getpid()
out['procs'] = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
out['rlimits'] = {n: resource.getrlimit(getattr(resource, n)) for n in sorted(dir(resource)) if n.startswith('RLIMIT_')}
old = os.umask(0o77); os.umask(old); out['umask'] = old
out['resuid'] = os.getresuid(); out['resgid'] = os.getresgid(); out['groups'] = sorted(os.getgroups())
out['cwd'] = os.getcwd()
def link(fd):
    try:
        return re.sub(r'\[\d+\]', '[N]', os.readlink('/proc/self/fd/' + fd))
    except OSError:
        return None
out['fds'] = {fd: link(fd) for fd in sorted(os.listdir('/proc/self/fd'), key=int)}
out['fds'] = {k: v for k, v in out['fds'].items() if v is not None}
def mount(line):
    f = line.split(' ')
    sep = f.index('-')
    dev = re.sub(r'^0:\d+$', '0:N', f[2])
    opts = re.sub(r'\b(uid|gid)=\d+', r'\1=H', ' '.join(f[sep + 1:]))
    return ' '.join([dev] + f[3:sep]) + ' - ' + opts
out['mounts'] = [mount(l) for l in open('/proc/self/mountinfo').read().splitlines()]
out['environ'] = dict(os.environ)
out['hostname'] = os.uname().nodename
out['oom_score_adj'] = open('/proc/self/oom_score_adj').read().strip()
out['cgroup_inside'] = open('/proc/self/cgroup').read()
out['landlock'] = {p: attempt(write(p)) for p in ['/work/w', '/tmp/w', '/dev/shm/w', '/w', '/etc/w', '/usr/w', '/proc/w', '/dev/w']}
out['mkdir'] = {p: attempt(lambda p=p: os.mkdir(p)) for p in ['/work/d', '/d', '/usr/d', '/etc/d']}
out['listdir'] = {p: attempt(lambda p=p: os.listdir(p)) for p in ['/', '/dev', '/root', '/etc', '/work']}
out['fork'] = attempt(lambda: os._exit(0) if os.fork() == 0 else os.wait())
out['work'] = sorted(os.listdir('/work'))
out['flags'] = str(sys.flags)
out['path'] = sys.path
print(json.dumps(out, sort_keys=True))
"#;

/// The probe's view and the host's view of one sandbox's kernel.
async fn attest(
    c: &mut WsClient,
    server: i32,
    sid: &str,
) -> (Value, BTreeMap<&'static str, String>) {
    let seen: Value = serde_json::from_str(&cell(c, sid, PROBE).await).unwrap();
    let pid = kernel_pid(c, server, sid).await;
    let mut host: BTreeMap<&'static str, String> =
        NAMESPACES.iter().map(|n| (*n, ns_of(pid, n))).collect();
    host.insert("uid", uid_of(pid).unwrap().to_string());
    let owner = std::fs::metadata(format!("/proc/{pid}")).unwrap().uid();
    host.insert("dumpable", (owner.to_string() == host["uid"]).to_string());
    host.insert(
        "cgroups",
        std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap(),
    );
    (seen, host)
}

/// A copy-on-write branch's mount table without what lies beneath its own `/work`, `/tmp`,
/// `/dev/shm` and `/proc`: its parent's, sealed read-only (and its parent's procfs), reached
/// by no path (docs/threat-model.md, "What a copy-on-write branch shares"). Exactly those
/// four must be there.
fn without_hidden(mounts: &Value) -> Vec<String> {
    let mut left: Vec<String> = mounts
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_owned())
        .collect();
    let sealed = |m: &String| {
        let f: Vec<&str> = m.split(' ').collect();
        matches!(f[2], "/work" | "/tmp" | "/dev/shm") && f[3].starts_with("ro,")
    };
    let before = left.len();
    left.retain(|m| !sealed(m));
    let first_proc = left
        .iter()
        .position(|m| m.split(' ').nth(2) == Some("/proc"));
    left.remove(first_proc.expect("the branch's /proc"));
    assert_eq!(before - left.len(), 4, "{mounts}");
    left
}

async fn branch_attests_fresh(user: Option<&str>, cow: bool) {
    let state = StateDir::new(user);
    let server = state.serve_cow(user, cow);
    let mut c = server.connect().await;
    let parent = stateful(&mut c).await;
    cell(&mut c, &parent, "x = 1").await;
    let r = ok(
        &mut c,
        "sandbox.fork",
        json!({ "sandbox_id": parent, "count": 1 }),
    )
    .await;
    let branch = r["sandbox_ids"][0].as_str().unwrap().to_string();
    let fresh = stateful(&mut c).await;
    let (b_seen, b_host) = attest(&mut c, server.pid(), &branch).await;
    let (f_seen, f_host) = attest(&mut c, server.pid(), &fresh).await;
    let (_, p_host) = attest(&mut c, server.pid(), &parent).await;
    assert_eq!(
        cell(&mut c, &branch, "print(x)").await,
        "1\n",
        "the branch's state"
    );
    // What differs per sandbox, as properties: namespaces of its own, none the server's, the
    // probe's view of them the host's; an identity of its own under a root server.
    let server_ns: BTreeMap<&str, String> = NAMESPACES
        .iter()
        .map(|n| (*n, ns_of(server.pid(), n)))
        .collect();
    for ns in NAMESPACES {
        let (b, f, p) = (&b_host[ns], &f_host[ns], &p_host[ns]);
        assert!(
            b != f && b != p && f != p,
            "{user:?}: {ns} shared: {b} {f} {p}"
        );
        assert!(
            b != &server_ns[ns] && f != &server_ns[ns],
            "{user:?}: the server's {ns}"
        );
        assert_eq!(&b_seen["ns"][ns], b, "{user:?}: {ns} inside and out");
        assert_eq!(&f_seen["ns"][ns], f, "{user:?}: {ns} inside and out");
    }
    let server_uid = uid_of(server.pid()).unwrap().to_string();
    if user.is_none() && cow {
        // A clone keeps its kernel's credentials: a copy-on-write branch has its parent's
        // host uid (docs/threat-model.md, "What a copy-on-write branch shares").
        assert_eq!(b_host["uid"], p_host["uid"]);
        assert_ne!(b_host["uid"], f_host["uid"]);
        assert!(![&f_host["uid"], &p_host["uid"]].contains(&&server_uid));
    } else if user.is_none() {
        let uids: BTreeSet<&String> = [&b_host["uid"], &f_host["uid"], &p_host["uid"]].into();
        assert_eq!(uids.len(), 3, "each sandbox its own host uid: {uids:?}");
        assert!(!uids.contains(&server_uid));
    } else {
        assert_eq!((&b_host["uid"], &f_host["uid"]), (&server_uid, &server_uid));
    }
    assert_eq!(
        b_host["dumpable"], f_host["dumpable"],
        "{user:?}: /proc ownership"
    );
    // The same cgroup controllers, each in a directory not the server's in both or neither.
    let server_cg = std::fs::read_to_string(format!("/proc/{}/cgroup", server.pid())).unwrap();
    let shape = |cg: &str| -> Vec<(String, bool)> {
        cg.lines()
            .map(|l| {
                let (pre, path) = l.rsplit_once(':').unwrap();
                (
                    pre.to_string(),
                    server_cg.lines().any(|s| s.ends_with(&format!(":{path}"))),
                )
            })
            .collect()
    };
    assert_eq!(
        shape(&b_host["cgroups"]),
        shape(&f_host["cgroups"]),
        "{user:?}: cgroups"
    );
    // Everything else, field by field, once the per-sandbox ids are out (the maps' outer id
    // is the kernel's host uid).
    // A copy-on-write branch's user namespace is nested in its parent's: its maps name the
    // parent's 1000, which is the host uid.
    let strip = |mut v: Value, outer: &str| {
        let o = v.as_object_mut().unwrap();
        o.remove("ns");
        o.remove("cgroup_inside");
        for map in o["maps"].as_array_mut().unwrap() {
            assert_eq!(map[1].as_str(), Some(outer), "{user:?}: {map}");
            map[1] = json!("H");
        }
        v
    };
    let branch_outer = if cow { "1000" } else { b_host["uid"].as_str() };
    let (mut b, f) = (
        strip(b_seen, branch_outer),
        strip(f_seen, f_host["uid"].as_str()),
    );
    if cow {
        b["mounts"] = json!(without_hidden(&b["mounts"]));
    }
    // And what the attestation demands, so that the two are not equal in a weaker way.
    let st = &b["status"];
    assert_eq!(
        (&st["NoNewPrivs"], &st["Seccomp"]),
        (&json!("1"), &json!("2")),
        "{b}"
    );
    assert_eq!(st["CapEff"], "0000000000000000", "{b}");
    assert_eq!(b["interfaces"], json!(["lo"]), "{b}");
    // Landlock: the root directory is read-only to the mount too, and unlistable only by it
    // (a forkable kernel's domain grants reading beneath its root: its mount layout decides).
    let listing = if cow { "ok" } else { "EACCES" };
    assert_eq!(b["listdir"]["/"], listing, "{b}");
    assert_eq!(b["landlock"]["/work/w"], "ok", "{b}");
    let keys: BTreeSet<&String> = b
        .as_object()
        .unwrap()
        .keys()
        .chain(f.as_object().unwrap().keys())
        .collect();
    let differing: Vec<String> = keys
        .into_iter()
        .filter(|k| b.get(k.as_str()) != f.get(k.as_str()))
        .map(|k| {
            format!(
                "{k}:\n  branch {}\n  fresh  {}",
                b[k.as_str()],
                f[k.as_str()]
            )
        })
        .collect();
    assert!(
        differing.is_empty(),
        "{user:?}: a branch differs from a fresh sandbox:\n{}",
        differing.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_branch_attests_like_a_fresh_sandbox() {
    for user in IDENTITIES {
        branch_attests_fresh(user, false).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_copy_on_write_branch_attests_like_a_fresh_sandbox() {
    for user in IDENTITIES {
        branch_attests_fresh(user, true).await;
    }
}

// =============================================================================================
// 8. An idle sandbox pauses (its processes gone) and a call resumes it.
// =============================================================================================

/// A unique argument for `sleep`, so that the host can find the process.
fn marker() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("2718.28{:05}{nanos:09}", std::process::id() % 100_000)
}

/// Host pids whose command line carries `marker`.
fn marked(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_pause_pauses_and_a_call_resumes() {
    let state = StateDir::new(None);
    let server = state.serve(None);
    let mut c = server.connect().await;
    let requires = [REQUIRES.as_slice(), &["processes"]].concat();
    let sid = sandbox(
        &mut c,
        json!({ "stateful": true, "idle_timeout_s": 1, "idle_action": "pause",
                "requires": requires }),
    )
    .await;
    cell(
        &mut c,
        &sid,
        "x = 'kept'\nopen('/work/f', 'w').write('file')",
    )
    .await;
    let mark = marker();
    ok(
        &mut c,
        "process.start",
        json!({ "sandbox_id": sid, "argv": ["sleep", mark] }),
    )
    .await;
    let end = Instant::now() + Duration::from_secs(10);
    while marked(&mark).is_empty() {
        assert!(Instant::now() < end, "the sleep never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!descendants(server.pid()).is_empty());
    // Idle past its timeout: paused, and nothing of it runs.
    let end = Instant::now() + Duration::from_secs(15);
    loop {
        let states = listed_states(&mut c).await;
        if states.get(&sid).map(String::as_str) == Some("paused") {
            break;
        }
        assert!(Instant::now() < end, "not paused: {states:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(marked(&mark).is_empty(), "the sleep outlived the pause");
    let left = settle(server.pid(), Duration::from_secs(5));
    assert!(left.is_empty(), "processes of the paused sandbox: {left:?}");
    assert_eq!(state.paused_files(), [format!("{sid}.json")]);
    // A call on its id makes it again, its state with it (the background process is not).
    assert_eq!(
        cell(&mut c, &sid, "print(x, open('/work/f').read())").await,
        "kept file\n"
    );
    assert_eq!(
        listed_states(&mut c).await.get(&sid).map(String::as_str),
        Some("idle")
    );
    assert!(marked(&mark).is_empty());
}

// =============================================================================================
// 9. Snapshot, pause and fork need the `snapshot` capability.
// =============================================================================================

#[tokio::test(flavor = "multi_thread")]
async fn pause_needs_the_snapshot_capability() {
    let state = StateDir::new(None);
    let server = state.serve(None);
    let mut c = server.connect().await;
    let spec = json!({ "stateful": true, "requires": ["run_code", "exec"] });
    let r = ok(&mut c, "sandbox.create", json!({ "spec": spec })).await;
    let sid = r["sandbox_id"].as_str().unwrap().to_string();
    cell(&mut c, &sid, "x = 5").await;
    for (method, params) in [
        ("sandbox.snapshot", json!({ "sandbox_id": sid })),
        ("sandbox.pause", json!({ "sandbox_id": sid })),
        ("sandbox.fork", json!({ "sandbox_id": sid, "count": 1 })),
    ] {
        let r = c.call(method, params).await;
        assert_eq!(error_code(&r), REFUSED, "{method}: {r}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains("snapshot"),
            "{r}"
        );
    }
    // Nothing was written, nothing made, and the sandbox runs on, its state intact.
    assert!(state.snapshot_files().is_empty() && state.paused_files().is_empty());
    let states = listed_states(&mut c).await;
    assert_eq!(states.keys().collect::<Vec<_>>(), [&sid], "{states:?}");
    assert_eq!(cell(&mut c, &sid, "print(x)").await, "5\n");
    // idle_action pause without it is not a valid spec.
    let spec = json!({ "stateful": true, "idle_action": "pause", "requires": ["run_code"] });
    let r = c.call("sandbox.create", json!({ "spec": spec })).await;
    assert_eq!(error_code(&r), INVALID_PARAMS, "{r}");
    assert_eq!(listed_states(&mut c).await.len(), 1);
}

/// A create under the key of a paused sandbox resumes that sandbox (same id, its state and its
/// idle timeout as set), rather than making a second one the paused one could never come back
/// beside.
#[tokio::test(flavor = "multi_thread")]
async fn a_create_under_a_paused_key_resumes_it() {
    let state = StateDir::new(None);
    let server = state.serve(None);
    let mut c = server.connect().await;
    let key = json!({"scope": "tenant", "thread_id": "conv-paused"});
    let params = json!({"spec": {"stateful": true, "requires": REQUIRES}, "key": key});
    let sid = ok(&mut c, "sandbox.create", params.clone()).await["sandbox_id"]
        .as_str()
        .unwrap()
        .to_owned();
    cell(&mut c, &sid, "x = 7").await;
    let set = json!({"sandbox_id": sid, "idle_timeout_s": 77});
    ok(&mut c, "sandbox.set_timeout", set).await;
    ok(&mut c, "sandbox.pause", json!({ "sandbox_id": sid })).await;
    let again = ok(&mut c, "sandbox.create", params).await;
    assert_eq!(again["sandbox_id"], sid.as_str(), "{again}");
    assert_eq!(again["idle_timeout_s"], 77.0, "{again}");
    assert_eq!(cell(&mut c, &sid, "print(x)").await.trim(), "7");
    let states = listed_states(&mut c).await;
    assert_eq!(states.len(), 1, "{states:?}");
}

/// A client cannot fill the host's disk through snapshots: past `--max-state-mb` a snapshot,
/// a pause and a fork are refused `over_capacity` and nothing more is written; removing a
/// snapshot makes room again.
#[tokio::test(flavor = "multi_thread")]
async fn the_store_refuses_snapshots_past_its_maximum() {
    let _shmem = SHMEM.lock().await;
    const OVER_CAPACITY: i64 = -32018;
    let state = StateDir::new(None);
    let dir = state.dir.to_str().unwrap().to_owned();
    let server = WsServer::start(&["--state-dir", &dir, "--max-state-mb", "1"]);
    let mut c = server.connect().await;
    let sid = sandbox(&mut c, json!({})).await;
    // 2 MiB of random bytes: the first snapshot takes the store past its 1 MiB.
    sh(&mut c, &sid, "head -c 2097152 /dev/urandom > /work/r").await;
    let first = ok(&mut c, "sandbox.snapshot", json!({ "sandbox_id": sid })).await;
    let stored = state.snapshot_files();
    assert_eq!(stored.len(), 1, "{stored:?}");
    sh(&mut c, &sid, "head -c 2097152 /dev/urandom > /work/s").await;
    for method in ["sandbox.snapshot", "sandbox.pause"] {
        let r = c.call(method, json!({ "sandbox_id": sid })).await;
        assert_eq!(error_code(&r), OVER_CAPACITY, "{method}: {r}");
        assert!(r.to_string().contains("--max-state-mb"), "{r}");
    }
    let r = c
        .call("sandbox.fork", json!({ "sandbox_id": sid, "count": 2 }))
        .await;
    assert_eq!(error_code(&r), OVER_CAPACITY, "{r}");
    assert_eq!(state.snapshot_files(), stored, "something was written");
    // The sandbox is still live and unpaused; removing the snapshot makes room.
    assert_eq!(
        listed_states(&mut c).await.get(&sid).map(String::as_str),
        Some("idle")
    );
    let id = first["snapshot_id"].clone();
    ok(&mut c, "snapshot.remove", json!({ "snapshot_id": id })).await;
    ok(&mut c, "sandbox.snapshot", json!({ "sandbox_id": sid })).await;
}

/// A kernel that replaces its own `save` with one streaming 400 MB of random bytes.
const EVIL_SAVE: &str = r#"
import gc, os
save = next(f for f in gc.get_objects() if getattr(f, '__name__', '') == '_save' and callable(f))
Writer = save.__globals__['_ChunkWriter']
def flood(scope):
    out = Writer()
    for _ in range(400):
        out.write(os.urandom(1 << 20))
    out.close()
    return {"bytes": out.total, "saved": [], "not_saved": {}}
save.__globals__['_save'] = flood
"#;

/// A hostile kernel's state, as large as its bound allows, never sits in the server's memory.
/// Pickled (the kernel holds a file open, so it cannot be imaged): spooled to an unnamed file
/// while it arrives and while a restored sandbox waits for its first cell; the kernel replaces
/// its own `save` with one that streams 400 MB of random bytes. Imaged: the kernel holds 400 MB
/// of random bytes, read from its memory into the store and from the store into each branch a
/// megabyte at a time. Each snapshot and fork of 2 leaves the server's peak RSS within 100 MiB
/// of where it was.
#[tokio::test(flavor = "multi_thread")]
async fn a_huge_kernel_state_never_sits_in_the_servers_memory() {
    huge_state(&format!("{EVIL_SAVE}\n_held = open('/dev/null')"), "pickle").await;
    huge_state(
        "import os\nheld = [os.urandom(1 << 20) for _ in range(400)]",
        "image",
    )
    .await;
}

async fn huge_state(setup: &str, carried: &str) {
    use super::support::session_probes::peak_rss_kib;

    let state = StateDir::new(None);
    let dir = state.dir.to_str().unwrap().to_owned();
    // The sandbox's limit is far above the 400 MiB it holds: what is measured here is the
    // server's memory (a restored kernel's own is `serve::images`'s to attack).
    let server = WsServer::start(&["--state-dir", &dir, "--memory", "1024"]);
    let mut c = server.connect().await;
    let sid = sandbox(
        &mut c,
        json!({ "stateful": true, "limits": {"memory_mb": 1024} }),
    )
    .await;
    cell(&mut c, &sid, setup).await;
    let before = peak_rss_kib(server.pid());
    let snap = ok(&mut c, "sandbox.snapshot", json!({ "sandbox_id": sid })).await;
    assert_eq!(snap["kernel"]["carried"], carried, "{snap}");
    assert!(
        snap["kernel"]["bytes"].as_u64().unwrap() >= 400 << 20,
        "{snap}"
    );
    let forked = ok(
        &mut c,
        "sandbox.fork",
        json!({ "sandbox_id": sid, "count": 2 }),
    )
    .await;
    assert_eq!(
        forked["sandbox_ids"].as_array().unwrap().len(),
        2,
        "{forked}"
    );
    let grew = peak_rss_kib(server.pid()).saturating_sub(before);
    assert!(
        grew < 100 << 10,
        "{carried}: the server's peak RSS grew {} MiB",
        grew >> 10
    );
    let ids = forked["sandbox_ids"].as_array().unwrap();
    let probe = "print(len(held) if 'held' in globals() else 'pickled')";
    let want = if carried == "image" {
        "400\n"
    } else {
        "pickled\n"
    };
    assert_eq!(cell(&mut c, ids[0].as_str().unwrap(), probe).await, want);
}
