//! The WebSocket transport: the outer protocol end to end, auth, refusals before the run,
//! the size cap, queueing, shutdown and the audit record.
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use super::support::*;

const TOOLS_PROGRAM: &str = "\
print(call_tool('add', {'a': 2, 'b': 3}))
print(call_tool('echo', {'x': [1, 'two']}))
try:
    call_tool('fail', {})
except ToolError as e:
    print('tool error', e.code, e.message)
try:
    call_tool('nope')
except ToolError as e:
    print('unknown', e.code)
";

#[tokio::test(flavor = "multi_thread")]
async fn ws_execute_relays_tool_calls_and_returns_one_result() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    c.send(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "execute", "params": {"code": TOOLS_PROGRAM}}),
    )
    .await;
    let mut seen_ids = Vec::new();
    let resp = loop {
        let m = c.recv().await.unwrap();
        if m["method"] == "call_tool" {
            let id = m["id"]
                .as_str()
                .expect("broker-minted ids are strings")
                .to_string();
            assert!(!seen_ids.contains(&id), "ids are unique: {id}");
            assert!(m["params"]["run_id"].is_string(), "{m}");
            seen_ids.push(id);
            let outcome = echo_tools(m["params"]["tool"].as_str().unwrap(), &m["params"]["args"]);
            c.send(&tool_answer(&m["id"], outcome)).await;
        } else {
            break m;
        }
    };
    assert_eq!(resp["id"], 7);
    let r = result_of(&resp);
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(
        r["stdout"],
        "5\n{'x': [1, 'two']}\ntool error -32001 it failed on purpose\nunknown -32013\n"
    );
    assert_eq!(r["tool_calls"], 4);
    assert_eq!(seen_ids.len(), 4);
    // The guest's own ids start at 101; the orchestrator never sees them.
    assert!(
        seen_ids.iter().all(|i| !i.starts_with("10")),
        "{seen_ids:?}"
    );
    let run_id = r["run_id"].as_str().unwrap().to_string();
    drop(c);
    let audit = server.audit_at_least(1, Duration::from_secs(5));
    assert_eq!(audit.len(), 1, "{audit:?}");
    let a = &audit[0];
    assert_eq!(a["run_id"], run_id.as_str());
    assert_eq!(a["transport"], "websocket");
    assert_eq!(a["status"], "completed");
    assert_eq!(a["limits"]["timeout_s"], 30.0);
    assert!(a["peak_rss_bytes"].as_u64().unwrap() > 0, "{a}");
    let outcomes: Vec<&str> = a["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["ok", "ok", "tool_error", "unknown_tool"]);
    let names: Vec<&str> = a["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["add", "echo", "fail", "nope"]);
    assert!(a["tool_calls"][0]["latency_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(
        settle(server.pid(), Duration::from_secs(10)),
        Vec::<i32>::new()
    );
    assert!(server.run_dirs().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn ws_a_second_execute_while_busy_is_refused_and_the_first_is_unaffected() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let code = "v = call_tool('echo', {'n': 1})\nprint('got', v['n'])";
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "execute", "params": {"code": code}}))
        .await;
    // Hold the first run inside its tool call while the second execute arrives.
    let call = c.recv().await.unwrap();
    assert_eq!(call["method"], "call_tool");
    c.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "execute", "params": {"argv": ["/bin/true"]}}),
    )
    .await;
    let busy = c.recv().await.unwrap();
    assert_eq!(busy["id"], 2);
    assert_eq!(error_code(&busy), -32006);
    c.send(&tool_answer(&call["id"], Ok(json!({"n": 1})))).await;
    let first = c.finish(1, &echo_tools).await;
    assert_eq!(result_of(&first)["stdout"], "got 1\n");
    // And the connection serves the next run.
    let next = c
        .execute(3, json!({"argv": ["/bin/echo", "again"]}), &echo_tools)
        .await;
    assert_eq!(result_of(&next)["stdout"], "again\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn ws_sequential_runs_each_get_a_fresh_executor() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let code = "import os\nprint(sorted(os.listdir('.')))\nopen('marker', 'w').write('x')\nprint(os.getcwd())";
    let a = c.execute(1, json!({"code": code}), &echo_tools).await;
    let b = c.execute(2, json!({"code": code}), &echo_tools).await;
    let (a, b) = (result_of(&a), result_of(&b));
    assert!(a["stdout"].as_str().unwrap().starts_with("[]\n"), "{a}");
    assert!(
        b["stdout"].as_str().unwrap().starts_with("[]\n"),
        "the second run saw the first's files: {b}"
    );
    assert_ne!(a["run_id"], b["run_id"]);
    assert!(server.run_dirs().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn ws_warm_executors_serve_one_run_each_with_every_layer() {
    let server = WsServer::start(&["--warm", "2"]);
    let mut c = server.connect().await;
    // Every run, warm or cold, sees an empty work dir of its own, no fork, no network, and the
    // broker's environment nowhere.
    let code = "import os, socket\nprint(sorted(os.listdir('.')), os.getcwd())\nopen('m','w').write('x')\ntry:\n    os.fork(); print('FORKED')\nexcept OSError:\n    print('no fork')\ntry:\n    socket.socket(); print('SOCKET')\nexcept OSError:\n    print('no socket')";
    let mut warm = 0;
    for id in 1..=4 {
        // Give the pool a moment to refill between runs, as a quiet server would.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let r = result_of(&c.execute(id, json!({"code": code}), &echo_tools).await).clone();
        assert_eq!(r["status"], "completed", "{r}");
        let out = r["stdout"].as_str().unwrap();
        assert!(
            out.starts_with("[] ") && out.contains("no fork\nno socket"),
            "{out}"
        );
        assert_eq!(out.lines().next(), Some("[] /work"), "{out}");
        if r["warm"] == true {
            warm += 1;
        }
    }
    assert!(warm >= 2, "the pool served {warm} of 4 runs");
}

#[tokio::test(flavor = "multi_thread")]
async fn ws_requests_refused_before_the_run_get_typed_errors() {
    let server = WsServer::start(&["--ceiling-timeout", "20", "--ceiling-memory", "256"]);
    let mut c = server.connect().await;
    let cases: Vec<(Value, i64, &str)> = vec![
        (
            json!({"code": "x".repeat(CAP - 512)}),
            -32008,
            "program too large",
        ),
        (
            json!({"code": "1", "limits": {"timeout_s": 21}}),
            -32602,
            "limits.timeout_s",
        ),
        (
            json!({"code": "1", "limits": {"memory_mb": 257}}),
            -32602,
            "limits.memory_mb",
        ),
        (json!({"code": "1", "limits": {"cpus": 2}}), -32602, "cpus"),
        (
            json!({"code": "1", "argv": ["/bin/true"]}),
            -32602,
            "not both",
        ),
        (json!({}), -32602, "code"),
        (
            json!({"code": "1", "env": {"BAD NAME": "v"}}),
            -32602,
            "env",
        ),
    ];
    for (i, (params, code, needle)) in cases.into_iter().enumerate() {
        let id = i as i64 + 10;
        c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "execute", "params": params}))
            .await;
        let r = c.recv().await.unwrap();
        assert_eq!(r["id"], id, "{r}");
        assert_eq!(error_code(&r), code, "{r}");
        let msg = r["error"]["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{needle:?} not in {msg:?}");
    }
    c.send(&json!({"jsonrpc": "2.0", "id": "x", "method": "shell", "params": {}}))
        .await;
    let r = c.recv().await.unwrap();
    assert_eq!((r["id"].clone(), error_code(&r)), (json!("x"), -32601));
    // Within the ceilings is granted exactly.
    let ok = c
        .execute(
            99,
            json!({"argv": ["/bin/true"], "limits": {"timeout_s": 20, "memory_mb": 256}}),
            &echo_tools,
        )
        .await;
    assert_eq!(result_of(&ok)["status"], "completed");
    assert_eq!(server.audit().last().unwrap()["limits"]["memory_mb"], 256);
    assert_eq!(
        server.audit().len(),
        1,
        "refused requests never became runs"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ws_unauthenticated_upgrades_are_refused() {
    let server = WsServer::start(&[]);
    let wrong = format!("Bearer {}x", server.token);
    let basic = format!("Basic {}", server.token);
    for auth in [
        None,
        Some(wrong.as_str()),
        Some(basic.as_str()),
        Some("Bearer "),
    ] {
        match server.connect_with(auth).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
                assert_eq!(resp.status(), 401, "{auth:?}");
                let body = String::from_utf8(resp.body().clone().unwrap_or_default()).unwrap();
                assert!(body.contains("-32011"), "{body}");
            }
            Err(e) => panic!("{auth:?}: unexpected error {e}"),
            Ok(_) => panic!("{auth:?}: an unauthenticated connection was accepted"),
        }
    }
    let mut c = server.connect().await;
    let ok = c
        .execute(1, json!({"argv": ["/bin/true"]}), &echo_tools)
        .await;
    assert_eq!(result_of(&ok)["status"], "completed");
}

#[test]
fn serve_refuses_unsafe_configurations() {
    let cases: [(&[&str], &str); 3] = [
        (
            &["serve", "--listen", "127.0.0.1:0"],
            "without authentication",
        ),
        (
            &["serve", "--listen", "0.0.0.0:0", "--insecure-no-auth"],
            "--allow-remote",
        ),
        (
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--insecure-no-auth",
                "--max-timeout-nope",
            ],
            "unexpected argument",
        ),
    ];
    for (args, needle) in cases {
        let out = Command::new(binary())
            .args(args)
            .env_remove("AIRLOCK_TOKEN")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} started");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let out = Command::new(binary())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("AIRLOCK_TOKEN", "short")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("shorter than"));
}

#[tokio::test(flavor = "multi_thread")]
async fn ws_an_over_cap_message_is_refused_at_the_edge() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let code = "x".repeat(CAP + 10);
    c.send_text(
        json!({"jsonrpc": "2.0", "id": 1, "method": "execute", "params": {"code": code}})
            .to_string(),
    )
    .await;
    let (got, close) = c.recv_until_close().await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(error_code(&got[0]), -32008);
    assert!(got[0]["error"]["message"].as_str().unwrap().contains("cap"));
    assert_eq!(close, Some(1009));
    let mut c = server.connect().await;
    let ok = c
        .execute(2, json!({"argv": ["/bin/true"]}), &echo_tools)
        .await;
    assert_eq!(result_of(&ok)["status"], "completed");
}

#[tokio::test(flavor = "multi_thread")]
async fn ws_undecodable_messages_are_answered_and_the_connection_goes_on() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    for (text, code) in [
        ("not json", -32700),
        ("[1, 2]", -32600),
        (r#"{"jsonrpc":"1.0","id":1,"method":"execute"}"#, -32600),
        (
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"execute"}"#,
            -32600,
        ),
    ] {
        c.send_text(text.into()).await;
        let r = c.recv().await.unwrap();
        assert_eq!(r["id"], Value::Null, "{r}");
        assert_eq!(error_code(&r), code, "{text}: {r}");
    }
    let ok = c
        .execute(5, json!({"argv": ["/bin/echo", "fine"]}), &echo_tools)
        .await;
    assert_eq!(result_of(&ok)["stdout"], "fine\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn ws_sigterm_cancels_in_flight_runs_and_exits_zero() {
    // No drain grace: the run in flight is cancelled at once (serve::drain tests the grace).
    let server = WsServer::start(&["--drain-grace", "0"]);
    let mut a = server.connect().await;
    let mut idle = server.connect().await;
    let code = "call_tool('echo', {})\nimport time\ntime.sleep(60)";
    a.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "execute", "params": {"code": code}}))
        .await;
    let call = a.recv().await.unwrap();
    a.send(&tool_answer(&call["id"], Ok(json!({})))).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !executors(server.pid()).is_empty(),
        "the run should be executing"
    );
    let pid = server.pid();
    let status = tokio::task::spawn_blocking(move || {
        let mut server = server;
        signal(pid, libc_sigterm());
        wait_bounded(&mut server.child, Duration::from_secs(30)).map(|s| (s, server))
    });
    let (got, close) = a.recv_until_close().await;
    assert_eq!(got.len(), 1, "{got:?}");
    let r = result_of(&got[0]);
    assert_eq!(r["status"], "cancelled", "{r}");
    assert_eq!(close, Some(1001));
    let (_, idle_close) = idle.recv_until_close().await;
    assert_eq!(idle_close, Some(1001));
    let (status, server) = status.await.unwrap().expect("server did not exit");
    assert!(status.success(), "{status:?}");
    assert!(descendants(pid).is_empty());
    assert!(server.run_dirs().is_empty());
    assert_eq!(server.audit().last().unwrap()["status"], "cancelled");
}

#[tokio::test(flavor = "multi_thread")]
async fn ws_queued_runs_wait_for_a_slot_and_honour_cancellation() {
    let server = WsServer::start(&["--max-concurrent-runs", "1"]);
    let mut a = server.connect().await;
    a.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "execute", "params": {"code": "print(call_tool('echo', 'a'))"}})).await;
    let call = a.recv().await.unwrap();
    // The only slot is held; b queues, then vanishes.
    let mut b = server.connect().await;
    b.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "execute", "params": {"argv": ["/bin/true"]}}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(b);
    // c queues behind a and runs once a is done.
    let mut c = server.connect().await;
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "execute", "params": {"argv": ["/bin/echo", "c"]}})).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    a.send(&tool_answer(&call["id"], Ok(json!("a")))).await;
    assert_eq!(result_of(&a.finish(1, &echo_tools).await)["stdout"], "a\n");
    let rc = c.finish(1, &echo_tools).await;
    assert_eq!(result_of(&rc)["stdout"], "c\n");
    let audit = server.audit_at_least(2, Duration::from_secs(5));
    assert_eq!(
        audit.len(),
        2,
        "the cancelled queued run never started: {audit:?}"
    );
    assert!(
        audit[1]["queued_ms"].as_f64().unwrap() > 100.0,
        "{}",
        audit[1]
    );
}
