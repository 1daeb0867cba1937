//! Faults around sandboxes that persist (the session methods), each asserted by external
//! evidence (/proc, /proc/meminfo, the server's TMPDIR): a connection dropped mid-stream, a
//! client that never reads while a run streams 20 MB, SIGTERM and SIGKILL of the server with
//! live sandboxes and a run in flight (the last two as root and as `airlock-test`), SIGTERM
//! with runs over the run ceiling (refused, never queued).
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::support::session_probes::*;
use super::support::*;

/// Server identities where it matters who the server runs as.
const WHO: [Option<&str>; 2] = [None, Some("airlock-test")];

/// Prints a line forever, flushing each.
const CHATTER: &str =
    "import time\ni = 0\nwhile True:\n    print('tick', i, flush=True)\n    i += 1\n    time.sleep(0.002)";

fn no_tools() -> SharedTools {
    Arc::new(|name: &str, _: &Value| Err((-32013, format!("no tool {name}"))))
}

/// Send `method` on a plain client and read to its response; returns it and the messages
/// before it.
async fn rpc(c: &mut WsClient, id: i64, method: &str, params: Value) -> (Value, Vec<Value>) {
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .await;
    let mut before = Vec::new();
    loop {
        let m = c.recv().await.expect("closed before the response");
        if m["id"] == json!(id) && m.get("method").is_none() {
            return (m, before);
        }
        before.push(m);
    }
}

async fn create(c: &Mux, spec: Value) -> String {
    let r = c.call("sandbox.create", json!({ "spec": spec })).await;
    result_of(&r.msg)["sandbox_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Run records in the audit log (policy events carry an `event` name).
fn run_records(server: &WsServer) -> Vec<Value> {
    server
        .audit()
        .into_iter()
        .filter(|a| a.get("event").is_none())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn session_fault_connection_dropped_mid_stream_cancels_the_run_keeps_the_sandbox() {
    let server = WsServer::start(&[]);
    let pid = server.pid();
    let mut c = server.connect().await;
    let (r, _) = rpc(&mut c, 1, "sandbox.create", json!({"spec": {}})).await;
    let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_string();
    let keep = b"kept across a dropped connection\n";
    let (w, _) = rpc(
        &mut c,
        2,
        "files.write",
        json!({"sandbox_id": sid, "path": "keep.txt", "data": b64(keep)}),
    )
    .await;
    result_of(&w);
    c.send(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "sandbox.run_code",
        "params": {"sandbox_id": sid, "code": CHATTER, "stream": true}}),
    )
    .await;
    for _ in 0..5 {
        let m = c.recv().await.unwrap();
        assert_eq!(m["method"], "output", "{m}");
    }
    let seen = snapshot(pid);
    assert!(!executors(pid).is_empty(), "the run is live: {seen:?}");
    // Vanish without a close handshake, mid-stream.
    drop(c);
    let left = wait_gone(&seen, Duration::from_secs(10));
    assert!(left.is_empty(), "the run's processes survived: {left:?}");
    assert!(settle(pid, Duration::from_secs(5)).is_empty());
    let until = Instant::now() + Duration::from_secs(5);
    while run_records(&server).is_empty() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let runs = run_records(&server);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["status"], "cancelled", "{runs:?}");

    // The sandbox lives on: re-attach from a new connection, its files intact, runs again.
    let c = Mux::new(server.connect().await.ws, no_tools());
    let back = c.call("sandbox.connect", json!({"sandbox_id": sid})).await;
    assert_eq!(result_of(&back.msg)["sandbox_id"], sid);
    let got = c
        .call("files.read", json!({"sandbox_id": sid, "path": "keep.txt"}))
        .await;
    assert_eq!(
        unb64_text(result_of(&got.msg)["data"].as_str().unwrap()),
        keep
    );
    let again = c
        .call(
            "sandbox.exec",
            json!({"sandbox_id": sid, "argv": ["/bin/cat", "keep.txt"]}),
        )
        .await;
    assert_eq!(
        result_of(&again.msg)["stdout"],
        "kept across a dropped connection\n"
    );
    let d = c.call("sandbox.dispose", json!({"sandbox_id": sid})).await;
    assert_eq!(result_of(&d.msg)["disposal"], Value::Null);
    assert!(c.close().await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn session_fault_a_client_that_never_reads_a_20mb_stream_stalls_nothing() {
    // One run slot: a run whose listener stalls must not keep it.
    let server = WsServer::start(&["--max-concurrent-runs", "1", "--ceiling-output", "33554432"]);
    let pid = server.pid();
    let rss_before = rss_kib(pid);
    let mut slow = server.connect().await;
    let spec = json!({"limits": {"max_output_bytes": 33554432, "timeout_s": 60}});
    let (r, _) = rpc(&mut slow, 1, "sandbox.create", json!({ "spec": spec })).await;
    let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_string();
    // 20 MiB in 64 KiB writes, paced so the forwarder keeps up and the connection's buffers
    // (several MiB on loopback) fill: the stall then reaches the broker's side.
    let flood = "import sys, time\nblock = b'y' * 65535 + b'\\n'\nfor _ in range(320):\n    \
                 sys.stdout.buffer.write(block)\n    sys.stdout.flush()\n    time.sleep(0.004)";
    slow.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "sandbox.run_code",
        "params": {"sandbox_id": sid, "code": flood, "stream": true}}),
    )
    .await;
    // From here `slow` reads nothing until the end.
    let fast = Mux::new(server.connect().await.ws, no_tools());
    let mut answered = Vec::new();
    for round in 0..2 {
        let t = Instant::now();
        let served = async {
            let other = create(&fast, json!({})).await;
            let argv = json!(["/bin/echo", "still here"]);
            // Once the flood's processes are gone its slot comes back (the broker may still
            // be reaping for a moment): retry a refusal for up to 2 s.
            let until = Instant::now() + Duration::from_secs(2);
            let r = loop {
                let r = fast
                    .call("sandbox.exec", json!({"sandbox_id": other, "argv": argv}))
                    .await;
                if round == 0 || r.msg["error"]["code"] != -32018 || Instant::now() > until {
                    break r;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            if round == 0 && r.msg["error"]["code"] == -32018 {
                // The one slot is the flood's while it runs: a prompt refusal is an answer.
            } else {
                assert_eq!(result_of(&r.msg)["stdout"], "still here\n");
            }
            fast.call("sandbox.dispose", json!({"sandbox_id": other}))
                .await;
        };
        tokio::time::timeout(Duration::from_secs(20), served)
            .await
            .unwrap_or_else(|_| {
                panic!("round {round}: another connection's run was not served (the slot is held)")
            });
        answered.push(t.elapsed());
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "round {round}: {:?}",
            t.elapsed()
        );
        if round == 0 {
            // Let the flood end (its process gone) before the second round: its run slot
            // must be free although its listener still reads nothing.
            assert!(
                settle(pid, Duration::from_secs(30)).is_empty(),
                "the flood did not end"
            );
        }
    }
    let peak = peak_rss_kib(pid);
    assert!(peak < 300 * 1024, "server peak RSS {peak} KiB");

    // Now read: notifications, then exactly one terminal result.
    let (resp, before) = {
        let mut before = Vec::new();
        loop {
            let m = slow.recv().await.expect("closed before the run's result");
            if m.get("method").is_none() {
                break (m, before);
            }
            before.push(m);
        }
    };
    assert_eq!(resp["id"], 2, "{resp}");
    let res = result_of(&resp);
    assert_eq!(res["status"], "completed", "{}", res["status"]);
    let dropped = res["output_dropped_bytes"].as_u64().unwrap();
    let streamed: usize = before
        .iter()
        .map(|n| n["params"]["data"].as_str().unwrap().len())
        .sum();
    assert!(
        dropped > 0 || res["stdout_truncated"] == true,
        "{}",
        res["stdout_truncated"]
    );
    assert!(before.iter().all(|n| n["method"] == "output"));
    // Nothing more for that request: the next response on the connection is the next one's.
    let (next, between) = rpc(&mut slow, 3, "sandbox.connect", json!({"sandbox_id": sid})).await;
    result_of(&next);
    assert!(between.is_empty(), "after the result: {between:?}");
    let (d, _) = rpc(&mut slow, 4, "sandbox.dispose", json!({"sandbox_id": sid})).await;
    result_of(&d);
    eprintln!(
        "never-reading client: 20 MiB written; {streamed} bytes streamed in {} notifications, \
         {dropped} dropped, result stdout {} bytes (truncated {}); other connection answered in \
         {answered:?}; server RSS {rss_before} KiB before, peak {peak} KiB",
        before.len(),
        res["stdout"].as_str().unwrap().len(),
        res["stdout_truncated"],
    );
    assert!(fast.close().await.is_empty());
}

/// A server with three live sandboxes holding `MIB` MiB each in their tmpfs, and a streaming
/// run in flight in the first; returns the client, the run's pending reply, what was written
/// and the Shmem before any of it.
struct Loaded {
    server: WsServer,
    client: Arc<Mux>,
    run: tokio::task::JoinHandle<Option<Reply>>,
    shmem_before: u64,
    written_kib: u64,
}

const MIB: u64 = 48;

async fn loaded(who: Option<&str>) -> Loaded {
    // No drain grace: SIGTERM cancels the run in flight at once (serve::drain tests the grace).
    let server = WsServer::start_as(who, &["--drain-grace", "0"]);
    let shmem_before = shmem_kib();
    let client = Arc::new(Mux::new(server.connect().await.ws, no_tools()));
    let mut sids = Vec::new();
    for _ in 0..3 {
        let sid = create(&client, json!({})).await;
        let dd = format!("dd if=/dev/zero of=big bs=1M count={MIB} 2>/dev/null && wc -c < big");
        let r = client
            .call(
                "sandbox.exec",
                json!({"sandbox_id": sid, "argv": ["/bin/sh", "-c", dd]}),
            )
            .await;
        assert_eq!(
            result_of(&r.msg)["stdout"],
            format!("{}\n", MIB << 20),
            "{}",
            r.msg
        );
        sids.push(sid);
    }
    let written_kib = 3 * MIB * 1024;
    let now = shmem_kib();
    assert!(
        // (Half: other work on a shared machine moves Shmem too.)
        now >= shmem_before + written_kib / 2,
        "the sandboxes' files are not in Shmem: {shmem_before} -> {now} KiB"
    );
    let run = {
        let c = Arc::clone(&client);
        let sid = sids[0].clone();
        tokio::spawn(async move {
            c.try_call(
                "sandbox.run_code",
                json!({"sandbox_id": sid, "code": CHATTER, "stream": true}),
            )
            .await
        })
    };
    // The run is live once it streams.
    let until = Instant::now() + Duration::from_secs(30);
    while executors(server.pid()).is_empty() || client.outputs_seen() == 0 {
        assert!(Instant::now() < until, "the run did not start streaming");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Loaded {
        server,
        client,
        run,
        shmem_before,
        written_kib,
    }
}

/// Nothing of the server's sandboxes is left: processes, memory, TMPDIR.
fn nothing_left(l: &Loaded, seen: &[Seen], who: Option<&str>, how: &str) {
    let left = wait_gone(seen, Duration::from_secs(10));
    assert!(left.is_empty(), "{how} as {who:?}: survivors {left:?}");
    let target = l.shmem_before + l.written_kib / 10;
    let shm = shmem_at_most(target, Duration::from_secs(15));
    assert!(
        shm <= target,
        "{how} as {who:?}: the sandboxes' memory was not freed: Shmem {} KiB before, {shm} KiB \
         after ({} KiB were written)",
        l.shmem_before,
        l.written_kib
    );
    let tmp = entries(&l.server.dir.path().join("tmp"));
    assert!(
        tmp.is_empty(),
        "{how} as {who:?}: residue in TMPDIR: {tmp:?}"
    );
    eprintln!(
        "{how} as {who:?}: {} processes seen, none left; Shmem {} KiB before, {shm} KiB after \
         ({} KiB written)",
        seen.len(),
        l.shmem_before,
        l.written_kib
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn session_fault_sigterm_with_live_sandboxes_and_a_run_in_flight() {
    let _one = SHMEM.lock().await;
    for who in WHO {
        let mut l = loaded(who).await;
        let pid = l.server.pid();
        let seen = snapshot(pid);
        signal(pid, libc_sigterm());
        let reply = (&mut l.run)
            .await
            .unwrap()
            .expect("the run in flight got no response");
        let res = result_of(&reply.msg);
        assert_eq!(res["status"], "cancelled", "as {who:?}: {}", reply.msg);
        eprintln!(
            "SIGTERM as {who:?}: the run in flight ended {} {}",
            res["status"], res["error"]
        );
        let status = wait_bounded(&mut l.server.child, Duration::from_secs(30))
            .expect("the server did not exit after SIGTERM");
        assert_eq!(status.code(), Some(0), "as {who:?}: {status:?}");
        nothing_left(&l, &seen, who, "SIGTERM");
        let client = Arc::try_unwrap(l.client).ok().unwrap();
        let strays = client.close().await;
        assert!(strays.is_empty(), "as {who:?}: {strays:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn session_fault_sigkill_with_live_sandboxes_and_a_run_in_flight() {
    let _one = SHMEM.lock().await;
    for who in WHO {
        let mut l = loaded(who).await;
        let pid = l.server.pid();
        let seen = snapshot(pid);
        assert!(seen.len() >= 2, "as {who:?}: the run's processes: {seen:?}");
        signal(pid, 9);
        let status = wait_bounded(&mut l.server.child, Duration::from_secs(10))
            .expect("the server outlived SIGKILL");
        assert!(!status.success());
        nothing_left(&l, &seen, who, "SIGKILL");
        // The run has no response to get; its caller learns the connection is gone.
        let reply = (&mut l.run).await.unwrap();
        assert!(
            reply.is_none(),
            "as {who:?}: a response after SIGKILL? {reply:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn session_fault_runs_over_the_ceiling_queue_a_full_queue_refuses_and_sigterm_answers_each() {
    let mut server = WsServer::start(&[
        "--max-concurrent-runs",
        "1",
        "--max-queued-runs",
        "2",
        "--drain-grace",
        "0",
    ]);
    let pid = server.pid();
    let client = Arc::new(Mux::new(server.connect().await.ws, no_tools()));
    let mut runs = Vec::new();
    for _ in 0..5 {
        let sid = create(&client, json!({})).await;
        let c = Arc::clone(&client);
        runs.push(tokio::spawn(async move {
            c.try_call(
                "sandbox.run_code",
                json!({"sandbox_id": sid, "code": CHATTER, "stream": true}),
            )
            .await
        }));
    }
    // One runs (it streams), two wait in the queue (its bound), two are refused at once.
    let until = Instant::now() + Duration::from_secs(30);
    while client.outputs_seen() == 0 {
        assert!(Instant::now() < until, "no run started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(executors(pid).len(), 1, "one slot, one run");
    let seen = snapshot(pid);
    let t = Instant::now();
    signal(pid, libc_sigterm());
    let mut outcomes = Vec::new();
    for r in runs {
        let reply = r.await.unwrap().expect("a run got no response");
        outcomes.push(match reply.msg.get("result") {
            Some(res) => format!("{}", res["status"]),
            None => format!("error {}", reply.msg["error"]["code"]),
        });
    }
    let status = wait_bounded(&mut server.child, Duration::from_secs(30)).expect("no exit");
    eprintln!(
        "SIGTERM with runs over the ceiling: {outcomes:?} in {:?}",
        t.elapsed()
    );
    assert_eq!(status.code(), Some(0));
    let mut sorted = outcomes.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            "\"cancelled\"",
            "\"cancelled\"",
            "\"cancelled\"",
            "error -32018",
            "error -32018"
        ]
    );
    assert!(wait_gone(&seen, Duration::from_secs(10)).is_empty());
    let runs = run_records(&server);
    // Only the run that held the slot started; the queued ones were cancelled before they
    // started and the refused ones never spawned anything.
    assert_eq!(runs.len(), 1, "{runs:?}");
    let client = Arc::try_unwrap(client).ok().unwrap();
    assert!(client.close().await.is_empty());
}
