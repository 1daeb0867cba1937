//! Tenants red-teamed (issue 29) through the real binary: what a hostile tenant tried beyond
//! `serve::tenants`, each asserted by what the other tenant and the host see.
//!
//! - one tenant's slow resume must not hold up another's (the resume gate is per sandbox);
//! - a tenants file that lists one digest twice is refused (a token would act for whichever
//!   tenant came first);
//! - a `key` equal to another tenant's *paused* sandbox's key resumes nothing of theirs;
//! - paused records from before tenants (no `tenant`) belong to no tenant of a tenants file.
//!
//! As root and as `airlock-test` where the server's identity matters.
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::support::*;

const IDENTITIES: [Option<&str>; 2] = [None, Some("airlock-test")];
const NOT_FOUND: i64 = -32016;

/// Bob's heavy sandbox: many files and a few hundred MiB of incompressible bytes, so that
/// reading, verifying and restoring its snapshot takes a while.
const HEAVY: &str = "\
import os
for i in range(40000):
    with open(f'/work/f{i}', 'wb') as f:
        f.write(os.urandom(256))
for i in range(32):
    with open(f'/work/big{i}', 'wb') as f:
        for _ in range(8):
            f.write(os.urandom(1 << 20))
print('ok')
";
/// How many heavy sandboxes bob pauses and then resumes at once.
const BOBS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenants_slow_resumes_do_not_hold_up_anothers() {
    let _shmem = SHMEM.lock().await;
    for user in IDENTITIES {
        slow_resumes_apart(user).await;
    }
}

async fn slow_resumes_apart(user: Option<&str>) {
    let (_state, _server, mut a, mut b) = alice_and_bob_on_a_state_dir(user).await;
    let spec = json!({ "spec": {"requires": ["run_code", "files_in", "files_out", "snapshot"],
                                "limits": {"timeout_s": 120}} });
    let mut bobs = Vec::new();
    for _ in 0..BOBS {
        let sid = create(&mut b, spec.clone()).await;
        let code = json!({ "sandbox_id": sid, "code": HEAVY });
        let filled = ok(&mut b, "sandbox.run_code", code).await;
        assert_eq!(filled["stdout"], "ok\n", "{user:?}: {filled}");
        ok(&mut b, "sandbox.pause", json!({ "sandbox_id": sid })).await;
        bobs.push(sid);
    }
    let alices = create(&mut a, spec).await;
    let note = json!({ "sandbox_id": alices, "path": "note", "data": b64(b"alice") });
    ok(&mut a, "files.write", note).await;
    ok(&mut a, "sandbox.pause", json!({ "sandbox_id": alices })).await;

    // Bob resumes his, all at once; a moment later (his resumes under way) alice resumes hers.
    let t0 = Instant::now();
    let bob_resumes = async {
        let mut asked = Vec::new();
        for sid in &bobs {
            asked.push(
                b.request("sandbox.resume", json!({ "sandbox_id": sid }))
                    .await,
            );
        }
        for id in asked {
            let (r, _) = b.wait_for(id, &no_tools).await;
            assert!(r.get("error").is_none(), "{user:?}: bob's resume: {r}");
        }
        t0.elapsed()
    };
    let alice_resumes = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let start = t0.elapsed();
        ok(&mut a, "sandbox.resume", json!({ "sandbox_id": alices })).await;
        (start, t0.elapsed())
    };
    let (bob_done, (alice_start, alice_done)) = tokio::join!(bob_resumes, alice_resumes);
    assert!(
        bob_done > alice_start,
        "{user:?}: bob's resumes ({bob_done:?}) ended before alice's began ({alice_start:?}): \
         nothing proved"
    );
    assert!(
        alice_done < bob_done,
        "{user:?}: alice's resume (from {alice_start:?} to {alice_done:?}) waited for bob's \
         (all done at {bob_done:?}): one tenant's resumes hold up every other tenant's"
    );
    let note = json!({ "sandbox_id": alices, "path": "note" });
    let note = ok(&mut a, "files.read", note).await;
    assert_eq!(unb64(&note["data"]), b"alice", "{user:?}");
}

/// `airlock serve` on `token_file` as `user`: Ok(its listening line) or Err(its stderr) when
/// it exits first.
fn serve_on(user: Option<&str>, dir: &std::path::Path) -> Result<String, String> {
    let mut cmd = airlock_as(user, &[], dir);
    let mut child = cmd
        .args(["serve", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(dir.join("token"))
        .env_remove("AIRLOCK_TOKEN")
        .env("TMPDIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    if line.starts_with("listening on") {
        let _ = child.kill();
        let _ = child.wait();
        return Ok(line);
    }
    let status =
        wait_bounded(&mut child, PATIENCE).expect("the server neither listened nor exited");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{err}");
    Err(err)
}

#[test]
fn a_tenants_file_that_lists_one_digest_twice_is_refused() {
    for user in IDENTITIES {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        let alice = token_add(&file, "alice");
        // Bob's line carries alice's digest (a line copied and renamed by hand): her token
        // would act for whichever of the two comes first.
        let text = std::fs::read_to_string(&file).unwrap();
        let digest = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .flat_map(str::split_whitespace)
            .find(|f| f.starts_with("sha256:"))
            .unwrap()
            .to_string();
        std::fs::write(&file, format!("bob {digest} 1\n{text}")).unwrap();
        let started = serve_on(user, dir.path());
        let err = started.expect_err(&format!(
            "{user:?}: a server started on a file where one token is two tenants'"
        ));
        assert!(
            err.contains("line") && err.contains("twice"),
            "{user:?}: {err}"
        );
        assert!(
            !err.contains(&digest) && !err.contains(&alice),
            "{user:?}: {err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_equal_to_another_tenants_paused_sandbox_resumes_nothing_of_theirs() {
    for user in IDENTITIES {
        let (state, _server, mut a, mut b) = alice_and_bob_on_a_state_dir(user).await;
        let key = json!({ "scope": "s", "thread_id": "t" });
        let spec = json!({ "requires": ["run_code", "snapshot"], "stateful": true });
        let alices = create(&mut a, json!({ "spec": spec, "key": key })).await;
        ok(
            &mut a,
            "sandbox.run_code",
            json!({ "sandbox_id": alices, "code": "secret = 'alice-7'" }),
        )
        .await;
        let paused = ok(&mut a, "sandbox.pause", json!({ "sandbox_id": alices })).await;
        let snapshot = paused["snapshot_id"].as_str().unwrap().to_string();

        let bobs = create(&mut b, json!({ "spec": spec, "key": key })).await;
        assert_ne!(
            bobs, alices,
            "{user:?}: bob's create resumed alice's sandbox"
        );
        let r = ok(
            &mut b,
            "sandbox.run_code",
            json!({ "sandbox_id": bobs, "code": "print(globals().get('secret'))" }),
        )
        .await;
        assert_eq!(
            r["stdout"], "None\n",
            "{user:?}: bob sees alice's state: {r}"
        );

        let listed = ok(&mut a, "sandbox.list", json!({})).await;
        let mine = &listed["sandboxes"][0];
        assert_eq!(
            (&mine["sandbox_id"], &mine["state"], &mine["snapshot_id"]),
            (&json!(alices), &json!("paused"), &json!(snapshot)),
            "{user:?}: {listed}"
        );
        assert!(
            state.path().join("snapshots").read_dir().unwrap().count() > 0,
            "{user:?}"
        );
        let again = ok(
            &mut a,
            "sandbox.run_code",
            json!({ "sandbox_id": alices, "code": "print(secret)" }),
        )
        .await;
        assert_eq!(again["stdout"], "alice-7\n", "{user:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_sandboxes_from_before_tenants_belong_to_no_tenant() {
    for user in IDENTITIES {
        let state = state_dir(user);
        let dir = state.path().to_str().unwrap().to_string();
        // A single-token server pauses a sandbox; its record then loses `tenant`, as one
        // written before tenants existed.
        let single = WsServer::start_as(user, &["--state-dir", &dir]);
        let mut c = single.connect().await;
        let sid = create(
            &mut c,
            json!({ "spec": {"requires": ["run_code", "snapshot"]} }),
        )
        .await;
        let snap = ok(&mut c, "sandbox.pause", json!({ "sandbox_id": sid })).await["snapshot_id"]
            .as_str()
            .unwrap()
            .to_string();
        drop(c);
        drop(single);
        let record = state.path().join("paused").join(format!("{sid}.json"));
        let mut v: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
        v.as_object_mut().unwrap().remove("tenant");
        std::fs::write(&record, v.to_string()).unwrap();

        let (server, tokens) =
            WsServer::start_tenants(user, &["alice", "bob"], &["--state-dir", &dir]);
        for t in ["alice", "bob"] {
            let mut c = server.connect_as(&tokens[t]).await;
            let listed = ok(&mut c, "sandbox.list", json!({})).await;
            assert_eq!(listed["sandboxes"], json!([]), "{user:?} {t}: {listed}");
            let snaps = ok(&mut c, "snapshot.list", json!({})).await;
            assert_eq!(snaps["snapshots"], json!([]), "{user:?} {t}: {snaps}");
            for (method, params) in [
                ("sandbox.resume", json!({ "sandbox_id": sid })),
                (
                    "sandbox.run_code",
                    json!({ "sandbox_id": sid, "code": "1" }),
                ),
                ("sandbox.dispose", json!({ "sandbox_id": sid })),
                ("snapshot.remove", json!({ "snapshot_id": snap })),
                (
                    "sandbox.create",
                    json!({ "spec": {"requires": ["run_code"]}, "from_snapshot": snap }),
                ),
            ] {
                let r = c.call(method, params).await;
                assert_eq!(error_code(&r), NOT_FOUND, "{user:?} {t} {method}: {r}");
            }
        }
        assert!(record.exists(), "{user:?}: the old record was touched");
    }
}
