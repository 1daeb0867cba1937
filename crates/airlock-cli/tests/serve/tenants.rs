//! Tenants (issue 29) attacked through the real binary: two tenants on one server, the second
//! trying every method that takes an id with the first's ids — sandbox (live and paused), run,
//! process, snapshot, scope key — and with ids that never existed. Nothing of the first's is
//! reached (its files, run, process, paused sandbox and snapshot are intact afterwards, seen
//! through its own connection and on the host's state directory), and each answer equals the
//! never-existing id's once the id itself is blotted out. Also: the tenants file holds no
//! secret, SIGHUP reloads it without dropping a connection, and run records name the tenant.
//! As root and as `airlock-test`.
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::support::*;

const IDENTITIES: [Option<&str>; 2] = [None, Some("airlock-test")];
const NOT_FOUND: i64 = -32016;

const REQUIRES: [&str; 9] = [
    "run_code",
    "exec",
    "files_in",
    "files_out",
    "files_list",
    "files_delete",
    "processes",
    "ports",
    "snapshot",
];

/// The same id with its last eight letters and digits changed (same classes, same length):
/// an id of the same shape that names nothing.
fn never_made(id: &str) -> String {
    let mut changed = 0;
    let mut out: Vec<char> = id.chars().collect();
    for c in out.iter_mut().rev() {
        if changed == 8 {
            break;
        }
        *c = match *c {
            '0'..='8' => char::from(*c as u8 + 1),
            '9' => '0',
            'a'..='e' => char::from(*c as u8 + 1),
            'f' => 'a',
            _ => continue,
        };
        changed += 1;
    }
    out.into_iter().collect()
}

/// An error answer with `ids` blotted out of its message (what may differ between two ids).
fn blotted(resp: &Value, ids: &[&str]) -> Value {
    let mut e = resp
        .get("error")
        .unwrap_or_else(|| panic!("an answer, not an error: {resp}"))
        .clone();
    if let Some(m) = e["message"].as_str() {
        let mut m = m.to_string();
        for id in ids {
            m = m.replace(id, "<ID>");
        }
        e["message"] = json!(m);
    }
    e
}

/// What alice holds: a live sandbox with a file, a background process and a run in flight, a
/// kept snapshot, a paused sandbox, and a keyed sandbox.
struct Alice {
    live: String,
    paused: String,
    keyed: String,
    process: String,
    run: String,
    snapshot: String,
}

async fn alice_makes_her_things(a: &mut WsClient) -> Alice {
    let spec = json!({ "requires": REQUIRES });
    let live = ok(a, "sandbox.create", json!({ "spec": spec })).await["sandbox_id"]
        .as_str()
        .unwrap()
        .to_string();
    let content = b64(b"alice's secret\n");
    ok(
        a,
        "files.write",
        json!({ "sandbox_id": live, "path": "secret.txt", "data": content }),
    )
    .await;
    let process = ok(
        a,
        "process.start",
        json!({ "sandbox_id": live, "argv": ["sh", "-c", "echo started; sleep 600"] }),
    )
    .await["process_id"]
        .as_str()
        .unwrap()
        .to_string();
    let snapshot = ok(a, "sandbox.snapshot", json!({ "sandbox_id": live })).await["snapshot_id"]
        .as_str()
        .unwrap()
        .to_string();
    let paused_spec = json!({ "requires": ["run_code", "snapshot"], "stateful": true });
    let paused = ok(a, "sandbox.create", json!({ "spec": paused_spec })).await["sandbox_id"]
        .as_str()
        .unwrap()
        .to_string();
    ok(
        a,
        "sandbox.run_code",
        json!({ "sandbox_id": paused, "code": "kept = 'alice-41'" }),
    )
    .await;
    ok(a, "sandbox.pause", json!({ "sandbox_id": paused })).await;
    let key = json!({ "scope": "shared-scope", "thread_id": "t1" });
    let keyed = ok(
        a,
        "sandbox.create",
        json!({ "spec": {"requires": ["run_code", "files_in", "files_out"]}, "key": key }),
    )
    .await["sandbox_id"]
        .as_str()
        .unwrap()
        .to_string();
    ok(
        a,
        "files.write",
        json!({ "sandbox_id": keyed, "path": "mine", "data": b64(b"alice") }),
    )
    .await;
    // A run in flight (its id is what run.cancel names).
    let req = a
        .request(
            "sandbox.exec",
            json!({ "sandbox_id": live, "argv": ["sh", "-c", "sleep 3; echo done"], "stream": true }),
        )
        .await;
    let run = loop {
        let m = a.recv().await.expect("a run notification");
        if let Some(r) = m.pointer("/params/run_id").and_then(Value::as_str) {
            break r.to_string();
        }
        assert_ne!(m["id"], json!(req), "the run ended before it was seen: {m}");
    };
    Alice {
        live,
        paused,
        keyed,
        process,
        run,
        snapshot,
    }
}

/// Every method that takes an id, with `sb` (a sandbox), `pr` (a process), `run`, `snap`.
fn probes(sb: &str, pr: &str, run: &str, snap: &str) -> Vec<(&'static str, Value)> {
    let content = b64(b"bob was here");
    vec![
        ("sandbox.connect", json!({ "sandbox_id": sb })),
        (
            "sandbox.run_code",
            json!({ "sandbox_id": sb, "code": "print(open('/work/secret.txt').read())" }),
        ),
        (
            "sandbox.exec",
            json!({ "sandbox_id": sb, "argv": ["cat", "/work/secret.txt"] }),
        ),
        (
            "files.read",
            json!({ "sandbox_id": sb, "path": "secret.txt" }),
        ),
        (
            "files.write",
            json!({ "sandbox_id": sb, "path": "secret.txt", "data": content }),
        ),
        ("files.list", json!({ "sandbox_id": sb, "path": "." })),
        (
            "files.stat",
            json!({ "sandbox_id": sb, "path": "secret.txt" }),
        ),
        (
            "files.remove",
            json!({ "sandbox_id": sb, "path": "secret.txt" }),
        ),
        ("outputs.collect", json!({ "sandbox_id": sb })),
        ("sandbox.expose", json!({ "sandbox_id": sb, "port": 8000 })),
        (
            "sandbox.unexpose",
            json!({ "sandbox_id": sb, "port": 8000 }),
        ),
        (
            "sandbox.set_timeout",
            json!({ "sandbox_id": sb, "idle_timeout_s": 1 }),
        ),
        ("sandbox.snapshot", json!({ "sandbox_id": sb })),
        ("sandbox.fork", json!({ "sandbox_id": sb, "count": 1 })),
        ("sandbox.pause", json!({ "sandbox_id": sb })),
        ("sandbox.resume", json!({ "sandbox_id": sb })),
        (
            "process.start",
            json!({ "sandbox_id": sb, "argv": ["true"] }),
        ),
        ("process.list", json!({ "sandbox_id": sb })),
        ("process.output", json!({ "process_id": pr })),
        (
            "process.input",
            json!({ "process_id": pr, "data": content }),
        ),
        ("process.signal", json!({ "process_id": pr, "signal": 9 })),
        (
            "process.wait",
            json!({ "process_id": pr, "timeout_s": 0.1 }),
        ),
        ("run.cancel", json!({ "run_id": run })),
        ("run.cancel", json!({ "sandbox_id": sb })),
        ("snapshot.remove", json!({ "snapshot_id": snap })),
        (
            "sandbox.create",
            json!({ "spec": {"requires": ["run_code"]}, "from_snapshot": snap }),
        ),
        ("sandbox.dispose", json!({ "sandbox_id": sb })),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_ids_answer_exactly_like_ids_that_never_existed() {
    for user in IDENTITIES {
        let (state, server, mut a, mut b) = alice_and_bob_on_a_state_dir(user).await;
        let al = alice_makes_her_things(&mut a).await;
        let snapshots_before = names_in(&state.path().join("snapshots"));

        let foreign = [&al.live, &al.paused];
        for sb in foreign {
            let fake_sb = never_made(sb);
            let fake_live = never_made(&al.live);
            let fake_pr = al.process.replace(&al.live, &fake_live);
            let (fake_run, fake_snap) = (never_made(&al.run), never_made(&al.snapshot));
            let theirs = probes(sb, &al.process, &al.run, &al.snapshot);
            let nobodys = probes(&fake_sb, &fake_pr, &fake_run, &fake_snap);
            for ((method, p1), (_, p2)) in theirs.into_iter().zip(nobodys) {
                let r1 = b.call(method, p1.clone()).await;
                let r2 = b.call(method, p2).await;
                let ids = [
                    sb.as_str(),
                    &fake_sb,
                    &al.live,
                    &fake_live,
                    &al.run,
                    &fake_run,
                    &al.snapshot,
                    &fake_snap,
                ];
                assert_eq!(
                    blotted(&r1, &ids),
                    blotted(&r2, &ids),
                    "{user:?} {method} {p1}: another tenant's id and a never-made one answer differently"
                );
                assert_eq!(error_code(&r1), NOT_FOUND, "{user:?} {method}: {r1}");
            }
        }
        // The same key is another sandbox for bob; his scope.dispose leaves alice's alone.
        let key = json!({ "scope": "shared-scope", "thread_id": "t1" });
        let bobs = ok(
            &mut b,
            "sandbox.create",
            json!({ "spec": {"requires": ["run_code", "files_in", "files_out"]}, "key": key }),
        )
        .await;
        assert_ne!(
            bobs["sandbox_id"],
            json!(al.keyed),
            "{user:?}: bob got alice's keyed sandbox"
        );
        let r = b
            .call(
                "files.read",
                json!({ "sandbox_id": bobs["sandbox_id"], "path": "mine" }),
            )
            .await;
        assert_eq!(
            error_code(&r),
            NOT_FOUND,
            "{user:?}: bob's keyed sandbox holds alice's file: {r}"
        );
        ok(
            &mut b,
            "scope.dispose",
            json!({ "scope": "shared-scope", "thread_id": "t1" }),
        )
        .await;
        // Bob's lists hold nothing of alice's.
        let listed = ok(&mut b, "sandbox.list", json!({})).await;
        assert_eq!(listed["sandboxes"], json!([]), "{user:?}: {listed}");
        let snaps = ok(&mut b, "snapshot.list", json!({})).await;
        assert_eq!(snaps["snapshots"], json!([]), "{user:?}: {snaps}");

        // Alice's things are intact, seen through her own connection and on the host.
        let done = loop {
            let m = a.recv().await.expect("alice's run answer");
            if m.get("id").is_some() && m.get("result").is_some() {
                break m;
            }
        };
        assert_eq!(
            result_of(&done)["status"],
            "completed",
            "{user:?}: alice's run was cancelled: {done}"
        );
        let secret = ok(
            &mut a,
            "files.read",
            json!({ "sandbox_id": al.live, "path": "secret.txt" }),
        )
        .await;
        assert_eq!(unb64(&secret["data"]), b"alice's secret\n", "{user:?}");
        let mine = ok(
            &mut a,
            "files.read",
            json!({ "sandbox_id": al.keyed, "path": "mine" }),
        )
        .await;
        assert_eq!(unb64(&mine["data"]), b"alice", "{user:?}");
        let procs = ok(&mut a, "process.list", json!({ "sandbox_id": al.live })).await;
        assert!(
            procs.to_string().contains("\"running\""),
            "{user:?}: alice's process: {procs}"
        );
        let listed = ok(&mut a, "sandbox.list", json!({})).await.to_string();
        assert!(
            listed.contains(&al.paused) && listed.contains("\"paused\""),
            "{user:?}: {listed}"
        );
        let mine_snaps = ok(&mut a, "snapshot.list", json!({})).await.to_string();
        assert!(mine_snaps.contains(&al.snapshot), "{user:?}: {mine_snaps}");
        let snapshots_after = names_in(&state.path().join("snapshots"));
        assert_eq!(
            snapshots_before, snapshots_after,
            "{user:?}: the store changed"
        );
        let resumed = ok(
            &mut a,
            "sandbox.run_code",
            json!({ "sandbox_id": al.paused, "code": "print(kept)" }),
        )
        .await;
        assert_eq!(resumed["stdout"], "alice-41\n", "{user:?}");
        drop(server);
    }
}

fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// One answer's round trip to `method` with `params` (a `not_found`).
async fn rtt(c: &mut WsClient, method: &str, params: &Value) -> Duration {
    let t = Instant::now();
    let r = c.call(method, params.clone()).await;
    let took = t.elapsed();
    assert_eq!(error_code(&r), NOT_FOUND, "{r}");
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_ids_are_refused_in_the_time_a_never_made_one_is() {
    for user in IDENTITIES {
        refused_alike(user).await;
    }
}

async fn refused_alike(user: Option<&str>) {
    let (server, tokens) = WsServer::start_tenants(user, &["alice", "bob"], &[]);
    let mut a = server.connect_as(&tokens["alice"]).await;
    let mut b = server.connect_as(&tokens["bob"]).await;
    let sb = ok(
        &mut a,
        "sandbox.create",
        json!({ "spec": {"requires": ["files_list"]} }),
    )
    .await;
    let sb = sb["sandbox_id"].as_str().unwrap().to_string();
    let theirs = json!({ "sandbox_id": sb, "path": "." });
    let nobodys = json!({ "sandbox_id": never_made(&sb), "path": "." });
    // Pairs of calls back to back, each pair's order alternating, so load on the machine
    // weighs on both alike (blocks of calls one after the other measured the load's swings
    // between the blocks, under busy loops several milliseconds).
    let mut diffs: Vec<f64> = Vec::with_capacity(105);
    for i in 0..105 {
        let (t1, t2) = if i % 2 == 0 {
            let t1 = rtt(&mut b, "files.list", &theirs).await;
            (t1, rtt(&mut b, "files.list", &nobodys).await)
        } else {
            let t2 = rtt(&mut b, "files.list", &nobodys).await;
            (rtt(&mut b, "files.list", &theirs).await, t2)
        };
        diffs.push(t1.as_secs_f64() - t2.as_secs_f64());
    }
    diffs.sort_by(f64::total_cmp);
    let median = diffs[diffs.len() / 2];
    // The same class: neither answer waits on anything the other does not (no sandbox is
    // touched for either); a difference of a whole millisecond per call would be a tell.
    assert!(
        median.abs() < 0.001,
        "{user:?}: theirs minus never made, median of 105 pairs: {:.3} ms",
        median * 1000.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tenants_file_holds_no_secret_and_sighup_reloads_it_without_dropping_connections() {
    for user in IDENTITIES {
        let (server, tokens) = WsServer::start_tenants(user, &["alice"], &[]);
        let file = server.dir.path().join("token");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            !text.contains(&tokens["alice"]),
            "{user:?}: the secret is stored"
        );
        assert!(
            !text.contains(&tokens["alice"]["airlock_".len()..]),
            "{user:?}"
        );
        assert_eq!(
            std::fs::metadata(&file).unwrap().mode() & 0o777,
            0o600,
            "{user:?}"
        );

        let mut a = server.connect_as(&tokens["alice"]).await;
        let carol = token_add(&file, "carol");
        assert!(
            !connects(&server, &carol).await,
            "{user:?}: carol before SIGHUP"
        );
        signal(server.pid(), SIGHUP);
        assert!(
            eventually(&server, &carol, true).await,
            "{user:?}: carol after SIGHUP"
        );
        let mut c = server.connect_as(&carol).await;
        ok(&mut c, "sandbox.list", json!({})).await;

        // Alice's tokens go; her open connection stays, a new one is refused.
        remove(&file, "alice");
        signal(server.pid(), SIGHUP);
        assert!(
            eventually(&server, &tokens["alice"], false).await,
            "{user:?}: alice removed"
        );
        ok(&mut a, "sandbox.list", json!({})).await;

        // A file that does not parse changes nothing: carol still connects, and the log
        // says why the file was not taken.
        let good = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, format!("{good}carol not-a-digest 1\n")).unwrap();
        signal(server.pid(), SIGHUP);
        let t = Instant::now();
        while !server.stderr().contains("tenants file not taken") {
            assert!(t.elapsed() < PATIENCE, "{user:?}: {}", server.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            connects(&server, &carol).await,
            "{user:?}: carol after a bad file"
        );
        assert!(
            !server.stderr().contains(&carol),
            "{user:?}: a secret in the log"
        );
    }
}

const SIGHUP: i32 = 1;

async fn connects(server: &WsServer, token: &str) -> bool {
    server
        .connect_with(Some(&format!("Bearer {token}")))
        .await
        .is_ok()
}

/// Whether `token` comes to connect (`want`) or to be refused, within [`PATIENCE`].
async fn eventually(server: &WsServer, token: &str, want: bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < PATIENCE {
        if connects(server, token).await == want {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

fn remove(file: &std::path::Path, tenant: &str) {
    let st = std::process::Command::new(binary())
        .args(["token", "rm", tenant, "--token-file"])
        .arg(file)
        .status()
        .unwrap();
    assert!(st.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_records_and_lists_name_their_tenant() {
    let (server, tokens) = WsServer::start_tenants(None, &["alice", "bob"], &[]);
    let mut by: BTreeMap<&str, String> = BTreeMap::new();
    for t in ["alice", "bob"] {
        let mut c = server.connect_as(&tokens[t]).await;
        let sb = ok(
            &mut c,
            "sandbox.create",
            json!({ "spec": {"requires": ["run_code"]} }),
        )
        .await;
        let sid = sb["sandbox_id"].as_str().unwrap().to_string();
        let r = ok(
            &mut c,
            "sandbox.run_code",
            json!({ "sandbox_id": sid, "code": "print(1)" }),
        )
        .await;
        by.insert(t, r["run_id"].as_str().unwrap().to_string());
    }
    let records = server.audit_at_least(2, PATIENCE);
    for (t, run) in by {
        let rec = records.iter().find(|r| r["run_id"] == json!(run)).unwrap();
        assert_eq!(rec["tenant"], json!(t), "{rec}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_flooding_requests_is_read_at_its_rate_while_another_is_served_at_once() {
    for user in IDENTITIES {
        let policy = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(
            policy.path(),
            "floor = \"os_process\"\n[tenants.alice]\nmax_requests_per_s = 20\n",
        )
        .unwrap();
        std::fs::set_permissions(policy.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        let policy_arg = policy.path().to_str().unwrap();
        let (server, tokens) =
            WsServer::start_tenants(user, &["alice", "bob"], &["--policy", policy_arg]);
        let mut a = server.connect_as(&tokens["alice"]).await;
        let mut b = server.connect_as(&tokens["bob"]).await;
        // Alice pipelines 300 requests without waiting for an answer.
        let started = Instant::now();
        for _ in 0..300 {
            a.request("sandbox.list", json!({})).await;
        }
        // Bob is answered at once meanwhile, every time.
        for _ in 0..20 {
            let t = Instant::now();
            ok(&mut b, "sandbox.list", json!({})).await;
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "{user:?}: bob waited {:?}",
                t.elapsed()
            );
        }
        // Alice's answers come at her rate: her burst (40) and 20 a second since, no faster.
        let window = Duration::from_secs(3); // `most` below counts its 3 seconds
        let mut answered = 0;
        while let Ok(Some(m)) = tokio::time::timeout_at((started + window).into(), a.recv()).await {
            if m.get("result").is_some() {
                answered += 1;
            }
        }
        let most = 40 + 20 * 3 + 5;
        assert!(
            answered <= most,
            "{user:?}: {answered} answers in {window:?}, above {most}"
        );
        assert!(
            answered >= 40,
            "{user:?}: only {answered} answers: not her burst"
        );
    }
}
