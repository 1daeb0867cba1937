//! A client that pipelines requests without reading the answers holds a bounded part of the
//! server: at most 16 session methods per connection are in flight, the rest wait unread in
//! the client's own socket, and other connections are served meanwhile.
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
