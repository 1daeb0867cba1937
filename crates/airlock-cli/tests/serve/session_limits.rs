//! A client that pipelines requests without reading the answers holds a bounded part of the
//! server: at most 16 session methods per connection are in flight, one more is refused
//! `over_capacity` at once (`run.cancel` always served), and other connections are served
//! meanwhile. Also: `run.cancel` reaches an `execute` run, and `output`/`call_tool` name their
//! sandbox.
use std::time::{Duration, Instant};

use serde_json::json;

use super::support::*;

fn rss_kib(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_pipelining_reads_without_reading_answers_holds_bounded_memory() {
    let server = WsServer::start(&[]);
    let mut a = server.connect().await;
    let sid = result_of(&a.call("sandbox.create", json!({"spec": {}})).await)["sandbox_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A 512 KiB file, then 2000 reads of all of it (1 GiB of answers) that are never read.
    let data = b64(&vec![7u8; 512 * 1024]);
    let w = a
        .call(
            "files.write",
            json!({"sandbox_id": sid, "path": "big", "data": data}),
        )
        .await;
    result_of(&w);
    let base = rss_kib(server.pid());
    for i in 0..2000 {
        a.send(
            &json!({"jsonrpc": "2.0", "id": 10_000 + i, "method": "files.read",
                       "params": {"sandbox_id": sid, "path": "big"}}),
        )
        .await;
    }
    // Meanwhile another connection is served promptly.
    let mut b = server.connect().await;
    let t0 = Instant::now();
    let other = result_of(&b.call("sandbox.create", json!({"spec": {}})).await)["sandbox_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = b
        .call(
            "sandbox.run_code",
            json!({"sandbox_id": other, "code": "print('served')"}),
        )
        .await;
    assert_eq!(result_of(&r)["stdout"], "served\n");
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let grown = rss_kib(server.pid()).saturating_sub(base);
    eprintln!("server RSS grew {grown} KiB with 2000 unread 512 KiB answers pending");
    assert!(grown < 200 * 1024, "server RSS grew {grown} KiB");
}

#[tokio::test(flavor = "multi_thread")]
async fn past_16_in_flight_a_request_is_refused_and_run_cancel_still_served() {
    let server = WsServer::start(&["--max-concurrent-runs", "32"]);
    let mut c = server.connect().await;
    let mut sids = Vec::new();
    for _ in 0..17 {
        let r = c.call("sandbox.create", json!({"spec": {}})).await;
        sids.push(result_of(&r)["sandbox_id"].as_str().unwrap().to_owned());
    }
    // 16 sleeping runs fill the connection's in-flight budget.
    for (i, sid) in sids.iter().take(16).enumerate() {
        c.send(
            &json!({"jsonrpc": "2.0", "id": 100 + i, "method": "sandbox.run_code",
                       "params": {"sandbox_id": sid, "code": "import time\ntime.sleep(60)"}}),
        )
        .await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t0 = Instant::now();
    let over = c
        .call(
            "sandbox.run_code",
            json!({"sandbox_id": sids[16], "code": "print(1)"}),
        )
        .await;
    assert_eq!(over["error"]["code"], -32018, "{over}");
    // run.cancel is served at once although 16 are in flight.
    let r = c.call("run.cancel", json!({"sandbox_id": sids[0]})).await;
    assert!(r.get("result").is_some(), "{r}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    for sid in &sids[1..16] {
        c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "run.cancel",
                       "params": {"sandbox_id": sid}}))
            .await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn run_cancel_reaches_an_execute_run_and_messages_name_their_sandbox() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    // execute: the run's id arrives with its first tool call; cancel it by that id.
    let code = "call_tool('echo', {'x': 1})\nimport time\ntime.sleep(60)";
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "execute", "params": {"code": code}}))
        .await;
    let call = c.recv().await.unwrap();
    assert_eq!(call["method"], "call_tool", "{call}");
    let run_id = call["params"]["run_id"].as_str().unwrap().to_owned();
    c.send(&json!({"jsonrpc": "2.0", "id": call["id"], "result": {"x": 1}}))
        .await;
    let t0 = Instant::now();
    c.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "run.cancel", "params": {"run_id": run_id}}),
    )
    .await;
    let mut statuses = Vec::new();
    while statuses.len() < 2 {
        let m = c.recv().await.unwrap();
        if m["id"] == 2 {
            assert_eq!(m["result"]["run_id"], run_id.as_str(), "{m}");
            statuses.push("cancel answered".to_owned());
        } else if m["id"] == 1 {
            statuses.push(
                m["result"]["status"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
    }
    assert!(statuses.contains(&"cancelled".to_owned()), "{statuses:?}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());

    // A session run's `call_tool` and `output` carry its sandbox.
    let echo = json!({"name": "echo", "schema": {"type": "object"}, "source": null, "sink": null, "identity": null});
    let r = c
        .call(
            "sandbox.create",
            json!({"spec": {"requires": ["run_code", "host_tools"], "tools": [echo]}}),
        )
        .await;
    let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_owned();
    c.send(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "sandbox.run_code",
                   "params": {"sandbox_id": sid, "stream": true,
                              "code": "print('out', flush=True)\ncall_tool('echo', {})"}}),
    )
    .await;
    let (mut saw_output, mut saw_call) = (false, false);
    loop {
        let m = c.recv().await.unwrap();
        if m["method"] == "output" {
            assert_eq!(m["params"]["sandbox_id"], sid.as_str(), "{m}");
            saw_output = true;
        } else if m["method"] == "call_tool" {
            assert_eq!(m["params"]["sandbox_id"], sid.as_str(), "{m}");
            saw_call = true;
            c.send(&json!({"jsonrpc": "2.0", "id": m["id"], "result": {}}))
                .await;
        } else if m["id"] == 3 {
            assert_eq!(m["result"]["status"], "completed", "{m}");
            break;
        }
    }
    assert!(saw_output && saw_call);
}
