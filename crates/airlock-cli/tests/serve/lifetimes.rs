//! A sandbox's life as the orchestrator sees it (issue 26): `spec.metadata`, `sandbox.list`,
//! `sandbox.set_timeout`, and transfers checked per call rather than counted over the
//! sandbox's life (the sandbox's disk bounds what it holds). Held to docs/server.md through
//! the real binary, over WebSocket and stdio; the transfer attack runs as root and as
//! `airlock-test`.
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::support::*;

const NOT_FOUND: i64 = -32016;
const FILE_REFUSED: i64 = -32017;
const INVALID_PARAMS: i64 = -32602;
const CHUNK: usize = 512 * 1024;

/// The identities the attack runs the server as.
const IDENTITIES: [Option<&str>; 2] = [None, Some("airlock-test")];

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

async fn create(c: &mut WsClient, params: Value) -> Value {
    let r = c.call("sandbox.create", params).await;
    result_of(&r).clone()
}

async fn list(c: &mut WsClient) -> Vec<Value> {
    let r = c.call("sandbox.list", json!({})).await;
    result_of(&r)["sandboxes"].as_array().unwrap().clone()
}

fn entry<'a>(listed: &'a [Value], sid: &str) -> Option<&'a Value> {
    listed.iter().find(|e| e["sandbox_id"] == sid)
}

fn write_params(sid: &str, path: &str, bytes: &[u8]) -> Value {
    json!({"sandbox_id": sid, "path": path, "data": b64(bytes)})
}

// ---- metadata ----

#[tokio::test(flavor = "multi_thread")]
async fn metadata_is_echoed_bounded_and_takes_no_part_in_key_reuse() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let meta = json!({"owner": "ana", "ticket.id": "T-1", "purpose": "é".repeat(256)});
    let key = json!({"scope": "tenant", "thread_id": "conv-1"});
    let d = create(
        &mut c,
        json!({"spec": {"metadata": meta, "idle_timeout_s": 60}, "key": key}),
    )
    .await;
    assert_eq!(d["metadata"], meta, "{d}");
    let sid = d["sandbox_id"].as_str().unwrap().to_owned();
    let r = c.call("sandbox.connect", json!({"sandbox_id": sid})).await;
    assert_eq!(result_of(&r)["metadata"], meta);
    // A sandbox made without metadata has an empty map.
    let plain = create(&mut c, json!({"spec": {}})).await;
    assert_eq!(plain["metadata"], json!({}));
    // The same key with an equal spec but other metadata: the same sandbox, its metadata as
    // it was made.
    let again = create(
        &mut c,
        json!({"spec": {"metadata": {"owner": "bob"}, "idle_timeout_s": 60}, "key": key}),
    )
    .await;
    assert_eq!(again["sandbox_id"], sid.as_str(), "{again}");
    assert_eq!(again["metadata"], meta, "{again}");
    // Each bound is refused `invalid_params`, naming the member; nothing is made.
    let many: serde_json::Map<String, Value> =
        (0..33).map(|i| (format!("k{i}"), json!("v"))).collect();
    let bad = [
        (Value::Object(many), "spec.metadata has 33 entries"),
        (json!({"a b": "v"}), "spec.metadata key \"a b\""),
        (json!({"": "v"}), "spec.metadata key \"\""),
        (json!({"k".repeat(65): "v"}), "spec.metadata key"),
        (
            json!({"k": "x".repeat(513)}),
            "spec.metadata[\"k\"] is 513 bytes",
        ),
        (json!({"k": 7}), "spec.metadata[\"k\"] must be a string"),
        (json!("owner=ana"), "spec.metadata must be an object"),
    ];
    let before = list(&mut c).await.len();
    for (m, want) in bad {
        let r = c
            .call("sandbox.create", json!({"spec": {"metadata": m}}))
            .await;
        assert_eq!(error_code(&r), INVALID_PARAMS, "{m}: {r}");
        let msg = r["error"]["message"].as_str().unwrap();
        assert!(msg.contains(want), "{m}: {msg}");
    }
    assert_eq!(
        list(&mut c).await.len(),
        before,
        "a refused create made one"
    );
}

// ---- sandbox.list ----

#[tokio::test(flavor = "multi_thread")]
async fn sandbox_list_shows_every_held_sandbox_to_every_connection_and_nothing_else() {
    let server = WsServer::start(&["--max-sandboxes", "3"]);
    let mut a = server.connect().await;
    assert!(list(&mut a).await.is_empty());
    let t0 = now_ms();
    let keyed = create(
        &mut a,
        json!({"spec": {"metadata": {"role": "keyed"}, "idle_timeout_s": 120},
               "key": {"scope": "tenant", "thread_id": "t1"}}),
    )
    .await;
    let call = create(
        &mut a,
        json!({"spec": {"isolation_scope": "call"},
               "key": {"scope": "tenant", "thread_id": "t1", "call_id": "c7"}}),
    )
    .await;
    let keyless = create(&mut a, json!({"spec": {}})).await;
    // A one-shot `execute` is a call-scoped sandbox that is never held, so never listed.
    a.send(&json!({"jsonrpc": "2.0", "id": 900, "method": "execute",
                   "params": {"code": "print(1)", "tools": []}}))
        .await;
    let done = a.finish(900, &no_tools).await;
    assert_eq!(result_of(&done)["status"], "completed", "{done}");
    // Another connection (the same token) sees the same three: one token, no tenants.
    let mut b = server.connect().await;
    let listed = list(&mut b).await;
    assert_eq!(listed.len(), 3, "{listed:?}");
    let ids: Vec<&str> = listed
        .iter()
        .map(|e| e["sandbox_id"].as_str().unwrap())
        .collect();
    let want: Vec<&str> = [&keyed, &call, &keyless]
        .iter()
        .map(|d| d["sandbox_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, want, "oldest first");
    let e = entry(&listed, want[0]).unwrap();
    assert_eq!(e["key"], json!({"scope": "tenant", "thread_id": "t1"}));
    assert_eq!(e["metadata"], json!({"role": "keyed"}));
    assert_eq!(e["idle_timeout_s"], 120.0);
    assert_eq!(e["state"], "idle");
    let (created, used) = (
        e["created_at_ms"].as_u64().unwrap(),
        e["last_used_at_ms"].as_u64().unwrap(),
    );
    assert!(
        t0.saturating_sub(1000) <= created && created <= used && used <= now_ms() + 1000,
        "{e}"
    );
    assert_eq!(
        entry(&listed, want[1]).unwrap()["key"],
        json!({"scope": "tenant", "thread_id": "t1", "call_id": "c7"})
    );
    assert_eq!(entry(&listed, want[2]).unwrap()["key"], Value::Null);
    assert_eq!(entry(&listed, want[2]).unwrap()["idle_timeout_s"], 600.0);
    // Every member, and nothing else.
    let mut members: Vec<&String> = e.as_object().unwrap().keys().collect();
    members.sort();
    assert_eq!(
        members,
        [
            "created_at_ms",
            "idle_timeout_s",
            "key",
            "last_used_at_ms",
            "metadata",
            "sandbox_id",
            "state"
        ]
    );
    // A run in flight is `running`; its end, a use, moves `last_used_at_ms`.
    let sid = want[2];
    a.send(
        &json!({"jsonrpc": "2.0", "id": 901, "method": "sandbox.run_code",
                   "params": {"sandbox_id": sid, "code": "import time\ntime.sleep(1.5)"}}),
    )
    .await;
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let listed = list(&mut b).await;
        if entry(&listed, sid).unwrap()["state"] == "running" {
            break;
        }
        assert!(Instant::now() < until, "never seen running: {listed:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = entry(&list(&mut b).await, sid).unwrap()["last_used_at_ms"]
        .as_u64()
        .unwrap();
    let r = a.finish(901, &no_tools).await;
    assert_eq!(result_of(&r)["status"], "completed", "{r}");
    let after = list(&mut b).await;
    let e = entry(&after, sid).unwrap();
    assert_eq!(e["state"], "idle", "{e}");
    assert!(e["last_used_at_ms"].as_u64().unwrap() > before, "{e}");
    // At --max-sandboxes the list is complete and a fourth is refused; a disposed one is gone.
    let r = a.call("sandbox.create", json!({"spec": {}})).await;
    assert_eq!(error_code(&r), -32018, "{r}");
    result_of(&a.call("sandbox.dispose", json!({"sandbox_id": sid})).await);
    let listed = list(&mut b).await;
    assert_eq!(listed.len(), 2);
    assert!(entry(&listed, sid).is_none());
    // Params are `{}`: anything else is refused.
    let r = b.call("sandbox.list", json!({"sandbox_id": want[0]})).await;
    assert_eq!(error_code(&r), INVALID_PARAMS, "{r}");
    let r = b.call("sandbox.list", json!([1])).await;
    assert_eq!(error_code(&r), INVALID_PARAMS, "{r}");
}

// ---- sandbox.set_timeout ----

#[tokio::test(flavor = "multi_thread")]
async fn set_timeout_extends_a_life_counts_as_a_use_and_keeps_the_key_s_spec() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let key = json!({"scope": "tenant", "thread_id": "long"});
    let spec = json!({"idle_timeout_s": 2});
    let d = create(&mut c, json!({"spec": spec, "key": key})).await;
    let sid = d["sandbox_id"].as_str().unwrap().to_owned();
    assert_eq!(d["idle_timeout_s"], 2.0);
    let used0 = entry(&list(&mut c).await, &sid).unwrap()["last_used_at_ms"]
        .as_u64()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = c
        .call(
            "sandbox.set_timeout",
            json!({"sandbox_id": sid, "idle_timeout_s": 30}),
        )
        .await;
    let d = result_of(&r);
    assert_eq!(d["sandbox_id"], sid.as_str());
    assert_eq!(d["idle_timeout_s"], 30.0, "{d}");
    let e = entry(&list(&mut c).await, &sid).unwrap().clone();
    assert_eq!(e["idle_timeout_s"], 30.0);
    assert!(
        e["last_used_at_ms"].as_u64().unwrap() >= used0 + 250,
        "set_timeout is a use: {e}"
    );
    // Past the spec's 2 s, with no call, the sandbox lives on.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let r = c.call("sandbox.connect", json!({"sandbox_id": sid})).await;
    assert_eq!(result_of(&r)["idle_timeout_s"], 30.0, "{r}");
    // A reconnect through create with the spec it was made with returns it, timeout kept; one
    // asking for the new timeout in its spec is another spec under a live key.
    let again = create(&mut c, json!({"spec": spec, "key": key})).await;
    assert_eq!(again["sandbox_id"], sid.as_str());
    assert_eq!(again["idle_timeout_s"], 30.0);
    let r = c
        .call(
            "sandbox.create",
            json!({"spec": {"idle_timeout_s": 30}, "key": key}),
        )
        .await;
    assert_eq!(refusal_kind(&r), "SandboxKeySpecMismatch", "{r}");
    // The same bounds as create's, refused `invalid_params` naming the member; the timeout in
    // force does not change.
    for bad in [json!(0), json!(-1), json!(86401), json!("60"), json!(null)] {
        let r = c
            .call(
                "sandbox.set_timeout",
                json!({"sandbox_id": sid, "idle_timeout_s": bad}),
            )
            .await;
        assert_eq!(error_code(&r), INVALID_PARAMS, "{bad}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("idle_timeout_s"),
            "{r}"
        );
    }
    let r = c
        .call(
            "sandbox.set_timeout",
            json!({"sandbox_id": sid, "idle_timeout_s": 5, "extra": 1}),
        )
        .await;
    assert_eq!(error_code(&r), INVALID_PARAMS, "{r}");
    let r = c
        .call(
            "sandbox.set_timeout",
            json!({"sandbox_id": "sb-nope", "idle_timeout_s": 5}),
        )
        .await;
    assert_eq!(error_code(&r), NOT_FOUND, "{r}");
    assert_eq!(
        entry(&list(&mut c).await, &sid).unwrap()["idle_timeout_s"],
        30.0
    );
    // Shortened, it idles out on the new timeout.
    let r = c
        .call(
            "sandbox.set_timeout",
            json!({"sandbox_id": sid, "idle_timeout_s": 1}),
        )
        .await;
    assert_eq!(result_of(&r)["idle_timeout_s"], 1.0);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let r = c.call("sandbox.connect", json!({"sandbox_id": sid})).await;
    assert_eq!(error_code(&r), NOT_FOUND, "{r}");
    assert!(entry(&list(&mut c).await, &sid).is_none());
}

// ---- stdio ----

#[test]
fn stdio_serves_metadata_list_and_set_timeout() {
    let mut s = StdioServer::start(&[]);
    let (r, _) = s.call(
        1,
        "sandbox.create",
        json!({"spec": {"metadata": {"via": "stdio"}}}),
    );
    let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_owned();
    assert_eq!(result_of(&r)["metadata"], json!({"via": "stdio"}));
    let (r, _) = s.call(
        2,
        "sandbox.set_timeout",
        json!({"sandbox_id": sid, "idle_timeout_s": 90}),
    );
    assert_eq!(result_of(&r)["idle_timeout_s"], 90.0, "{r}");
    let (r, _) = s.call(3, "sandbox.list", json!({}));
    let listed = result_of(&r)["sandboxes"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{r}");
    assert_eq!(listed[0]["sandbox_id"], sid.as_str());
    assert_eq!(listed[0]["metadata"], json!({"via": "stdio"}));
    assert_eq!(listed[0]["idle_timeout_s"], 90.0);
    assert_eq!(listed[0]["key"], Value::Null);
    // Params may be left out.
    s.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "sandbox.list"}));
    let r = s.recv().unwrap();
    assert_eq!(
        result_of(&r)["sandboxes"].as_array().unwrap().len(),
        1,
        "{r}"
    );
}

// ---- transfers: per call, bounded by the disk ----

/// Bytes of every file under `dir` (the host side of a server: its TMPDIR, run dirs, audit).
fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    for e in rd.flatten() {
        let Ok(m) = e.path().symlink_metadata() else {
            continue;
        };
        if m.is_dir() {
            total += tree_bytes(&e.path());
        } else {
            total += m.len();
        }
    }
    total
}

/// The attack on the old life-long budget, and on what replaces it: through the real server,
/// as root and as `airlock-test`, one sandbox writes and reads the same file 100 times (more
/// than the 32 files the old budget allowed) and 40 distinct files; a single write above
/// `max_bytes_per_file` is refused and leaves the file as it was; and writing past the
/// sandbox's disk (policy `disk_mb = 8`) fails saying so, while the host's side of the server
/// did not grow.
#[tokio::test(flavor = "multi_thread")]
async fn transfers_are_checked_per_call_and_the_sandbox_s_disk_bounds_them() {
    for user in IDENTITIES {
        let dir = tempfile::tempdir().unwrap();
        let policy = dir.path().join("policy.toml");
        std::fs::write(&policy, "floor = \"os_process\"\n[limits]\ndisk_mb = 8\n").unwrap();
        if let Some(u) = user {
            let st = std::process::Command::new("chown")
                .args(["-R", &format!("{u}:")])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(st.success());
        }
        let server = WsServer::start_as(user, &["--policy", policy.to_str().unwrap()]);
        let mut c = server.connect().await;
        let caps = json!({"max_bytes_per_file": 1_000_000, "max_total_bytes": 2_000_000,
                          "max_files": 2});
        let d = create(
            &mut c,
            json!({"spec": {"files_in": caps, "files_out": caps}}),
        )
        .await;
        let sid = d["sandbox_id"].as_str().unwrap().to_owned();
        // 100 rewrites and reads of one file: far past the 2 files and 2 MB the spec's totals
        // name, every one served and every read the latest bytes.
        for i in 0..100u32 {
            let body = format!("version {i}\n").repeat(1000).into_bytes();
            let r = c
                .call("files.write", write_params(&sid, "same.txt", &body))
                .await;
            assert_eq!(result_of(&r)["size"], body.len(), "write {i}: {r}");
            let r = c
                .call("files.read", json!({"sandbox_id": sid, "path": "same.txt"}))
                .await;
            assert_eq!(unb64(&result_of(&r)["data"]), body, "read {i}");
        }
        for i in 0..40 {
            let r = c
                .call("files.write", write_params(&sid, &format!("f{i}"), b"x"))
                .await;
            result_of(&r);
        }
        let r = c.call("files.list", json!({"sandbox_id": sid})).await;
        assert_eq!(result_of(&r)["entries"].as_array().unwrap().len(), 41);
        // One write above max_bytes_per_file: refused, the file unchanged (both the atomic
        // replace and an append that would carry it past the cap).
        let before = b"the file as it was\n".repeat(10);
        result_of(
            &c.call("files.write", write_params(&sid, "capped", &before))
                .await,
        );
        let over = vec![b'!'; CHUNK];
        let big: Vec<u8> = vec![b'!'; 600_000];
        let r = c
            .call("files.write", write_params(&sid, "grow", &big[..CHUNK]))
            .await;
        result_of(&r);
        let mut append = write_params(&sid, "grow", &big[CHUNK..]);
        append["offset"] = json!(CHUNK);
        result_of(&c.call("files.write", append).await);
        // `grow` is 600,000 bytes; one more 512 KiB chunk would make it 1,124,288 > 1,000,000.
        let mut past = write_params(&sid, "grow", &over[..CHUNK]);
        past["offset"] = json!(600_000);
        let r = c.call("files.write", past).await;
        assert_eq!(error_code(&r), FILE_REFUSED, "{r}");
        assert_eq!(r["error"]["data"]["kind"], "SandboxFileTooLarge", "{r}");
        let r = c
            .call("files.stat", json!({"sandbox_id": sid, "path": "grow"}))
            .await;
        assert_eq!(
            result_of(&r)["size"],
            600_000,
            "the refused append moved nothing"
        );
        // A spec with a small per-file cap refuses one write above it, and the file is as it
        // was.
        let small = json!({"max_bytes_per_file": 1000, "max_total_bytes": 1000, "max_files": 1});
        let d2 = create(&mut c, json!({"spec": {"files_in": small}})).await;
        let sid2 = d2["sandbox_id"].as_str().unwrap().to_owned();
        result_of(
            &c.call("files.write", write_params(&sid2, "capped", &before))
                .await,
        );
        let r = c
            .call("files.write", write_params(&sid2, "capped", &[b'!'; 1001]))
            .await;
        assert_eq!(r["error"]["data"]["kind"], "SandboxFileTooLarge", "{r}");
        let r = c
            .call("files.read", json!({"sandbox_id": sid2, "path": "capped"}))
            .await;
        assert_eq!(
            unb64(&result_of(&r)["data"]),
            before,
            "the file is unchanged"
        );
        // ... while writes at the cap go on past its `max_files` and `max_total_bytes`.
        for i in 0..5 {
            let r = c
                .call(
                    "files.write",
                    write_params(&sid2, &format!("n{i}"), &[b'.'; 1000]),
                )
                .await;
            result_of(&r);
        }
        result_of(&c.call("sandbox.dispose", json!({"sandbox_id": sid2})).await);
        // Past the disk: 512 KiB chunks into new files until the 8 MiB tmpfs is full.
        let host_before = tree_bytes(server.dir.path());
        let chunk = vec![b'd'; CHUNK];
        let mut landed = 0usize;
        let mut refusal = None;
        for i in 0..32 {
            let r = c
                .call(
                    "files.write",
                    write_params(&sid, &format!("fill{i}"), &chunk),
                )
                .await;
            if r.get("error").is_some() {
                refusal = Some(r);
                break;
            }
            landed += CHUNK;
        }
        let r = refusal.unwrap_or_else(|| panic!("16 MiB landed on an 8 MiB disk"));
        assert_eq!(error_code(&r), FILE_REFUSED, "{r}");
        let msg = r["error"]["message"].as_str().unwrap();
        assert!(msg.contains("the sandbox's disk is full"), "{msg}");
        assert!(landed <= 8 << 20, "{landed} bytes landed on an 8 MiB disk");
        assert!(
            landed >= 4 << 20,
            "only {landed} bytes landed before 'full'"
        );
        // The refused write left no partial file behind.
        let r = c.call("files.list", json!({"sandbox_id": sid})).await;
        let names: Vec<String> = result_of(&r)["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_owned())
            .collect();
        assert!(
            names.iter().all(|n| !n.starts_with(".airlock-write")),
            "{names:?}"
        );
        assert_eq!(
            names.iter().filter(|n| n.starts_with("fill")).count(),
            landed / CHUNK,
            "{names:?}"
        );
        // The guest sees the same bound: its /work is the 8 MiB filesystem.
        let r = c
            .call(
                "sandbox.run_code",
                json!({"sandbox_id": sid,
                       "code": "import os\ns = os.statvfs('/work')\nprint(s.f_blocks * s.f_frsize)"}),
            )
            .await;
        let size: u64 = result_of(&r)["stdout"]
            .as_str()
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(size <= 8 << 20, "/work is {size} bytes");
        // Nothing of it reached the host's disk: the server's own tree (TMPDIR, run dirs,
        // audit) grew by at most a few audit lines.
        let grown = tree_bytes(server.dir.path()).saturating_sub(host_before);
        assert!(
            grown < 64 * 1024,
            "the host side grew {grown} bytes ({user:?})"
        );
        // Freeing space makes room again: the bound is the disk, not a count.
        result_of(
            &c.call("files.remove", json!({"sandbox_id": sid, "path": "fill0"}))
                .await,
        );
        let r = c
            .call(
                "files.write",
                write_params(&sid, "after", &chunk[..CHUNK / 2]),
            )
            .await;
        result_of(&r);
    }
}

/// `spec.lifetime_s` (issue 40): an absolute life from create, whatever the activity. A
/// sandbox in use every 200 ms is still disposed of when its lifetime ends; one whose
/// `sandbox.set_lifetime` moved the end is still there past the first end; describe and list
/// say when it ends; bad values are `invalid_params`.
#[tokio::test(flavor = "multi_thread")]
async fn a_lifetime_ends_a_busy_sandbox_and_set_lifetime_moves_the_end() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    for bad in [
        json!(0),
        json!(-1),
        json!(31.0 * 24.0 * 3600.0),
        json!("10"),
    ] {
        let r = c
            .call("sandbox.create", json!({ "spec": { "lifetime_s": bad } }))
            .await;
        assert_eq!(error_code(&r), INVALID_PARAMS, "{bad}: {r}");
    }
    let t0 = now_ms();
    let short = create(&mut c, json!({ "spec": { "lifetime_s": 1.5 } })).await;
    let short_id = short["sandbox_id"].as_str().unwrap().to_owned();
    let ends = short["ends_at_ms"].as_u64().expect("ends_at_ms");
    assert!(ends >= t0 + 1_400 && ends <= now_ms() + 1_600, "{short}");
    let kept = create(&mut c, json!({ "spec": { "lifetime_s": 1.5 } })).await;
    let kept_id = kept["sandbox_id"].as_str().unwrap().to_owned();
    let r = c
        .call(
            "sandbox.set_lifetime",
            json!({ "sandbox_id": kept_id, "lifetime_s": 60 }),
        )
        .await;
    assert!(
        result_of(&r)["ends_at_ms"].as_u64().unwrap() >= now_ms() + 59_000,
        "{r}"
    );
    let r = c
        .call(
            "sandbox.set_lifetime",
            json!({ "sandbox_id": kept_id, "lifetime_s": "x" }),
        )
        .await;
    assert_eq!(error_code(&r), INVALID_PARAMS, "{r}");
    // Busy every 200 ms: the idle timeout (600 s) never comes, the lifetime does.
    let start = Instant::now();
    let gone_after = loop {
        let r = c
            .call(
                "sandbox.exec",
                json!({ "sandbox_id": short_id, "argv": ["true"] }),
            )
            .await;
        if r.get("error").is_some() {
            assert_eq!(error_code(&r), NOT_FOUND, "{r}");
            break start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(10), "never ended");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        gone_after >= Duration::from_millis(1_000),
        "ended early: {gone_after:?}"
    );
    let listed = list(&mut c).await;
    assert!(entry(&listed, &short_id).is_none());
    let k = entry(&listed, &kept_id).expect("the extended one is still held");
    assert!(k["ends_at_ms"].as_u64().is_some(), "{k}");
}

/// A lifetime's end pauses a sandbox whose `idle_action` is `pause` (the E2B way: paused, not
/// killed), and its next call resumes it with its files.
#[tokio::test(flavor = "multi_thread")]
async fn a_lifetimes_end_pauses_a_sandbox_that_asks_for_it_and_a_call_resumes_it() {
    let state = super::snapshots::StateDir::new(None);
    let server = state.serve(None);
    let mut c = server.connect().await;
    let spec = json!({ "requires": ["run_code", "files_in", "files_out", "snapshot"],
                       "lifetime_s": 1, "idle_action": "pause" });
    let sid = create(&mut c, json!({ "spec": spec })).await["sandbox_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = c
        .call("files.write", write_params(&sid, "kept.txt", b"kept"))
        .await;
    result_of(&r);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listed = list(&mut c).await;
        if entry(&listed, &sid).is_some_and(|e| e["state"] == "paused") {
            break;
        }
        assert!(Instant::now() < deadline, "never paused: {listed:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = c
        .call(
            "sandbox.run_code",
            json!({ "sandbox_id": sid, "code": "print(open('kept.txt').read())" }),
        )
        .await;
    assert_eq!(result_of(&r)["stdout"], "kept\n", "{r}");
}
