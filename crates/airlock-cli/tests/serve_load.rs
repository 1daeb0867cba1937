//! A bounded load test of `airlock serve` on loopback: 50 concurrent WebSocket connections x
//! 20 runs each (every fifth a Python run with tool calls, the rest commands), asserting that
//! every request got exactly one terminal response carrying its own connection's data, and
//! that nothing leaked: no executor processes, no server fds, no run dirs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test support: a failed step is a failed test"
)]
#[path = "serve/support.rs"]
mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::json;
use support::*;

const CONNECTIONS: usize = 50;
const RUNS: usize = 20;

async fn one_connection(server_url: String, token: String, conn: usize) -> Vec<String> {
    let mut req =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(server_url)
            .unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let mut c = WsClient::new(ws);
    let mut run_ids = Vec::new();
    for run in 0..RUNS {
        let id = (conn * 1000 + run) as i64;
        let resp = if run % 5 == 0 {
            let code = format!(
                "a = call_tool('echo', {{'conn': {conn}, 'run': {run}}})\nb = call_tool('add', {{'a': a['run'], 'b': 1}})\nprint(a['conn'], b)"
            );
            let r = c.execute(id, json!({"code": code}), &echo_tools).await;
            assert_eq!(
                result_of(&r)["stdout"],
                format!("{conn} {}\n", run + 1),
                "{r}"
            );
            r
        } else {
            let r = c
                .execute(
                    id,
                    json!({"argv": ["/bin/echo", format!("c{conn}r{run}")]}),
                    &echo_tools,
                )
                .await;
            assert_eq!(result_of(&r)["stdout"], format!("c{conn}r{run}\n"), "{r}");
            r
        };
        assert_eq!(resp["id"], id);
        assert_eq!(result_of(&resp)["status"], "completed", "{resp}");
        run_ids.push(result_of(&resp)["run_id"].as_str().unwrap().to_string());
    }
    // Nothing more may arrive for this connection: close and read to the end.
    c.ws.close(None).await.unwrap();
    let (extra, _) = c.recv_until_close().await;
    assert!(extra.is_empty(), "conn {conn}: stray messages {extra:?}");
    run_ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn load_50_connections_x_20_runs_leak_nothing() {
    let server = WsServer::start(&[]);
    let pid = server.pid();
    // Warm up (the interpreter probe, tokio's child reaper) so the fd baseline is stable.
    let mut warm = server.connect().await;
    let r = warm
        .execute(
            1,
            json!({"code": "print(call_tool('echo', 1))"}),
            &echo_tools,
        )
        .await;
    assert_eq!(result_of(&r)["stdout"], "1\n");
    drop(warm);
    assert!(settle(pid, Duration::from_secs(10)).is_empty());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let fds_before = fd_count(pid);

    let started = Instant::now();
    let mut tasks = Vec::new();
    for conn in 0..CONNECTIONS {
        tasks.push(tokio::spawn(one_connection(
            server.url(),
            server.token.clone(),
            conn,
        )));
    }
    let mut all = BTreeSet::new();
    for t in tasks {
        for id in t.await.unwrap() {
            assert!(all.insert(id.clone()), "run id {id} reused");
        }
    }
    let took = started.elapsed();
    assert_eq!(all.len(), CONNECTIONS * RUNS);
    assert!(took < Duration::from_secs(100), "load took {took:?}");

    let left = settle(pid, Duration::from_secs(10));
    assert!(left.is_empty(), "processes left: {left:?}");
    assert!(executors(pid).is_empty());
    assert!(server.run_dirs().is_empty(), "{:?}", server.run_dirs());
    let end = Instant::now() + Duration::from_secs(10);
    while fd_count(pid) > fds_before && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        fd_count(pid),
        fds_before,
        "server fds leaked: {:?}",
        fd_list(pid)
    );
    let audit = server.audit();
    assert_eq!(audit.len(), CONNECTIONS * RUNS + 1);
    let audited: BTreeSet<String> = audit
        .iter()
        .map(|a| a["run_id"].as_str().unwrap().to_string())
        .collect();
    assert!(all.is_subset(&audited));
    eprintln!("load: {} runs in {took:?}", CONNECTIONS * RUNS);
}
