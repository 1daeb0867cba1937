//! Faults on either side of the broker, each followed by a run that must succeed: the
//! executor SIGKILLed mid-tool-call, the orchestrator vanishing mid-run, a guest writing
//! garbage on its socket, and an orchestrator that never answers a tool call.
use std::time::Duration;

use serde_json::json;

use super::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn fault_executor_sigkilled_mid_tool_call() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "execute", "params": {"code": "call_tool('echo', {})\nprint('unreachable')"}})).await;
    let call = c.recv().await.unwrap();
    assert_eq!(call["method"], "call_tool");
    let stages = executors(server.pid());
    assert_eq!(stages.len(), 1, "{stages:?}");
    signal(stages[0], 9);
    let r = c.finish(1, &echo_tools).await;
    // The late answer must be harmless (it finds no pending call).
    c.send(&tool_answer(&call["id"], Ok(json!({})))).await;
    let r = result_of(&r);
    assert_eq!(r["status"], "killed", "{r}");
    assert_eq!(r["signal"], 9);
    assert!(r["stdout"].as_str().unwrap().is_empty());
    assert!(settle(server.pid(), Duration::from_secs(10)).is_empty());
    let next = c
        .execute(
            2,
            json!({"code": "print(call_tool('add', {'a': 1, 'b': 1}))"}),
            &echo_tools,
        )
        .await;
    assert_eq!(result_of(&next)["stdout"], "2\n");
    assert!(server.run_dirs().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn fault_client_vanishes_mid_run() {
    let server = WsServer::start(&[]);
    for hold in ["in a tool call", "sleeping"] {
        let mut c = server.connect().await;
        let code = match hold {
            "in a tool call" => "call_tool('echo', {})",
            _ => "import time\ntime.sleep(60)",
        };
        c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "execute", "params": {"code": code}}))
            .await;
        if hold == "in a tool call" {
            assert_eq!(c.recv().await.unwrap()["method"], "call_tool");
        } else {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        assert_eq!(executors(server.pid()).len(), 1, "{hold}");
        // Vanish without a close handshake.
        drop(c);
        let left = settle(server.pid(), Duration::from_secs(10));
        assert!(left.is_empty(), "{hold}: {left:?}");
    }
    let audit = server.audit_at_least(2, Duration::from_secs(5));
    assert_eq!(audit.len(), 2);
    assert!(
        audit.iter().all(|a| a["status"] == "cancelled"),
        "{audit:?}"
    );
    assert!(audit
        .iter()
        .all(|a| a["wall_time_ms"].as_f64().unwrap() < 20_000.0));
    let mut c = server.connect().await;
    let ok = c
        .execute(1, json!({"argv": ["/bin/echo", "next"]}), &echo_tools)
        .await;
    assert_eq!(result_of(&ok)["stdout"], "next\n");
    assert!(server.run_dirs().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn fault_guest_writes_garbage_on_its_socket() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let garbage =
        "import os, time\nos.write(3, b'Content-Length: nope\\r\\n\\r\\n')\ntime.sleep(30)";
    let r = c.execute(1, json!({"code": garbage}), &echo_tools).await;
    let r = result_of(&r);
    assert_eq!(r["status"], "protocol_error", "{r}");
    assert_eq!(r["error"]["code"], -32005);
    let next = c
        .execute(
            2,
            json!({"code": "print(call_tool('echo', 'ok'))"}),
            &echo_tools,
        )
        .await;
    assert_eq!(result_of(&next)["stdout"], "ok\n");
    assert!(settle(server.pid(), Duration::from_secs(10)).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn fault_an_unanswered_tool_call_times_out_as_a_tool_error() {
    let server = WsServer::start(&["--tool-timeout", "1"]);
    let mut c = server.connect().await;
    let code = "try:\n    call_tool('echo', {})\nexcept ToolError as e:\n    print(e.code, 'did not answer' in e.message)";
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "execute", "params": {"code": code}}))
        .await;
    let call = c.recv().await.unwrap();
    let r = c.finish(1, &echo_tools).await;
    assert_eq!(result_of(&r)["stdout"], "-32001 True\n");
    // Answering now finds nothing waiting, and the next run is unaffected.
    c.send(&tool_answer(&call["id"], Ok(json!(1)))).await;
    let next = c
        .execute(2, json!({"argv": ["/bin/true"]}), &echo_tools)
        .await;
    assert_eq!(result_of(&next)["status"], "completed");
    assert_eq!(server.audit()[0]["tool_calls"][0]["outcome"], "tool_error");
}
