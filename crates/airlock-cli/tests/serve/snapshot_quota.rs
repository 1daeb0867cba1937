//! A tenant's `max_snapshots` is a reservation, attacked through the real binary as root and as
//! `airlock-test`: alice (`max_snapshots = 2`) fires a snapshot of each of her six live stateful
//! sandboxes at once, while bob snapshots his own. Exactly two of hers are made; the rest are
//! `over_capacity` with `data.kind` `TenantMaxSnapshots` and a message naming the quota, and
//! neither `snapshot.list` nor the state directory's files (snapshots, marks, paused records)
//! hold more than two of hers. Snapshots refused `busy` after their reservation give it back;
//! a mixed burst of pauses and snapshots after she removed hers is held to two again; bob is
//! served throughout. (Checked against the count-then-capture code this replaced: every one of
//! the six was made.)
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{json, Value};

use super::support::*;

const OVER_CAPACITY: i64 = -32018;
const BUSY: i64 = -32006;
const QUOTA: usize = 2;
/// Alice's live stateful sandboxes, each snapshotted at once.
const SANDBOXES: usize = 6;
const POLICY: &str = "floor = \"os_process\"\n[limits]\ndisk_mb = 64\n\
                      [tenants.alice]\nmax_snapshots = 2\n[tenants.bob]\nmax_snapshots = 2\n";

/// A stateful sandbox that may be snapshotted, holding a file and a variable of its own (so
/// no two snapshots share an id).
async fn stateful(c: &mut WsClient, tenant: &str, n: usize) -> String {
    let spec = json!({"spec": {"requires": ["run_code", "files_in", "files_out", "files_list",
                                            "snapshot"], "stateful": true}});
    let sid = create(c, spec).await;
    let code = format!("seed = '{tenant}-{n}'\nopen('/work/seed', 'w').write(seed)\nprint(seed)");
    let out = ok(
        c,
        "sandbox.run_code",
        json!({"sandbox_id": sid, "code": code}),
    )
    .await;
    assert_eq!(out["stdout"], format!("{tenant}-{n}\n"), "{out}");
    sid
}

/// Send every `(method, sandbox_id)` at once on `c`, then read every answer.
async fn all_at_once(c: &mut WsClient, calls: &[(&str, &str)]) -> Vec<Value> {
    let mut ids = Vec::new();
    for (method, sid) in calls {
        ids.push(c.request(method, json!({"sandbox_id": sid})).await);
    }
    let mut answers = Vec::new();
    for id in ids {
        answers.push(c.wait_for(id, &no_tools).await.0);
    }
    answers
}

/// The refusal of the quota: `over_capacity`, its kind, a message naming it and the tenant.
fn assert_quota_refusal(r: &Value) {
    assert_eq!(error_code(r), OVER_CAPACITY, "{r}");
    assert_eq!(r["error"]["data"]["kind"], "TenantMaxSnapshots", "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("tenant alice") && msg.contains("its max_snapshots of 2"),
        "{msg}"
    );
}

/// Made answers and quota refusals among `answers` (anything else fails the test).
fn made_and_refused(answers: &[Value]) -> (usize, usize) {
    let made = answers.iter().filter(|r| r.get("result").is_some()).count();
    answers
        .iter()
        .filter(|r| r.get("result").is_none())
        .for_each(assert_quota_refusal);
    (made, answers.len() - made)
}

/// The caller's entries in its `snapshot.list`.
async fn listed(c: &mut WsClient) -> Vec<Value> {
    let r = ok(c, "snapshot.list", json!({})).await;
    r["snapshots"].as_array().unwrap().clone()
}

fn names_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default()
}

/// What the state directory holds of `tenant`'s: the marks naming it and its paused records.
fn held_on_disk(state: &Path, tenant: &str) -> usize {
    let kept = names_in(&state.join("kept"))
        .iter()
        .filter(|id| {
            let body = std::fs::read_to_string(state.join("kept").join(id)).unwrap_or_default();
            body.lines().any(|l| l == tenant)
        })
        .count();
    let paused = names_in(&state.join("paused"))
        .iter()
        .filter(|f| {
            let body = std::fs::read_to_string(state.join("paused").join(f)).unwrap_or_default();
            serde_json::from_str::<Value>(&body).unwrap()["tenant"] == tenant
        })
        .count();
    kept + paused
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_snapshots_and_pauses_never_pass_a_tenants_max_snapshots() {
    for user in identities() {
        let state = state_dir(user);
        let policy = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(policy.path(), POLICY).unwrap();
        std::fs::set_permissions(policy.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        let extra = [
            "--policy",
            policy.path().to_str().unwrap(),
            "--state-dir",
            state.path().to_str().unwrap(),
            "--memory",
            "256",
        ];
        let (server, tokens) = WsServer::start_tenants(user, &["alice", "bob"], &extra);
        let mut a = server.connect_as(&tokens["alice"]).await;
        let mut b = server.connect_as(&tokens["bob"]).await;
        let mut mine = Vec::new();
        for n in 0..SANDBOXES {
            mine.push(stateful(&mut a, "alice", n).await);
        }
        let his = [
            stateful(&mut b, "bob", 0).await,
            stateful(&mut b, "bob", 1).await,
        ];

        // Snapshots refused `busy` (a cell in flight) after their reservation give it back.
        let cell = json!({"sandbox_id": mine[0], "code": "import time\ntime.sleep(2)"});
        let sleeping = a.request("sandbox.run_code", cell).await;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let busy = [("sandbox.snapshot", mine[0].as_str()); 3];
        for r in all_at_once(&mut a, &busy).await {
            assert_eq!(error_code(&r), BUSY, "{user:?}: {r}");
        }
        result_of(&a.wait_for(sleeping, &no_tools).await.0);

        // The attack: every sandbox of hers snapshotted at once, bob's beside them.
        let burst: Vec<(&str, &str)> = mine.iter().map(|s| ("sandbox.snapshot", &**s)).collect();
        let his_burst: Vec<(&str, &str)> = his.iter().map(|s| ("sandbox.snapshot", &**s)).collect();
        let (hers, bobs) =
            tokio::join!(all_at_once(&mut a, &burst), all_at_once(&mut b, &his_burst));
        assert_eq!(
            made_and_refused(&hers),
            (QUOTA, SANDBOXES - QUOTA),
            "{user:?}: {hers:?}"
        );
        for r in &bobs {
            result_of(r);
        }
        // The store holds two of hers and two of his, no more.
        let her_list = listed(&mut a).await;
        assert_eq!(her_list.len(), QUOTA, "{user:?}: {her_list:?}");
        assert_eq!(listed(&mut b).await.len(), 2, "{user:?}");
        assert_eq!(held_on_disk(state.path(), "alice"), QUOTA, "{user:?}");
        assert_eq!(held_on_disk(state.path(), "bob"), 2, "{user:?}");
        assert_eq!(
            names_in(&state.path().join("snapshots")).len(),
            QUOTA + 2,
            "{user:?}"
        );

        // Her snapshots removed, a burst of pauses and snapshots is held to two again.
        for s in &her_list {
            ok(
                &mut a,
                "snapshot.remove",
                json!({"snapshot_id": s["snapshot_id"]}),
            )
            .await;
        }
        let mixed: Vec<(&str, &str)> = mine
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    if i % 2 == 0 {
                        "sandbox.pause"
                    } else {
                        "sandbox.snapshot"
                    },
                    &**s,
                )
            })
            .collect();
        let answers = all_at_once(&mut a, &mixed).await;
        assert_eq!(
            made_and_refused(&answers),
            (QUOTA, SANDBOXES - QUOTA),
            "{user:?}: {answers:?}"
        );
        assert_eq!(listed(&mut a).await.len(), QUOTA, "{user:?}");
        assert_eq!(held_on_disk(state.path(), "alice"), QUOTA, "{user:?}");
        // Bob is not counted against her: he removes one of his and makes another.
        let his_list = listed(&mut b).await;
        ok(
            &mut b,
            "snapshot.remove",
            json!({"snapshot_id": his_list[0]["snapshot_id"]}),
        )
        .await;
        ok(
            &mut b,
            "sandbox.run_code",
            json!({"sandbox_id": his[0], "code": "seed = 'again'"}),
        )
        .await;
        ok(&mut b, "sandbox.snapshot", json!({"sandbox_id": his[0]})).await;
        assert_eq!(held_on_disk(state.path(), "bob"), 2, "{user:?}");
        drop(server);
    }
}
