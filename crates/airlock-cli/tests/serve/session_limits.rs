//! A client that pipelines requests without reading the answers holds a bounded part of the
//! server: at most 16 session methods per connection are in flight, one more is refused
//! `over_capacity` at once (`run.cancel` always served), and other connections are served
//! meanwhile. Also: `run.cancel` reaches an `execute` run, and `output`/`call_tool` name their
//! sandbox.
use std::time::{Duration, Instant};

use serde_json::json;

use super::support::session_probes::rss_kib;
use super::support::*;

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

/// A server with 32 run slots, one connection, and `n` sandboxes made on it. Sandboxes of the
/// default bounds (1 GiB disk + 512 MiB memory each) may hold more than this host's default
/// budget; they hold a few KiB, and the budget is not these tests' subject (serve::budget is).
async fn sandboxes_on_one_connection(n: usize) -> (WsServer, WsClient, Vec<String>) {
    let server = WsServer::start(&[
        "--max-concurrent-runs",
        "32",
        "--memory-budget-mb",
        "1048576",
    ]);
    let mut c = server.connect().await;
    let mut sids = Vec::new();
    for _ in 0..n {
        sids.push(create(&mut c, json!({"spec": {}})).await);
    }
    (server, c, sids)
}

/// A client that keeps exactly 16 session methods in flight (it sends its next request the
/// moment it reads an answer, as the SDK's own in-flight accounting does) is never refused:
/// a method's slot is free once its answer is queued, not when the server reaps its task, and
/// a `run.cancel` (always served) takes no method's slot. The client cancels before each next
/// run, as the SDK does when a run's task is cancelled; runs in 16 sandboxes keep the server
/// busy, and busy loops on every core widen the window between an answer and its task's end.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_pipelining_at_the_cap_under_load_is_never_refused() {
    let (_server, mut c, sids) = sandboxes_on_one_connection(16).await;
    let hog = CpuHog::start();
    let exec = |id: usize| {
        json!({"jsonrpc": "2.0", "id": id, "method": "sandbox.exec",
               "params": {"sandbox_id": sids[id % 16], "argv": ["true"]}})
    };
    const TOTAL: usize = 480;
    const CANCEL: usize = 1_000_000;
    for id in 0..16 {
        c.send(&exec(id)).await;
    }
    let (mut answered, mut sent) = (0, 16);
    let mut failed = Vec::new();
    while answered < TOTAL {
        let m = c.recv().await.expect("the server closed the connection");
        let id = usize::try_from(m["id"].as_u64().expect("an answer with its id")).unwrap();
        if id >= CANCEL {
            continue; // `not_found`: the sandbox's run had ended
        }
        answered += 1;
        if m.get("error").is_some() {
            failed.push(m.clone());
        }
        // The next run goes to the sandbox this answer freed, after a cancel of its (ended) run.
        if sent < TOTAL {
            c.send(
                &json!({"jsonrpc": "2.0", "id": CANCEL + id, "method": "run.cancel",
                           "params": {"sandbox_id": sids[id % 16]}}),
            )
            .await;
            c.send(&exec(id + 16)).await;
            sent += 1;
        }
    }
    drop(hog);
    assert!(
        failed.is_empty(),
        "{} of {TOTAL} runs refused or failed, the first: {}",
        failed.len(),
        failed[0]
    );
}

/// `run.cancel` takes no in-flight slot, so its answers are bounded another way: the session
/// answers it itself, and stops reading a connection whose answers queue up unread. 2000
/// cancels with 256 KiB ids, never read, would be 500 MiB of answers held.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_unread_cancels_holds_bounded_memory() {
    let server = WsServer::start(&[]);
    let mut a = server.connect().await;
    let sid = create(&mut a, json!({"spec": {}})).await;
    let base = rss_kib(server.pid());
    let big_id = "c".repeat(256 * 1024);
    let mut sent = 0;
    for _ in 0..2000 {
        let req = json!({"jsonrpc": "2.0", "id": big_id, "method": "run.cancel",
                         "params": {"sandbox_id": sid}});
        // The server stops reading once its queue of answers is full: the send then waits
        // on the socket's buffers, which is the bound this test is after.
        match tokio::time::timeout(Duration::from_secs(2), a.send(&req)).await {
            Ok(()) => sent += 1,
            Err(_) => break,
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let grown = rss_kib(server.pid()).saturating_sub(base);
    eprintln!("{sent} cancels sent unread; server RSS grew {grown} KiB");
    assert!(grown < 200 * 1024, "server RSS grew {grown} KiB");
    // Meanwhile another connection is served.
    let mut b = server.connect().await;
    let other = create(&mut b, json!({"spec": {}})).await;
    let r = b
        .call(
            "sandbox.exec",
            json!({"sandbox_id": other, "argv": ["echo", "served"]}),
        )
        .await;
    assert_eq!(result_of(&r)["stdout"], "served\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn past_16_in_flight_a_request_is_refused_and_run_cancel_still_served() {
    let (_server, mut c, sids) = sandboxes_on_one_connection(17).await;
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

#[tokio::test(flavor = "multi_thread")]
async fn a_keyless_sandbox_cannot_be_claimed_or_purged_through_a_key() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let r = c.call("sandbox.create", json!({"spec": {}})).await;
    let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_owned();
    // The id is not a counter an attacker can predict.
    assert!(sid.len() > 20, "{sid}");
    for scope in ["airlock-keyless", "wire"] {
        let r = c
            .call(
                "sandbox.create",
                json!({"spec": {}, "key": {"scope": scope, "thread_id": sid}}),
            )
            .await;
        if scope == "airlock-keyless" {
            assert_eq!(r["error"]["code"], -32602, "{r}");
        } else {
            assert_ne!(result_of(&r)["sandbox_id"], sid.as_str(), "{r}");
        }
        let r = c
            .call("scope.dispose", json!({"scope": scope, "thread_id": sid}))
            .await;
        if scope == "airlock-keyless" {
            assert_eq!(r["error"]["code"], -32602, "{r}");
        }
    }
    // Still there.
    let r = c.call("sandbox.connect", json!({"sandbox_id": sid})).await;
    assert_eq!(result_of(&r)["sandbox_id"], sid.as_str());
}

#[tokio::test(flavor = "multi_thread")]
async fn outputs_collect_refuses_past_one_response_before_reading_it() {
    let _shmem = SHMEM.lock().await;
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let outputs: Vec<serde_json::Value> = (0..4)
        .map(|i| json!({"path": format!("o{i}"), "media_type": "application/octet-stream"}))
        .collect();
    let r = c
        .call(
            "sandbox.create",
            json!({"spec": {"declared_outputs": outputs}}),
        )
        .await;
    let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_owned();
    let r = c
        .call(
            "sandbox.run_code",
            json!({"sandbox_id": sid, "code": "for i in range(4):\n    open('o%d' % i, 'wb').write(b'x' * (8 << 20))"}),
        )
        .await;
    assert_eq!(result_of(&r)["status"], "completed", "{r}");
    let base = rss_kib(server.pid());
    for _ in 0..16 {
        let r = c.call("outputs.collect", json!({"sandbox_id": sid})).await;
        assert_eq!(r["error"]["code"], -32017, "{r}");
        assert_eq!(
            r["error"]["data"]["kind"], "SandboxTransferCapExceeded",
            "{r}"
        );
    }
    let grown = rss_kib(server.pid()).saturating_sub(base);
    assert!(
        grown < 64 * 1024,
        "16 refused collections grew the server by {grown} KiB"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_streaming_listener_does_not_keep_its_sandbox_busy() {
    // A 32 MiB output cap, so the stream is far more than the socket buffers hold.
    let server = WsServer::start(&["--ceiling-output", "33554432"]);
    let mut setup = server.connect().await;
    let spec = json!({"limits": {"max_output_bytes": 33554432, "timeout_s": 60}});
    let r = setup.call("sandbox.create", json!({"spec": spec})).await;
    let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_owned();
    // A raw connection that asks for a streamed flood, reads its first chunk (the run has
    // started: it holds the sandbox) and then nothing more. (Probing the sandbox with runs
    // of its own until one was refused `busy` raced the flood's start: a probe holding the
    // sandbox as the flood arrived got the flood refused, and it never started.)
    let mut stalled = server.connect().await;
    let flood = "import sys\nfor _ in range(6000):\n    sys.stdout.write('y' * 4096 + '\\n')\n    sys.stdout.flush()";
    stalled
        .send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "sandbox.run_code",
                      "params": {"sandbox_id": sid, "code": flood, "stream": true}}),
        )
        .await;
    let first = stalled.recv().await.expect("the flood's first chunk");
    assert_eq!(
        first["method"], "output",
        "the flood did not start: {first}"
    );
    // The connection is served meanwhile.
    let r = setup
        .call("files.stat", json!({"sandbox_id": sid, "path": "x"}))
        .await;
    result_of(&r);
    let r = setup
        .call("run.cancel", json!({"sandbox_id": "nope"}))
        .await;
    assert_eq!(r["error"]["code"], -32016);
    // Within a few seconds of the flood's end the sandbox serves another run, although its
    // listener still reads nothing.
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let r = setup
            .call(
                "sandbox.run_code",
                json!({"sandbox_id": sid, "code": "print('free')"}),
            )
            .await;
        if r.get("result").is_some() {
            assert_eq!(r["result"]["stdout"], "free\n", "{r}");
            break;
        }
        assert_eq!(r["error"]["code"], -32006, "{r}");
        assert!(
            Instant::now() < until,
            "the stalled listener kept the sandbox busy"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn transfer_totals_bound_one_collect_never_the_sandbox_s_life() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let limits = json!({"max_bytes_per_file": 1000, "max_total_bytes": 2000, "max_files": 2});
    let outputs: Vec<serde_json::Value> = ["a", "b", "c"]
        .iter()
        .map(|p| json!({"path": p, "media_type": "text/plain", "required": false}))
        .collect();
    let r = c
        .call(
            "sandbox.create",
            json!({"spec": {"files_in": limits, "files_out": limits,
                            "declared_outputs": outputs, "outputs_named_at_call_time": true}}),
        )
        .await;
    let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_owned();
    let write = |name: &str| json!({"sandbox_id": sid, "path": name, "data": b64(&[b'x'; 900])});
    // Files moved one call at a time are checked against the per-file cap only: three files
    // (past max_files = 2, 2700 bytes past max_total_bytes = 2000), each read twice.
    for name in ["a", "b", "c"] {
        result_of(&c.call("files.write", write(name)).await);
    }
    for _ in 0..2 {
        for name in ["a", "b", "c"] {
            let r = c
                .call("files.read", json!({"sandbox_id": sid, "path": name}))
                .await;
            assert_eq!(unb64(&result_of(&r)["data"]).len(), 900, "{r}");
        }
    }
    // One collect is one call: its totals apply to what it returns. All three declared
    // outputs pass max_files, refused before anything is read...
    let r = c.call("outputs.collect", json!({"sandbox_id": sid})).await;
    assert_eq!(r["error"]["code"], -32017, "{r}");
    assert_eq!(
        r["error"]["data"]["kind"], "SandboxTransferCapExceeded",
        "{r}"
    );
    // ...two of them fit (1800 bytes), and fit again on the next call.
    let two: Vec<serde_json::Value> = ["a", "b"]
        .iter()
        .map(|p| json!({"path": p, "media_type": "text/plain"}))
        .collect();
    for _ in 0..3 {
        let r = c
            .call(
                "outputs.collect",
                json!({"sandbox_id": sid, "outputs": two}),
            )
            .await;
        assert_eq!(
            result_of(&r)["artifacts"].as_array().unwrap().len(),
            2,
            "{r}"
        );
    }
    // A write above the per-file cap is still refused.
    let r = c
        .call(
            "files.write",
            json!({"sandbox_id": sid, "path": "d", "data": b64(&[b'x'; 1001])}),
        )
        .await;
    assert_eq!(r["error"]["data"]["kind"], "SandboxFileTooLarge", "{r}");
}

/// A tenant at `max_concurrent_runs = 1` that sends its next run the moment it reads the last
/// one's answer is never refused: the run's place under its quota is given back before the
/// answer goes out. Under busy loops on every core.
#[tokio::test(flavor = "multi_thread")]
async fn a_tenants_next_run_after_an_answer_is_never_over_its_run_quota() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "floor = \"os_process\"\n[tenants.alice]\nmax_concurrent_runs = 1\n",
    )
    .unwrap();
    let extra = ["--policy", policy.to_str().unwrap()];
    let (server, tokens) = WsServer::start_tenants(None, &["alice"], &extra);
    let mut c = server.connect_as(&tokens["alice"]).await;
    let sid = create(&mut c, json!({"spec": {}})).await;
    let hog = CpuHog::start();
    for n in 0..200 {
        let r = c
            .call("sandbox.exec", json!({"sandbox_id": sid, "argv": ["true"]}))
            .await;
        assert_eq!(result_of(&r)["status"], "completed", "run {n}: {r}");
    }
    drop(hog);
}

/// At `--max-connections 1`, a client that closes its connection and, the moment the server's
/// close frame arrives, connects again is never refused: the connection's slot is given back
/// before that frame is sent. Under busy loops on every core.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_reconnecting_as_its_close_is_answered_finds_its_slot_free() {
    let server = WsServer::start(&["--max-connections", "1"]);
    let hog = CpuHog::start();
    for n in 0..150 {
        let mut c = server.connect().await;
        // One answered request: the connection is served (a refused one is closed at once,
        // code 1013), its slot held.
        c.send(&json!({"jsonrpc": "2.0", "id": n, "method": "sandbox.list", "params": {}}))
            .await;
        let r = c.recv().await;
        assert!(
            r.as_ref().is_some_and(|r| r.get("result").is_some()),
            "connection {n} was not served: {r:?}"
        );
        c.ws.close(None).await.unwrap();
        // The server's close frame (the handshake's end): then at once the next connection.
        let (rest, _) = c.recv_until_close().await;
        assert!(rest.is_empty(), "connection {n}: {rest:?}");
    }
    drop(hog);
}
