//! The session methods (`sandbox.*`, `files.*`, `scope.dispose`, `run.cancel`) held to
//! `docs/server.md` ("Sandboxes that persist") and `docs/protocol.md`: persistence without
//! surviving processes, chunked transfers, links and special files, capability gates, keys,
//! busy/concurrency, streaming, cancellation, dropped connections, idle reclaim, capacity,
//! malformed params and shutdown. Everything is asserted by external evidence (responses, the
//! host's /proc, the host's files, the audit log); the attacks run as root and as `airlock-test`.
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use super::support::*;

const NOT_FOUND: i64 = -32016;
const FILE_REFUSED: i64 = -32017;
const INVALID_PARAMS: i64 = -32602;
const INVALID: i64 = -32602;
const REFUSED: i64 = -32007;
const BUSY: i64 = -32006;
const OVER_CAPACITY: i64 = -32018;
const CHUNK: usize = 512 * 1024;

/// The identities the security tests run the server as.
const IDENTITIES: [Option<&str>; 2] = [None, Some("airlock-test")];

async fn write(c: &mut WsClient, sid: &str, path: &str, bytes: &[u8]) -> Value {
    c.call(
        "files.write",
        json!({"sandbox_id": sid, "path": path, "data": b64(bytes)}),
    )
    .await
}

/// A run's result (asserted to be a result, not an error).
async fn run_code(c: &mut WsClient, sid: &str, code: &str) -> Value {
    let r = c
        .call("sandbox.run_code", json!({"sandbox_id": sid, "code": code}))
        .await;
    result_of(&r).clone()
}

pub(super) async fn exec(c: &mut WsClient, sid: &str, script: &str) -> Value {
    let argv = json!(["/bin/sh", "-c", script]);
    let r = c
        .call("sandbox.exec", json!({"sandbox_id": sid, "argv": argv}))
        .await;
    result_of(&r).clone()
}

/// A stat or listed entry without the members issue 40 added (`mode`, `permissions`,
/// `modified_ms`, whose values these tests do not fix; `serve::dirs` checks them).
fn first_members(v: &Value) -> Value {
    let mut v = v.clone();
    if let Value::Object(o) = &mut v {
        for k in ["mode", "permissions", "modified_ms"] {
            o.remove(k);
        }
    }
    v
}

/// A whole file, read in chunks of at most 512 KiB.
async fn read_chunked(c: &mut WsClient, sid: &str, path: &str) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let p = json!({"sandbox_id": sid, "path": path, "offset": out.len(), "length": CHUNK});
        let r = c.call("files.read", p).await;
        let r = result_of(&r);
        assert_eq!(r["offset"], out.len(), "{r}");
        let data = unb64(&r["data"]);
        assert!(data.len() <= CHUNK);
        out.extend_from_slice(&data);
        let eof = r["eof"].as_bool().unwrap();
        assert_eq!(eof, out.len() as u64 == r["size"].as_u64().unwrap(), "{r}");
        if eof {
            return out;
        }
    }
}

/// The first `output` notification of a `stream: true` run: its run id.
async fn started(c: &mut WsClient) -> String {
    loop {
        let m = c.recv().await.expect("closed before the run started");
        if m["method"] == "output" {
            return m["params"]["run_id"].as_str().unwrap().to_string();
        }
        c.stash.push(m);
    }
}

/// Start a run that prints `started` then sleeps; returns (request id, run id).
async fn start_sleeper(c: &mut WsClient, sid: &str) -> (i64, String) {
    let code = "import time\nprint('started', flush=True)\ntime.sleep(60)\nprint('never')";
    let id = c
        .request(
            "sandbox.run_code",
            json!({"sandbox_id": sid, "code": code, "stream": true}),
        )
        .await;
    (id, started(c).await)
}

// ---- the main flow: persistence, no surviving process, the file methods, dispose ----

const RUN_1: &str = "\
import threading, time
text = open('in.txt').read()
open('out.txt', 'w').write(text.upper())
def late():
    time.sleep(1.5)
    open('late-thread.txt', 'w').write('x')
threading.Thread(target=late, daemon=True).start()
print('run1', len(text))
";

const RUN_2: &str = "\
import os
pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
print('pids', pids, os.getpid())
print(open('out.txt').read(), end='')
print('late', os.path.exists('late-thread.txt'), os.path.exists('late-child.txt'))
";

#[tokio::test(flavor = "multi_thread")]
async fn ws_session_flow_persists_files_but_no_process() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let r = c.call("sandbox.create", json!({"spec": {}})).await;
    let d = result_of(&r).clone();
    let sid = d["sandbox_id"].as_str().unwrap().to_string();
    assert_eq!(d["work_dir"], "/work");
    assert_eq!(d["egress"], "closed");
    assert_eq!(d["isolation_scope"], "conversation");
    assert_eq!(d["idle_timeout_s"], 600.0);
    let mut req: Vec<&str> = d["requires"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    req.sort_unstable();
    // Default: all but host_tools.
    let want = [
        "exec",
        "files_delete",
        "files_in",
        "files_list",
        "files_out",
        "run_code",
    ];
    assert_eq!(req, want, "{d}");

    let w = write(&mut c, &sid, "in.txt", b"hello persistent world\n").await;
    // What `files.stat` says of it (issue 40 added its mode, permissions and modified time).
    let mut stat = json!({"path": "in.txt", "exists": true, "size": 23, "is_dir": false, "kind": "file",
               "mode": 0o600, "permissions": "rw-------"});
    let modified = result_of(&w)["modified_ms"].as_u64().expect("modified_ms");
    stat["modified_ms"] = json!(modified);
    assert_eq!(result_of(&w), &stat);
    let r1 = run_code(&mut c, &sid, RUN_1).await;
    assert_eq!(r1["status"], "completed", "{r1}");
    assert_eq!(r1["stdout"], "run1 23\n");
    assert_eq!(r1["sandbox_id"], sid.as_str());
    assert!(r1["run_id"].is_string());
    // A command's background child outlives its shell only until the run ends.
    let bg = "(sleep 1.5; echo late > late-child.txt) & echo started";
    let e = exec(&mut c, &sid, bg).await;
    assert_eq!(e["stdout"], "started\n", "{e}");
    assert_eq!(
        settle(server.pid(), Duration::from_secs(5)),
        Vec::<i32>::new(),
        "a process of the sandbox survived its run"
    );
    let r = c
        .call("files.read", json!({"sandbox_id": sid, "path": "out.txt"}))
        .await;
    let r = result_of(&r);
    assert_eq!(unb64(&r["data"]), b"HELLO PERSISTENT WORLD\n");
    assert_eq!(
        (&r["size"], &r["eof"], &r["offset"]),
        (&json!(23), &json!(true), &json!(0))
    );

    tokio::time::sleep(Duration::from_secs(2)).await;
    let r2 = run_code(&mut c, &sid, RUN_2).await;
    assert_eq!(
        r2["stdout"], "pids [1] 1\nHELLO PERSISTENT WORLD\nlate False False\n",
        "{r2}"
    );
    file_methods(&mut c, &sid).await;

    let r = c.call("sandbox.dispose", json!({"sandbox_id": sid})).await;
    assert_eq!(result_of(&r), &json!({"sandbox_id": sid, "disposal": null}));
    let after = [
        ("sandbox.connect", json!({"sandbox_id": sid})),
        ("sandbox.dispose", json!({"sandbox_id": sid})),
        ("sandbox.run_code", json!({"sandbox_id": sid, "code": "1"})),
        (
            "sandbox.exec",
            json!({"sandbox_id": sid, "argv": ["/bin/true"]}),
        ),
        ("files.read", json!({"sandbox_id": sid, "path": "in.txt"})),
        (
            "files.write",
            json!({"sandbox_id": sid, "path": "a", "data": ""}),
        ),
        ("files.list", json!({"sandbox_id": sid})),
        ("files.stat", json!({"sandbox_id": sid, "path": "in.txt"})),
        ("files.remove", json!({"sandbox_id": sid, "path": "in.txt"})),
    ];
    for (method, params) in after {
        let r = c.call(method, params).await;
        assert_eq!(error_code(&r), NOT_FOUND, "{method}: {r}");
    }
    assert!(settle(server.pid(), Duration::from_secs(5)).is_empty());
}

/// list, stat, remove, nested writes; a missing file is `not_found` (protocol.md).
async fn file_methods(c: &mut WsClient, sid: &str) {
    let w = write(c, sid, "sub/deep/x.txt", b"nested").await;
    assert_eq!(result_of(&w)["size"], 6, "missing parents are created: {w}");
    let l = c.call("files.list", json!({"sandbox_id": sid})).await;
    let names: Vec<(&str, bool)> = result_of(&l)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["is_dir"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        names,
        [("in.txt", false), ("out.txt", false), ("sub", true)],
        "{l}"
    );
    let l = c
        .call("files.list", json!({"sandbox_id": sid, "path": "sub/deep"}))
        .await;
    assert_eq!(
        first_members(&result_of(&l)["entries"][0]),
        json!({"name": "x.txt", "size": 6, "is_dir": false, "kind": "file"})
    );
    let st = |p: &str| json!({"sandbox_id": sid, "path": p});
    let s = c.call("files.stat", st("out.txt")).await;
    let want =
        json!({"path": "out.txt", "exists": true, "size": 23, "is_dir": false, "kind": "file"});
    assert_eq!(first_members(result_of(&s)), want);
    let s = c.call("files.stat", st("sub")).await;
    assert_eq!(result_of(&s)["is_dir"], true, "{s}");
    assert_eq!(result_of(&s)["kind"], "dir", "{s}");
    let s = c.call("files.stat", st("nope")).await;
    let want = json!({"path": "nope", "exists": false, "size": null, "is_dir": false, "kind": null,
                      "mode": null, "permissions": null, "modified_ms": null});
    assert_eq!(result_of(&s), &want);
    let r = c.call("files.remove", st("out.txt")).await;
    assert_eq!(result_of(&r), &json!({"path": "out.txt"}));
    let s = c.call("files.stat", st("out.txt")).await;
    assert_eq!(result_of(&s)["exists"], false, "{s}");
    let r = c.call("files.remove", st("out.txt")).await;
    assert_eq!(
        result_of(&r),
        &json!({"path": "out.txt"}),
        "missing is success"
    );
    let r = c.call("files.read", st("out.txt")).await;
    assert_eq!(error_code(&r), NOT_FOUND, "no such file: {r}");
    let r = run_code(c, sid, "import os\nprint(sorted(os.listdir('.')))").await;
    assert_eq!(r["stdout"], "['in.txt', 'sub']\n", "{r}");
}

#[test]
fn stdio_session_flow() {
    let mut s = StdioServer::start(&[]);
    let (r, _) = s.call(1, "sandbox.create", json!({"spec": {}}));
    let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_string();
    let data = b64(b"hello persistent world\n");
    let (w, _) = s.call(
        2,
        "files.write",
        json!({"sandbox_id": sid, "path": "in.txt", "data": data}),
    );
    assert_eq!(result_of(&w)["size"], 23);
    let (r1, _) = s.call(
        3,
        "sandbox.run_code",
        json!({"sandbox_id": sid, "code": RUN_1}),
    );
    assert_eq!(result_of(&r1)["stdout"], "run1 23\n", "{r1}");
    let (r, _) = s.call(
        4,
        "files.read",
        json!({"sandbox_id": sid, "path": "out.txt"}),
    );
    assert_eq!(unb64(&result_of(&r)["data"]), b"HELLO PERSISTENT WORLD\n");
    std::thread::sleep(Duration::from_secs(2));
    let (r2, notes) = s.call(
        5,
        "sandbox.run_code",
        json!({"sandbox_id": sid, "code": RUN_2, "stream": true}),
    );
    let r2 = result_of(&r2);
    let want = "pids [1] 1\nHELLO PERSISTENT WORLD\nlate False False\n";
    assert_eq!(r2["stdout"], want, "{r2}");
    let run_id = r2["run_id"].as_str().unwrap();
    assert_eq!(output_text(&notes, run_id, "stdout"), want, "{notes:?}");
    let (l, _) = s.call(6, "files.list", json!({"sandbox_id": sid}));
    assert_eq!(result_of(&l)["entries"].as_array().unwrap().len(), 2, "{l}");
    let (st, _) = s.call(
        7,
        "files.stat",
        json!({"sandbox_id": sid, "path": "in.txt"}),
    );
    assert_eq!(result_of(&st)["size"], 23);
    let (rm, _) = s.call(
        8,
        "files.remove",
        json!({"sandbox_id": sid, "path": "in.txt"}),
    );
    assert_eq!(result_of(&rm)["path"], "in.txt");
    let (d, _) = s.call(9, "sandbox.dispose", json!({"sandbox_id": sid}));
    assert_eq!(result_of(&d)["disposal"], Value::Null);
    let (gone, _) = s.call(10, "sandbox.connect", json!({"sandbox_id": sid}));
    assert_eq!(error_code(&gone), NOT_FOUND);
    s.close_stdin();
    let status = wait_bounded(&mut s.child, Duration::from_secs(20)).expect("no exit at EOF");
    assert!(status.success(), "{status:?}");
}

// ---- chunked transfers and their refusals ----

fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| u8::try_from((i * 7 + i / 4099) % 256).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn files_move_3_mib_in_chunks_both_ways_byte_exact() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let sid = create(&mut c, json!({"spec": {}})).await;
    let big = pattern(3 << 20);
    for (i, chunk) in big.chunks(CHUNK).enumerate() {
        let p = json!({"sandbox_id": sid, "path": "big.bin", "data": b64(chunk),
                       "offset": i * CHUNK});
        let r = c.call("files.write", p).await;
        assert_eq!(result_of(&r)["size"], (i + 1) * CHUNK, "{r}");
    }
    // The guest sees exactly those bytes; it copies them and makes a file of its own.
    let code = "import shutil\nb = open('big.bin', 'rb').read()\nprint(len(b))\n\
                shutil.copy('big.bin', 'back.bin')\n\
                open('gen.bin', 'wb').write(bytes(range(256)) * 12288)";
    let r = run_code(&mut c, &sid, code).await;
    assert_eq!(r["stdout"], "3145728\n", "{r}");
    assert!(
        read_chunked(&mut c, &sid, "back.bin").await == big,
        "round trip differs"
    );
    let gen: Vec<u8> = (0..3usize << 20)
        .map(|i| u8::try_from(i % 256).unwrap())
        .collect();
    assert!(
        read_chunked(&mut c, &sid, "gen.bin").await == gen,
        "guest file differs"
    );

    // An append must start exactly at the file's end; a refused one changes nothing.
    for offset in [100, (3 << 20) + 1] {
        let p = json!({"sandbox_id": sid, "path": "big.bin", "data": b64(b"zz"), "offset": offset});
        let r = c.call("files.write", p).await;
        assert_eq!(error_code(&r), FILE_REFUSED, "offset {offset}: {r}");
    }
    let s = c
        .call("files.stat", json!({"sandbox_id": sid, "path": "big.bin"}))
        .await;
    assert_eq!(result_of(&s)["size"], 3 << 20);
    let over = |data: String, path: &str| json!({"sandbox_id": sid, "path": path, "data": data});
    let cases = [
        (
            "files.write",
            over(b64(&vec![1; CHUNK + 1]), "o.bin"),
            "a chunk over 512 KiB",
        ),
        (
            "files.write",
            over("@@not base64@@".into(), "o.bin"),
            "bad base64",
        ),
        ("files.write", over(b64(b"x"), "../x"), "path ../x"),
        (
            "files.write",
            over(b64(b"x"), "/etc/passwd"),
            "absolute path",
        ),
        (
            "files.write",
            over(b64(b"x"), "sub/../../x"),
            "path sub/../../x",
        ),
        (
            "files.read",
            json!({"sandbox_id": sid, "path": "../x"}),
            "read ../x",
        ),
        (
            "files.read",
            json!({"sandbox_id": sid, "path": "/etc/passwd"}),
            "read /etc/passwd",
        ),
        (
            "files.read",
            json!({"sandbox_id": sid, "path": "big.bin", "length": CHUNK + 1}),
            "a read over 512 KiB",
        ),
    ];
    for (method, params, what) in cases {
        let r = c.call(method, params).await;
        assert_eq!(error_code(&r), INVALID, "{what}: {r}");
    }
    let s = c
        .call("files.stat", json!({"sandbox_id": sid, "path": "o.bin"}))
        .await;
    assert_eq!(
        result_of(&s)["exists"],
        false,
        "a refused write left a file"
    );
}

// ---- links and special files planted by the guest ----

pub(super) struct HostFile {
    path: std::path::PathBuf,
    content: Vec<u8>,
    mode: u32,
    mtime: (i64, i64),
    ino: u64,
}

impl HostFile {
    pub(super) fn snapshot(path: &std::path::Path) -> HostFile {
        let m = std::fs::symlink_metadata(path).unwrap();
        HostFile {
            path: path.to_owned(),
            content: std::fs::read(path).unwrap(),
            mode: m.mode(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ino: m.ino(),
        }
    }

    pub(super) fn assert_unchanged(&self) {
        let now = HostFile::snapshot(&self.path);
        assert!(now.content == self.content, "{:?} changed", self.path);
        assert_eq!(
            (now.mode, now.mtime, now.ino),
            (self.mode, self.mtime, self.ino),
            "{:?}: mode, mtime or inode changed",
            self.path
        );
    }
}

/// A world-writable host file in a world-readable dir: whatever identity touched it through
/// a followed link could change it.
pub(super) fn victim() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("airlock-victim-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let path = dir.path().join("victim");
    std::fs::write(&path, b"host secret\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let f = std::fs::File::options().write(true).open(&path).unwrap();
    let past = SystemTime::now() - Duration::from_secs(86_400);
    f.set_modified(past).unwrap();
    (dir, path)
}

pub(super) async fn within_5s(c: &mut WsClient, method: &str, params: Value) -> Value {
    tokio::time::timeout(Duration::from_secs(5), c.call(method, params))
        .await
        .unwrap_or_else(|_| panic!("{method} blocked"))
}

async fn links_and_special_files(user: Option<&str>) {
    let (vdir, vpath) = victim();
    let victim_before = HostFile::snapshot(&vpath);
    let passwd_before = HostFile::snapshot(std::path::Path::new("/etc/passwd"));
    let server = WsServer::start_as(user, &[]);
    let mut c = server.connect().await;
    let sid = create(&mut c, json!({"spec": {}})).await;
    let plant = format!(
        "ln -s {v} vlink && ln -s /etc/passwd plink && ln -s {d} dlink && mkfifo fifo && \
         echo real > real.txt && ln real.txt hard.txt && echo planted",
        v = vpath.display(),
        d = vdir.path().display()
    );
    let r = exec(&mut c, &sid, &plant).await;
    assert_eq!(r["stdout"], "planted\n", "{user:?}: {r}");
    let p = |path: &str| json!({"sandbox_id": sid, "path": path});
    for path in ["vlink", "plink", "fifo", "hard.txt", "dlink/victim"] {
        let r = within_5s(&mut c, "files.read", p(path)).await;
        assert_eq!(error_code(&r), FILE_REFUSED, "{user:?} read {path}: {r}");
    }
    // The refusal names its rule: a path through a link is not confined.
    for path in ["vlink", "dlink/victim"] {
        let r = within_5s(&mut c, "files.read", p(path)).await;
        let kind = &r["error"]["data"]["kind"];
        assert_eq!(kind, "SandboxPathNotConfined", "{user:?} read {path}: {r}");
    }
    let victim_len = victim_before.content.len();
    let writes = [
        ("vlink", 0),
        ("vlink", victim_len),
        ("plink", 0),
        ("fifo", 0),
        ("fifo", 1),
        ("dlink/victim", 0),
        ("dlink/victim", victim_len),
        ("dlink/new.txt", 0),
    ];
    for (path, offset) in writes {
        let params = json!({"sandbox_id": sid, "path": path, "data": b64(b"PWNED\n"),
                            "offset": offset});
        let r = within_5s(&mut c, "files.write", params).await;
        assert_eq!(
            error_code(&r),
            FILE_REFUSED,
            "{user:?} write {path}@{offset}: {r}"
        );
    }
    // Each is named for what it is (a link is never followed), and none has a size to read.
    for (path, kind) in [
        ("vlink", "symlink"),
        ("fifo", "other"),
        ("hard.txt", "file"),
    ] {
        let r = within_5s(&mut c, "files.stat", p(path)).await;
        let r = result_of(&r);
        assert_eq!(
            (&r["exists"], &r["size"], &r["kind"]),
            (&json!(true), &Value::Null, &json!(kind)),
            "{path}: {r}"
        );
    }
    let l = within_5s(&mut c, "files.list", json!({"sandbox_id": sid})).await;
    let kinds: Vec<(&str, &str)> = result_of(&l)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["kind"].as_str().unwrap()))
        .collect();
    assert!(kinds.contains(&("dlink", "symlink")), "{user:?}: {l}");
    assert!(kinds.contains(&("real.txt", "file")), "{user:?}: {l}");
    // A link is removed, never followed.
    for path in ["vlink", "dlink"] {
        let r = within_5s(&mut c, "files.remove", p(path)).await;
        assert_eq!(result_of(&r)["path"], path, "{user:?}: {r}");
    }
    let r = run_code(&mut c, &sid, "import os\nprint(sorted(os.listdir('.')))").await;
    assert_eq!(
        r["stdout"], "['fifo', 'hard.txt', 'plink', 'real.txt']\n",
        "{user:?}: {r}"
    );
    victim_before.assert_unchanged();
    passwd_before.assert_unchanged();
    let in_dir: Vec<_> = std::fs::read_dir(vdir.path()).unwrap().collect();
    assert_eq!(
        in_dir.len(),
        1,
        "{user:?}: something landed in the victim dir"
    );
    let r = c.call("sandbox.dispose", json!({"sandbox_id": sid})).await;
    assert_eq!(result_of(&r)["disposal"], Value::Null);
}

/// `output_encoding: "base64"` carries each stream's exact bytes (text replaces invalid UTF-8).
#[tokio::test(flavor = "multi_thread")]
async fn exact_output_comes_back_byte_for_byte_as_base64() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let sid = create(&mut c, json!({"spec": {}})).await;
    let script = r"printf 'a\377\000b'; printf '\351\n' >&2; exit 3";
    let params = json!({"sandbox_id": sid, "argv": ["/bin/sh", "-c", script],
                        "output_encoding": "base64"});
    let r = c.call("sandbox.exec", params).await;
    let r = result_of(&r);
    assert_eq!(r["output_encoding"], "base64", "{r}");
    assert_eq!(r["stdout"], b64(b"a\xff\x00b"), "{r}");
    assert_eq!(r["stderr"], b64(b"\xe9\n"), "{r}");
    assert_eq!(r["exit_code"], 3, "{r}");
    let code = "import sys; sys.stdout.buffer.write(bytes([0xc3, 0x28]))";
    let params = json!({"sandbox_id": sid, "code": code, "output_encoding": "base64"});
    let r = c.call("sandbox.run_code", params).await;
    assert_eq!(result_of(&r)["stdout"], b64(b"\xc3\x28"), "{r}");
    let r = exec(&mut c, &sid, "printf 'a\\377'").await;
    assert_eq!(r["stdout"], "a\u{fffd}", "text stays the default: {r}");
    let params = json!({"sandbox_id": sid, "argv": ["/bin/true"], "output_encoding": "hex"});
    let r = c.call("sandbox.exec", params).await;
    assert_eq!(error_code(&r), INVALID_PARAMS, "{r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn attack_links_and_fifos_are_refused_and_the_host_file_is_untouched() {
    for user in IDENTITIES {
        links_and_special_files(user).await;
    }
}

// ---- capability gates, on every call ----

async fn gates(user: Option<&str>) {
    let server = WsServer::start_as(user, &[]);
    let mut c = server.connect().await;
    let sid = create(&mut c, json!({"spec": {"requires": ["run_code"]}})).await;
    let p = |extra: Value| {
        let mut v = json!({"sandbox_id": sid});
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    let calls = [
        (
            "files.write",
            p(json!({"path": "w.txt", "data": b64(b"x")})),
        ),
        ("files.read", p(json!({"path": "r.txt"}))),
        ("files.list", p(json!({}))),
        ("files.stat", p(json!({"path": "r.txt"}))),
        ("files.remove", p(json!({"path": "r.txt"}))),
        (
            "sandbox.exec",
            p(json!({"argv": ["/bin/sh", "-c", "echo x > e.txt"]})),
        ),
    ];
    let r = run_code(&mut c, &sid, "open('r.txt', 'w').write('kept')").await;
    assert_eq!(r["status"], "completed", "{r}");
    for round in 0..2 {
        for (method, params) in &calls {
            let r = c.call(method, params.clone()).await;
            assert_eq!(
                error_code(&r),
                REFUSED,
                "{user:?} {method} round {round}: {r}"
            );
        }
    }
    // Nothing the refused calls named happened.
    let r = run_code(&mut c, &sid, "import os\nprint(sorted(os.listdir('.')))").await;
    assert_eq!(r["stdout"], "['r.txt']\n", "{user:?}: {r}");

    // No host_tools: the program gets unknown_tool, the orchestrator sees no call_tool.
    let code = "try:\n    call_tool('echo', {'a': 1})\n\
                except ToolError as e:\n    print('refused', e.code)";
    let no_tools_sb = create(&mut c, json!({"spec": {}})).await;
    let id = c
        .request(
            "sandbox.run_code",
            json!({"sandbox_id": no_tools_sb, "code": code, "tools": ["echo"]}),
        )
        .await;
    let (r, seen) = c.wait_for(id, &no_tools).await;
    assert_eq!(result_of(&r)["stdout"], "refused -32013\n", "{user:?}: {r}");
    assert!(seen.is_empty(), "{seen:?}");

    // host_tools without a declared tool: still nothing reaches the orchestrator.
    let undeclared = create(
        &mut c,
        json!({"spec": {"requires": ["run_code", "host_tools"]}}),
    )
    .await;
    let code = "print(call_tool('echo', {'a': 1}))";
    let id = c
        .request(
            "sandbox.run_code",
            json!({"sandbox_id": undeclared, "code": code}),
        )
        .await;
    let (r, seen) = c.wait_for(id, &echo_tools).await;
    assert_eq!(result_of(&r)["status"], "error", "{user:?}: {r}");
    assert!(
        seen.is_empty(),
        "an undeclared tool reached the orchestrator: {seen:?}"
    );

    // With host_tools and the tool declared, the call passes the registry's door (its schema)
    // and reaches the orchestrator; arguments against the schema never do.
    let echo = json!({"name": "echo", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false}, "source": null, "sink": null, "identity": null});
    let tools_sb = create(
        &mut c,
        json!({"spec": {"requires": ["run_code", "host_tools"], "tools": [echo]}}),
    )
    .await;
    let bad = "try:\n    call_tool('echo', {'a': 'not an integer'})\nexcept ToolError as e:\n    print('denied', e.code)";
    let id = c
        .request(
            "sandbox.run_code",
            json!({"sandbox_id": tools_sb, "code": bad}),
        )
        .await;
    let (r, seen) = c.wait_for(id, &echo_tools).await;
    assert_eq!(result_of(&r)["stdout"], "denied -32602\n", "{user:?}: {r}");
    assert!(
        seen.is_empty(),
        "a call against the schema reached the orchestrator: {seen:?}"
    );
    let id = c
        .request(
            "sandbox.run_code",
            json!({"sandbox_id": tools_sb, "code": code, "tools": ["echo"]}),
        )
        .await;
    let (r, seen) = c.wait_for(id, &echo_tools).await;
    let r = result_of(&r);
    assert_eq!(r["stdout"], "{'a': 1}\n", "{user:?}: {r}");
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["method"], "call_tool");
    assert_eq!(seen[0]["params"]["run_id"], r["run_id"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn attack_every_call_is_gated_by_the_spec_capabilities() {
    for user in IDENTITIES {
        gates(user).await;
    }
}

// ---- keys and policy ----

#[tokio::test(flavor = "multi_thread")]
async fn keys_return_the_same_sandbox_for_an_equal_spec_only() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let key = json!({"scope": "tenant-a", "thread_id": "conv-7"});
    let a = create(&mut c, json!({"spec": {}, "key": key})).await;
    let b = create(&mut c, json!({"spec": {}, "key": key})).await;
    assert_eq!(a, b);
    let other = create(
        &mut c,
        json!({"spec": {}, "key": {"scope": "tenant-a", "thread_id": "conv-8"}}),
    )
    .await;
    assert_ne!(a, other);
    let allow = json!({"egress": "allowlist", "egress_allow": ["example.com:443"]});
    let different = [
        allow.clone(),
        json!({"requires": ["run_code"]}),
        json!({"limits": {"timeout_s": 5}}),
        json!({"idle_timeout_s": 5}),
    ];
    for spec in &different {
        let r = c
            .call("sandbox.create", json!({"spec": spec, "key": key}))
            .await;
        assert_eq!(refusal_kind(&r), "SandboxKeySpecMismatch", "{spec}: {r}");
    }
    let r = c.call("sandbox.dispose", json!({"sandbox_id": a})).await;
    result_of(&r);
    let r = c
        .call("sandbox.create", json!({"spec": allow, "key": key}))
        .await;
    let r = result_of(&r);
    assert_eq!(r["egress"], "allowlist", "{r}");
    assert_ne!(r["sandbox_id"], a.as_str());
    // The audit log holds the policy layer's events: the refusals with their kind, the
    // disposal, the acquisitions.
    let events = server.audit_events();
    let count = |event: &str, failure: Value| {
        events
            .iter()
            .filter(|e| e["event"] == event && e["failure"] == failure)
            .count()
    };
    assert_eq!(
        count("sandbox_refused", json!("SandboxKeySpecMismatch")),
        different.len(),
        "{events:?}"
    );
    assert_eq!(count("sandbox_disposed", Value::Null), 1, "{events:?}");
    assert!(count("sandbox_acquired", Value::Null) >= 2, "{events:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn scope_dispose_takes_the_whole_conversation_and_only_it() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let key =
        |thread: &str, call: &str| json!({"scope": "s", "thread_id": thread, "call_id": call});
    // Conversation scope: the call id is ignored.
    let conv = create(&mut c, json!({"spec": {}, "key": key("t", "c1")})).await;
    let same = create(&mut c, json!({"spec": {}, "key": key("t", "c2")})).await;
    assert_eq!(conv, same);
    let call = json!({"isolation_scope": "call"});
    let c1 = create(&mut c, json!({"spec": call, "key": key("t", "c1")})).await;
    let c2 = create(&mut c, json!({"spec": call, "key": key("t", "c2")})).await;
    assert_ne!(c1, c2);
    let other = create(&mut c, json!({"spec": {}, "key": key("u", "c1")})).await;
    let r = c
        .call("scope.dispose", json!({"scope": "s", "thread_id": "t"}))
        .await;
    let r = result_of(&r);
    assert_eq!(r["undisposed"], Value::Null, "{r}");
    assert_eq!(r["disposed"], 3, "{r}");
    for sid in [&conv, &c1, &c2] {
        let r = c.call("sandbox.connect", json!({"sandbox_id": sid})).await;
        assert_eq!(error_code(&r), NOT_FOUND, "{sid}: {r}");
    }
    result_of(
        &c.call("sandbox.connect", json!({"sandbox_id": other}))
            .await,
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn transfer_caps_bound_each_file_both_ways() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let caps = json!({"max_bytes_per_file": 1024, "max_total_bytes": 4096, "max_files": 4});
    let spec = json!({"files_in": caps, "files_out": caps});
    let sid = create(&mut c, json!({"spec": spec})).await;
    let r = write(&mut c, &sid, "big.txt", &[b'x'; 2000]).await;
    assert_eq!(error_code(&r), FILE_REFUSED, "over files_in per file: {r}");
    result_of(&write(&mut c, &sid, "ok.txt", &[b'x'; 1000]).await);
    let p = json!({"sandbox_id": sid, "path": "ok.txt", "data": b64(&[b'y'; 100]), "offset": 1000});
    let r = c.call("files.write", p).await;
    assert_eq!(error_code(&r), FILE_REFUSED, "an append past files_in: {r}");
    run_code(&mut c, &sid, "open('guest.txt', 'w').write('z' * 2000)").await;
    let r = c
        .call(
            "files.read",
            json!({"sandbox_id": sid, "path": "guest.txt", "length": 10}),
        )
        .await;
    assert_eq!(error_code(&r), FILE_REFUSED, "over files_out per file: {r}");
    // Above the host's ceiling (the 8 MiB default): refused at create, never clamped.
    let huge =
        json!({"max_bytes_per_file": 1u64 << 30, "max_total_bytes": 1u64 << 31, "max_files": 4});
    let r = c
        .call("sandbox.create", json!({"spec": {"files_in": huge}}))
        .await;
    assert_eq!(refusal_kind(&r), "SandboxTransferLimitsNotPermitted", "{r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_policy_denying_a_capability_refuses_the_create_that_requires_it() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "floor = \"os_process\"\ndenied_capabilities = [\"exec\"]\n",
    )
    .unwrap();
    let server = WsServer::start(&["--policy", policy.to_str().unwrap()]);
    let mut c = server.connect().await;
    for spec in [json!({"requires": ["exec"]}), json!({})] {
        let r = c.call("sandbox.create", json!({"spec": spec})).await;
        assert_eq!(refusal_kind(&r), "SandboxCapabilityDenied", "{spec}: {r}");
    }
    assert!(
        descendants(server.pid()).is_empty(),
        "a refused create spawned"
    );
    let sid = create(&mut c, json!({"spec": {"requires": ["run_code"]}})).await;
    assert_eq!(
        run_code(&mut c, &sid, "print(6 * 7)").await["stdout"],
        "42\n"
    );
}

// ---- one run per sandbox, sandboxes in parallel ----

#[tokio::test(flavor = "multi_thread")]
async fn a_second_run_in_a_busy_sandbox_is_refused_and_sandboxes_run_concurrently() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let a = create(&mut c, json!({"spec": {}})).await;
    let code = "import time\nprint('go', flush=True)\ntime.sleep(1)\nprint('done')";
    let first = c
        .request(
            "sandbox.run_code",
            json!({"sandbox_id": a, "code": code, "stream": true}),
        )
        .await;
    started(&mut c).await;
    for method in ["sandbox.run_code", "sandbox.exec"] {
        let p = json!({"sandbox_id": a, "code": "print(1)", "argv": ["/bin/true"]});
        let mut p = p.as_object().unwrap().clone();
        p.remove(if method == "sandbox.exec" {
            "code"
        } else {
            "argv"
        });
        let r = c.call(method, Value::Object(p)).await;
        assert_eq!(error_code(&r), BUSY, "{method}: {r}");
    }
    let (r, _) = c.wait_for(first, &no_tools).await;
    assert_eq!(result_of(&r)["stdout"], "go\ndone\n", "{r}");

    let b = create(&mut c, json!({"spec": {}})).await;
    let sleep = "import time\ntime.sleep(2.5)\nprint('slept')";
    let t0 = Instant::now();
    let ids = [
        c.request("sandbox.run_code", json!({"sandbox_id": a, "code": sleep}))
            .await,
        c.request("sandbox.run_code", json!({"sandbox_id": b, "code": sleep}))
            .await,
    ];
    for id in ids {
        let (r, _) = c.wait_for(id, &no_tools).await;
        assert_eq!(result_of(&r)["stdout"], "slept\n", "{r}");
    }
    let wall = t0.elapsed();
    assert!(
        wall < Duration::from_millis(4500),
        "two 2.5 s runs in two sandboxes took {wall:?}: not concurrent"
    );
}

// ---- streaming ----

#[tokio::test(flavor = "multi_thread")]
async fn streamed_lines_arrive_in_order_before_the_response() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let sid = create(&mut c, json!({"spec": {}})).await;
    let code = "import sys, time\nfor i in range(5):\n    print(f'line {i}', flush=True)\n    \
                time.sleep(0.25)\nprint('err', file=sys.stderr, flush=True)";
    let id = c
        .request(
            "sandbox.run_code",
            json!({"sandbox_id": sid, "code": code, "stream": true}),
        )
        .await;
    let (r, notes) = c.wait_for(id, &no_tools).await;
    let r = result_of(&r);
    let run_id = r["run_id"].as_str().unwrap();
    let lines: Vec<&str> = notes
        .iter()
        .filter(|n| n["params"]["stream"] == "stdout")
        .map(|n| n["params"]["data"].as_str().unwrap())
        .collect();
    assert_eq!(
        lines,
        ["line 0\n", "line 1\n", "line 2\n", "line 3\n", "line 4\n"],
        "{notes:?}"
    );
    assert!(notes
        .iter()
        .all(|n| n["method"] == "output" && n["params"]["run_id"] == run_id));
    assert_eq!(output_text(&notes, run_id, "stderr"), "err\n");
    assert_eq!(r["stdout"], lines.concat());
    assert_eq!(r["output_dropped_bytes"], 0, "{r}");
    // Nothing of the run comes after its response.
    let ping = c
        .request("sandbox.connect", json!({"sandbox_id": sid}))
        .await;
    let (_, late) = c.wait_for(ping, &no_tools).await;
    assert!(late.is_empty(), "{late:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_never_reads_a_10_mb_stream_gets_one_result_and_stalls_nobody() {
    // An output cap above the flood, so every byte is streamed or counted as dropped.
    let server = WsServer::start(&["--ceiling-output", "16777216"]);
    let mut a = server.connect().await;
    let cap = 12 << 20;
    let sid = create(
        &mut a,
        json!({"spec": {"limits": {"max_output_bytes": cap}}}),
    )
    .await;
    let code = "import sys\nline = 'x' * 1023 + '\\n'\nfor _ in range(10 * 1024):\n    \
                sys.stdout.write(line)\nsys.stdout.flush()\nprint('tail')";
    let id = a
        .request(
            "sandbox.run_code",
            json!({"sandbox_id": sid, "code": code, "stream": true}),
        )
        .await;
    // A reads nothing until the run has ended (its audit record is written before its
    // response is sent); meanwhile another connection is served.
    let mut b = server.connect().await;
    let t0 = Instant::now();
    let other = create(&mut b, json!({"spec": {}})).await;
    let r = run_code(&mut b, &other, "print('b served')").await;
    assert_eq!(r["stdout"], "b served\n");
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    let audit = server.audit_at_least(2, Duration::from_secs(30));
    assert_eq!(audit.len(), 2, "the unread run did not end: {audit:?}");
    let (resp, notes) = a.wait_for(id, &no_tools).await;
    let r = result_of(&resp);
    assert_eq!(r["status"], "completed", "{}", r["status"]);
    let total = (10 << 20) + "tail\n".len();
    assert_eq!(r["stdout_bytes"], total, "{}", r["stdout_bytes"]);
    // The response fits the 1 MiB message cap: its stdout is cut and says so.
    assert_eq!(r["stdout_truncated"], true);
    assert!(resp.to_string().len() <= CAP);
    let streamed: usize = notes
        .iter()
        .map(|n| n["params"]["data"].as_str().unwrap().len())
        .sum();
    let dropped =
        usize::try_from(r["output_dropped_bytes"].as_u64().expect("counted drops")).unwrap();
    assert!(
        dropped > 0,
        "a reader that never read lost nothing ({streamed} streamed)"
    );
    assert_eq!(
        streamed + dropped,
        total,
        "{streamed} streamed + {dropped} dropped"
    );
    // Exactly one terminal response: nothing more for `id` before the next answer.
    let ping = a
        .request("sandbox.connect", json!({"sandbox_id": sid}))
        .await;
    let (p, late) = a.wait_for(ping, &no_tools).await;
    result_of(&p);
    assert!(late.is_empty(), "after the response: {late:?}");
    assert!(a.stash.is_empty(), "a second response: {:?}", a.stash);
}

// ---- cancellation ----

#[tokio::test(flavor = "multi_thread")]
async fn run_cancel_ends_the_run_and_keeps_the_sandbox() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let sid = create(&mut c, json!({"spec": {}})).await;
    result_of(&write(&mut c, &sid, "keep.txt", b"kept").await);
    let (id, run_id) = start_sleeper(&mut c, &sid).await;
    assert!(!executors(server.pid()).is_empty());
    let t0 = Instant::now();
    let r = c.call("run.cancel", json!({"run_id": run_id})).await;
    assert_eq!(result_of(&r), &json!({"run_id": run_id}));
    let (resp, _) = c.wait_for(id, &no_tools).await;
    let res = result_of(&resp);
    assert_eq!(res["status"], "cancelled", "{res}");
    assert_eq!(res["stdout"], "started\n");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert!(
        descendants(server.pid()).is_empty(),
        "processes outlived the response"
    );
    let r = run_code(&mut c, &sid, "print(open('keep.txt').read())").await;
    assert_eq!(r["stdout"], "kept\n", "{r}");
    for unknown in [run_id.as_str(), "run-nope-1"] {
        let r = c.call("run.cancel", json!({"run_id": unknown})).await;
        assert_eq!(error_code(&r), NOT_FOUND, "{unknown}: {r}");
    }
    // A run started without streaming: its id is unknown until it ends, so it is cancelled
    // by its sandbox.
    let id = c
        .request(
            "sandbox.run_code",
            json!({"sandbox_id": sid, "code": "import time\ntime.sleep(60)"}),
        )
        .await;
    let until = Instant::now() + Duration::from_secs(10);
    let cancelled = loop {
        let r = c.call("run.cancel", json!({"sandbox_id": sid})).await;
        if r.get("result").is_some() {
            break r;
        }
        assert_eq!(error_code(&r), NOT_FOUND, "{r}");
        assert!(Instant::now() < until, "the run never showed up: {r}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (resp, _) = c.wait_for(id, &no_tools).await;
    assert_eq!(result_of(&resp)["status"], "cancelled", "{resp}");
    assert_eq!(result_of(&resp)["run_id"], result_of(&cancelled)["run_id"]);
    let r = c.call("run.cancel", json!({"sandbox_id": sid})).await;
    assert_eq!(error_code(&r), NOT_FOUND, "no run in flight: {r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn dispose_during_a_run_cancels_it_and_frees_everything() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let sid = create(&mut c, json!({"spec": {}})).await;
    let (id, _) = start_sleeper(&mut c, &sid).await;
    let d = c.call("sandbox.dispose", json!({"sandbox_id": sid})).await;
    assert_eq!(result_of(&d)["disposal"], Value::Null, "{d}");
    // "every process is gone ... before the response"
    assert!(
        descendants(server.pid()).is_empty(),
        "processes outlived dispose"
    );
    let (resp, _) = c.wait_for(id, &no_tools).await;
    assert_eq!(result_of(&resp)["status"], "cancelled", "{resp}");
    let r = c.call("sandbox.connect", json!({"sandbox_id": sid})).await;
    assert_eq!(error_code(&r), NOT_FOUND);
}

// ---- a dropped connection ----

#[tokio::test(flavor = "multi_thread")]
async fn a_sandbox_outlives_its_connection_whose_run_is_cancelled() {
    let server = WsServer::start(&[]);
    let mut a = server.connect().await;
    let key = json!({"scope": "tenant-a", "thread_id": "dropped"});
    let sid = create(
        &mut a,
        json!({"spec": {"isolation_scope": "conversation"}, "key": key}),
    )
    .await;
    result_of(&write(&mut a, &sid, "data.txt", b"still here").await);
    let (_, run_id) = start_sleeper(&mut a, &sid).await;
    assert!(!executors(server.pid()).is_empty());
    drop(a);
    let left = settle(server.pid(), Duration::from_secs(10));
    assert!(
        left.is_empty(),
        "the dropped connection's run survived: {left:?}"
    );
    let audit = server.audit_at_least(1, Duration::from_secs(10));
    let rec = audit
        .iter()
        .find(|r| r["run_id"] == run_id.as_str())
        .unwrap_or_else(|| panic!("no audit record for {run_id}: {audit:?}"));
    assert_eq!(rec["status"], "cancelled", "{rec}");

    let mut b = server.connect().await;
    let r = b.call("sandbox.connect", json!({"sandbox_id": sid})).await;
    assert_eq!(result_of(&r)["sandbox_id"], sid.as_str());
    let r = b
        .call("files.read", json!({"sandbox_id": sid, "path": "data.txt"}))
        .await;
    assert_eq!(unb64(&result_of(&r)["data"]), b"still here");
    let r = run_code(&mut b, &sid, "print(open('data.txt').read())").await;
    assert_eq!(r["stdout"], "still here\n", "not busy after the drop: {r}");
}

// ---- idle reclaim and capacity ----

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_sandbox_is_disposed_and_its_memory_freed() {
    let _shmem = SHMEM.lock().await;
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let ns_before = mount_ns_fds(server.pid());
    let sid = create(&mut c, json!({"spec": {"idle_timeout_s": 1}})).await;
    assert_eq!(
        result_of(&c.call("sandbox.connect", json!({"sandbox_id": sid})).await)["idle_timeout_s"],
        1.0
    );
    assert!(
        mount_ns_fds(server.pid()) > ns_before,
        "a live sandbox holds its namespace"
    );
    let shmem_before = shmem_kib();
    let r = run_code(
        &mut c,
        &sid,
        "open('fill', 'wb').write(b'\\1' * (64 << 20))",
    )
    .await;
    assert_eq!(r["status"], "completed", "{r}");
    let shmem_full = shmem_kib();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let r = c.call("sandbox.connect", json!({"sandbox_id": sid})).await;
    assert_eq!(error_code(&r), NOT_FOUND, "{r}");
    assert_eq!(
        mount_ns_fds(server.pid()),
        ns_before,
        "the namespace is still held"
    );
    // The 64 MiB the sandbox wrote lived in its tmpfs; it is freed with the sandbox.
    let freed = shmem_full.saturating_sub(shmem_kib());
    assert!(
        shmem_full.saturating_sub(shmem_before) >= 48 << 10 && freed >= 48 << 10,
        "Shmem {shmem_before} -> {shmem_full} KiB, then freed {freed} KiB"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn max_sandboxes_bounds_the_live_ones() {
    let server = WsServer::start(&["--max-sandboxes", "2"]);
    let mut c = server.connect().await;
    let a = create(
        &mut c,
        json!({"spec": {}, "key": {"scope": "s", "thread_id": "a"}}),
    )
    .await;
    create(&mut c, json!({"spec": {}})).await;
    let r = c.call("sandbox.create", json!({"spec": {}})).await;
    assert_eq!(error_code(&r), OVER_CAPACITY, "{r}");
    // The key of a live sandbox still finds it at capacity.
    let again = create(
        &mut c,
        json!({"spec": {}, "key": {"scope": "s", "thread_id": "a"}}),
    )
    .await;
    assert_eq!(a, again);
    result_of(&c.call("sandbox.dispose", json!({"sandbox_id": a})).await);
    let third = create(&mut c, json!({"spec": {}})).await;
    assert_eq!(
        run_code(&mut c, &third, "print('ok')").await["stdout"],
        "ok\n"
    );
    assert!(
        descendants(server.pid()).is_empty(),
        "the refused create left a process"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn execute_is_a_call_scoped_sandbox_of_its_own_that_nothing_else_can_address() {
    // One live sandbox is the server's maximum: an `execute` is not held among them.
    let server = WsServer::start(&["--max-sandboxes", "1"]);
    let mut c = server.connect().await;
    let held = create(&mut c, json!({"spec": {}})).await;
    let code = "open('/work/mine', 'w').write('x')\nimport time; time.sleep(1)\nprint('ran')";
    let mut e = server.connect().await;
    e.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "execute", "params": {"code": code, "tools": []}}))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // While it runs, nothing names it: not its run id, not the keyless scope.
    let events = server.audit_events();
    let acquired: Vec<&Value> = events
        .iter()
        .filter(|ev| ev["event"] == "sandbox_acquired" && ev["scope"] == "call")
        .collect();
    assert_eq!(
        acquired.len(),
        1,
        "the policy layer saw the execute: {events:?}"
    );
    let key = acquired[0]["key"].as_str().unwrap().to_owned();
    for guess in [key.as_str(), "airlock-keyless", &held] {
        let r = c.call("files.list", json!({"sandbox_id": guess})).await;
        if guess == held {
            // The held sandbox never sees the execute's file.
            let names = result_of(&r).to_string();
            assert!(!names.contains("mine"), "{r}");
        } else {
            assert_eq!(error_code(&r), NOT_FOUND, "{guess}: {r}");
        }
    }
    let done = e.finish(1, &echo_tools).await;
    assert_eq!(result_of(&done)["stdout"], "ran\n", "{done}");
    let run_id = result_of(&done)["run_id"].as_str().unwrap().to_owned();
    let r = c
        .call("sandbox.connect", json!({"sandbox_id": run_id}))
        .await;
    assert_eq!(error_code(&r), NOT_FOUND, "{r}");
    // Made through the router and disposed when its run ended.
    let events = server.audit_events();
    assert!(
        events
            .iter()
            .any(|ev| ev["event"] == "sandbox_disposed" && ev["key"] == key.as_str()),
        "{events:?}"
    );
    assert_eq!(
        run_code(&mut c, &held, "print('still one')").await["stdout"],
        "still one\n"
    );
}

// ---- malformed params ----

/// `method params` that must be `invalid_params` (`SID` stands for a live sandbox's id). The
/// dispose case is last: were it served, it would dispose of the sandbox.
const MALFORMED: &[&str] = &[
    r#"sandbox.create {}"#,
    r#"sandbox.create []"#,
    r#"sandbox.create {"spec": {}, "bogus": 1}"#,
    r#"sandbox.create {"spec": {"bogus": 1}}"#,
    r#"sandbox.create {"spec": {"requires": "run_code"}}"#,
    r#"sandbox.create {"spec": {"requires": ["teleport"]}}"#,
    r#"sandbox.create {"spec": {"idle_timeout_s": "10"}}"#,
    r#"sandbox.create {"spec": {"idle_timeout_s": 86401}}"#,
    r#"sandbox.create {"spec": {"limits": {"timeout_s": 100000}}}"#,
    r#"sandbox.create {"spec": {}, "key": {"scope": "a"}}"#,
    r#"sandbox.create {"spec": {"egress_allow": ["example.com"]}}"#,
    r#"sandbox.connect {}"#,
    r#"sandbox.connect {"sandbox_id": 5}"#,
    r#"sandbox.connect {"sandbox_id": "SID", "bogus": 1}"#,
    r#"sandbox.run_code {"code": "print(1)"}"#,
    r#"sandbox.run_code {"sandbox_id": "SID", "code": 5}"#,
    r#"sandbox.run_code {"sandbox_id": "SID", "code": "1", "bogus": 1}"#,
    r#"sandbox.run_code {"sandbox_id": "SID", "argv": ["/bin/true"]}"#,
    r#"sandbox.run_code {"sandbox_id": "SID", "code": "1", "timeout_s": "1"}"#,
    r#"sandbox.run_code {"sandbox_id": "SID", "code": "1", "timeout_s": 100000}"#,
    r#"sandbox.run_code {"sandbox_id": "SID", "code": "1", "stream": "yes"}"#,
    r#"sandbox.exec {"argv": ["/bin/true"]}"#,
    r#"sandbox.exec {"sandbox_id": "SID", "argv": "/bin/true"}"#,
    r#"sandbox.exec {"sandbox_id": "SID", "code": "1"}"#,
    r#"sandbox.exec {"sandbox_id": "SID", "argv": ["/bin/true"], "bogus": 1}"#,
    r#"sandbox.dispose {}"#,
    r#"sandbox.dispose {"sandbox_id": []}"#,
    r#"scope.dispose {}"#,
    r#"scope.dispose {"scope": "a"}"#,
    r#"scope.dispose {"scope": 1, "thread_id": "b"}"#,
    r#"scope.dispose {"scope": "a", "thread_id": "b", "bogus": 1}"#,
    r#"run.cancel {}"#,
    r#"run.cancel {"run_id": 1}"#,
    r#"run.cancel {"run_id": "x", "bogus": 1}"#,
    r#"run.cancel {"run_id": "x", "sandbox_id": "SID"}"#,
    r#"files.write {"path": "a", "data": ""}"#,
    r#"files.write {"sandbox_id": "SID", "data": ""}"#,
    r#"files.write {"sandbox_id": "SID", "path": 1, "data": ""}"#,
    r#"files.write {"sandbox_id": "SID", "path": "a", "data": 5}"#,
    r#"files.write {"sandbox_id": "SID", "path": "a", "data": "", "offset": -1}"#,
    r#"files.write {"sandbox_id": "SID", "path": "a", "data": "", "bogus": 1}"#,
    r#"files.read {"path": "a"}"#,
    r#"files.read {"sandbox_id": "SID"}"#,
    r#"files.read {"sandbox_id": "SID", "path": "a", "offset": "0"}"#,
    r#"files.read {"sandbox_id": "SID", "path": "a", "length": -1}"#,
    r#"files.read {"sandbox_id": "SID", "path": "a", "bogus": 1}"#,
    r#"files.list {}"#,
    r#"files.list {"sandbox_id": "SID", "path": 5}"#,
    r#"files.list {"sandbox_id": "SID", "bogus": 1}"#,
    r#"files.stat {"path": "a"}"#,
    r#"files.stat {"sandbox_id": "SID"}"#,
    r#"files.stat {"sandbox_id": "SID", "path": 5}"#,
    r#"files.stat {"sandbox_id": "SID", "path": "a", "bogus": 1}"#,
    r#"files.remove {"path": "a"}"#,
    r#"files.remove {"sandbox_id": "SID"}"#,
    r#"files.remove {"sandbox_id": "SID", "path": true}"#,
    r#"files.remove {"sandbox_id": "SID", "path": "a", "bogus": 1}"#,
    r#"files.make_dir {"sandbox_id": "SID"}"#,
    r#"files.make_dir {"sandbox_id": "SID", "path": "/abs"}"#,
    r#"files.make_dir {"sandbox_id": "SID", "path": "a", "parents": "yes"}"#,
    r#"files.make_dir {"sandbox_id": "SID", "path": "a", "bogus": 1}"#,
    r#"files.rename {"sandbox_id": "SID", "from": "a"}"#,
    r#"files.rename {"sandbox_id": "SID", "from": "a", "to": "../b"}"#,
    r#"files.rename {"sandbox_id": "SID", "from": 1, "to": "b"}"#,
    r#"files.rename {"sandbox_id": "SID", "from": "a", "to": "b", "bogus": 1}"#,
    r#"files.write_many {"sandbox_id": "SID"}"#,
    r#"files.write_many {"sandbox_id": "SID", "files": []}"#,
    r#"files.write_many {"sandbox_id": "SID", "files": [{"path": "/abs", "data": ""}]}"#,
    r#"files.write_many {"sandbox_id": "SID", "files": [{"path": "a", "data": "!!"}]}"#,
    r#"files.write_many {"sandbox_id": "SID", "files": [{"path": "a"}]}"#,
    r#"sandbox.dispose {"sandbox_id": "SID", "bogus": 1}"#,
];

const METHODS: [&str; 15] = [
    "sandbox.create",
    "sandbox.connect",
    "sandbox.run_code",
    "sandbox.exec",
    "sandbox.dispose",
    "scope.dispose",
    "run.cancel",
    "files.write",
    "files.read",
    "files.list",
    "files.stat",
    "files.remove",
    "files.make_dir",
    "files.rename",
    "files.write_many",
];

#[tokio::test(flavor = "multi_thread")]
async fn malformed_params_are_invalid_params_for_every_method() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let sid = create(&mut c, json!({"spec": {}})).await;
    let mut wrong = Vec::new();
    for case in MALFORMED {
        let (method, text) = case.split_once(' ').unwrap();
        let params: Value = serde_json::from_str(&text.replace("SID", &sid)).unwrap();
        let r = c.call(method, params.clone()).await;
        if r["error"]["code"] != INVALID {
            wrong.push(format!("{method} {params} -> {r}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "not invalid_params:\n{}",
        wrong.join("\n")
    );
    for method in METHODS {
        let id = c.next_id;
        c.next_id += 1;
        c.send(&json!({"jsonrpc": "2.0", "id": id, "method": method}))
            .await;
        let (r, _) = c.wait_for(id, &no_tools).await;
        assert_eq!(error_code(&r), INVALID, "{method} without params: {r}");
    }
    result_of(&c.call("sandbox.connect", json!({"sandbox_id": sid})).await);
}

// ---- shutdown ----

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_cancels_the_running_run_disposes_every_sandbox_and_exits_0() {
    // No drain grace: the run in flight is cancelled at once (serve::drain tests the grace).
    let mut server = WsServer::start(&["--drain-grace", "0"]);
    let mut c = server.connect().await;
    let idle = create(&mut c, json!({"spec": {}})).await;
    result_of(&write(&mut c, &idle, "f.txt", b"x").await);
    let busy = create(&mut c, json!({"spec": {}})).await;
    let (id, _) = start_sleeper(&mut c, &busy).await;
    let procs = descendants(server.pid());
    assert!(!procs.is_empty());
    let uids: Vec<u32> = procs
        .iter()
        .filter_map(|p| uid_of(*p))
        .filter(|u| *u != 0 && *u != 1001)
        .collect();
    if uid_of(std::process::id() as i32) == Some(0) {
        assert!(
            !uids.is_empty(),
            "a root server's sandbox runs as its own uid: {procs:?}"
        );
    }
    signal(server.pid(), libc_sigterm());
    let (resp, _) = c.wait_for(id, &no_tools).await;
    let r = result_of(&resp);
    assert_eq!(r["status"], "cancelled", "{r}");
    assert_eq!(r["error"]["code"], -32012, "doc: error code shutdown: {r}");
    let (_, close) = c.recv_until_close().await;
    assert_eq!(close, Some(1001));
    let status = wait_bounded(&mut server.child, Duration::from_secs(30)).expect("no exit");
    assert!(status.success(), "{status:?}");
    assert!(still_alive(&procs).is_empty(), "survivors: {procs:?}");
    // Under a root server each sandbox has a host uid of its own: nothing runs as it.
    assert!(
        processes_of(&uids).is_empty(),
        "a sandbox's uid still runs: {uids:?}"
    );
}
