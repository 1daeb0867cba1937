//! `spec.env` (issue 40): environment variables of every run, process and terminal of a
//! sandbox, a call's own `env` winning; bounded and checked like a run's, the names the server
//! sets itself refused; part of what a key's reuse compares; carried to a fork's branches.
use serde_json::{json, Value};

use super::processes::{finished, start_sh};
use super::support::*;

const INVALID_PARAMS: i64 = -32602;

async fn create(c: &mut WsClient, spec: Value, key: Option<Value>) -> Value {
    let mut params = json!({ "spec": spec });
    if let Some(k) = key {
        params["key"] = k;
    }
    c.call("sandbox.create", params).await
}

fn spec(env: Value) -> Value {
    json!({ "requires": ["run_code", "exec", "processes"], "env": env })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandboxs_env_reaches_its_runs_and_processes_and_a_calls_own_wins() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let env = json!({ "GREETING": "hello", "SHARED": "from the spec" });
    let r = create(&mut c, spec(env), None).await;
    let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_owned();
    let code = "import os\nprint(os.environ['GREETING'], os.environ['SHARED'])";
    let r = ok(
        &mut c,
        "sandbox.run_code",
        json!({ "sandbox_id": sid, "code": code }),
    )
    .await;
    assert_eq!(r["stdout"], "hello from the spec\n", "{r}");
    let r = ok(
        &mut c,
        "sandbox.run_code",
        json!({ "sandbox_id": sid, "code": code, "env": {"SHARED": "from the call"} }),
    )
    .await;
    assert_eq!(r["stdout"], "hello from the call\n", "{r}");
    let r = ok(
        &mut c,
        "sandbox.exec",
        json!({ "sandbox_id": sid, "argv": ["sh", "-c", "echo $GREETING"] }),
    )
    .await;
    assert_eq!(r["stdout"], "hello\n", "{r}");
    let pid = start_sh(&mut c, &sid, "echo $GREETING $SHARED").await;
    let (_, out) = finished(&mut c, &pid, 30.0).await;
    assert_eq!(out, "hello from the spec\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_or_reserved_env_name_is_refused_and_a_keys_reuse_compares_env() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    for (env, says) in [
        (json!({ "HTTP_PROXY": "http://evil:1" }), "reserved"),
        (json!({ "no_proxy": "" }), "reserved"),
        (json!({ "1BAD": "x" }), "is not [A-Za-z_][A-Za-z0-9_]*"),
        (json!({ "A": "with\u{0}nul" }), "contains NUL"),
        (big_env(), "byte budget"),
    ] {
        let r = create(&mut c, spec(env.clone()), None).await;
        assert_eq!(error_code(&r), INVALID_PARAMS, "{env}: {r}");
        assert!(r.to_string().contains(says), "{env}: {r}");
    }
    let key = json!({ "scope": "s", "thread_id": "t" });
    let first = create(&mut c, spec(json!({ "A": "1" })), Some(key.clone())).await;
    let id = result_of(&first)["sandbox_id"].as_str().unwrap().to_owned();
    let same = create(&mut c, spec(json!({ "A": "1" })), Some(key.clone())).await;
    assert_eq!(result_of(&same)["sandbox_id"], id.as_str(), "{same}");
    let other = create(&mut c, spec(json!({ "A": "2" })), Some(key)).await;
    assert!(
        other.get("error").is_some(),
        "another env under a live key: {other}"
    );
    assert!(other.to_string().contains("another env"), "{other}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forks_branches_and_a_resumed_sandbox_keep_its_env() {
    let state = super::snapshots::StateDir::new(None);
    let server = state.serve(None);
    let mut c = server.connect().await;
    let spec = json!({ "requires": ["run_code", "snapshot"], "env": { "GREETING": "kept" } });
    let r = create(&mut c, spec, None).await;
    let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_owned();
    let code = json!("import os\nprint(os.environ.get('GREETING'))");
    let r = ok(
        &mut c,
        "sandbox.fork",
        json!({ "sandbox_id": sid, "count": 1 }),
    )
    .await;
    let branch = r["sandbox_ids"][0].as_str().unwrap().to_owned();
    ok(&mut c, "sandbox.pause", json!({ "sandbox_id": sid })).await;
    for id in [&branch, &sid] {
        let r = ok(
            &mut c,
            "sandbox.run_code",
            json!({ "sandbox_id": id, "code": code }),
        )
        .await;
        assert_eq!(r["stdout"], "kept\n", "{id}: {r}");
    }
}

/// 128 variables of 4,500 bytes: within the count, over the setup frame's budget, which would
/// refuse every run of the sandbox.
fn big_env() -> Value {
    let v = "x".repeat(4_500);
    Value::Object((0..128).map(|i| (format!("V{i}"), json!(v))).collect())
}
