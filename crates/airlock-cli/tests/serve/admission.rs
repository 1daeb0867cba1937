//! Unauthenticated connections cannot lock authorized clients out: they live in a small
//! pending budget of their own (oldest evicted first), never in the serving slots.
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::support::*;

/// Idle connections opened before the authorized client (more than the old 256 slots).
const ATTACKERS: usize = 300;

/// Opens `n` TCP connections that send half a request line and then nothing.
async fn idle_connections(addr: &str, n: usize) -> Vec<TcpStream> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut s = TcpStream::connect(addr).await.unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut s, b"GET / HTTP/1.1\r\n")
            .await
            .unwrap();
        out.push(s);
    }
    out
}

/// How many of `conns` the server has closed (a read sees EOF or a reset at once).
async fn closed_by_server(conns: &mut [TcpStream]) -> usize {
    let mut closed = 0;
    for s in conns.iter_mut() {
        let mut b = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_millis(5), s.read(&mut b)).await
        {
            closed += 1;
        }
    }
    closed
}

#[tokio::test(flavor = "multi_thread")]
async fn an_authorized_client_is_served_while_300_unauthenticated_connections_are_open() {
    for who in identities() {
        let server = WsServer::start_as(who, &[]);
        let mut attackers = idle_connections(&server.addr, ATTACKERS).await;
        // The authorized client upgrades and runs at once, well inside the 5 s upgrade deadline
        // the idle connections would otherwise have to run out.
        let started = Instant::now();
        let mut c = server.connect().await;
        let upgraded = started.elapsed();
        assert!(
            upgraded < Duration::from_secs(2),
            "{who:?}: upgrade took {upgraded:?}"
        );
        let r = c
            .execute(1, json!({"code": "print(6 * 7)"}), &echo_tools)
            .await;
        let r = result_of(&r);
        assert_eq!(r["status"], "completed", "{who:?}: {r}");
        assert_eq!(r["stdout"], "42\n");
        // The attackers' connections did not hold places: most were evicted already.
        let closed = closed_by_server(&mut attackers).await;
        // (One address holds at most 128 pending connections.)
        assert!(
            closed >= ATTACKERS - 128,
            "{who:?}: only {closed} of {ATTACKERS} idle connections were dropped"
        );
        // A second authorized client while the first is still connected.
        let more = idle_connections(&server.addr, ATTACKERS).await;
        let mut d = server.connect().await;
        let r = d
            .execute(2, json!({"code": "print('second')"}), &echo_tools)
            .await;
        assert_eq!(result_of(&r)["stdout"], "second\n", "{who:?}");
        drop((more, attackers));
    }
}
