//! The operator endpoints through the real binary: `/healthz` and `/readyz` (fixed bodies,
//! unauthenticated), `/metrics` behind the token on the main listener and open on
//! `--metrics-listen`, readiness at capacity and with a required layer really missing, and
//! that these requests hold no authorized slot and cannot stall the server. Each as root and
//! as `airlock-test`.
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::support::*;

/// One HTTP response: status code, head and body.
struct Http {
    status: u16,
    head: String,
    body: String,
}

/// Sends `method path` with `headers` on a fresh connection and reads until the server closes.
async fn http(addr: &str, method: &str, path: &str, headers: &[&str]) -> Http {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n");
    for h in headers {
        req.push_str(&format!("{h}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut raw))
        .await
        .expect("no answer in time")
        .unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    Http {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

async fn get(addr: &str, path: &str) -> Http {
    http(addr, "GET", path, &[]).await
}

#[tokio::test(flavor = "multi_thread")]
async fn health_answers_fixed_bodies_and_metrics_needs_the_token_on_the_main_listener() {
    for who in identities() {
        let server = WsServer::start_as(who, &["--metrics-listen", "127.0.0.1:0"]);
        let main = server.addr.as_str();
        let h = get(main, "/healthz").await;
        assert_eq!((h.status, h.body.as_str()), (200, "ok\n"), "{who:?}");
        let r = get(main, "/readyz").await;
        assert_eq!((r.status, r.body.as_str()), (200, "ready\n"), "{who:?}");
        // Without the token, with a wrong one, or with two: refused as the upgrade is.
        let bearer = format!("Authorization: Bearer {}", server.token);
        let wrong = "Authorization: Bearer not-the-token-at-all";
        for headers in [vec![], vec![wrong], vec![bearer.as_str(), bearer.as_str()]] {
            let m = http(main, "GET", "/metrics", &headers).await;
            assert_eq!(m.status, 401, "{who:?} {headers:?}: {}", m.head);
            assert!(m.head.contains("WWW-Authenticate: Bearer"), "{}", m.head);
            assert!(!m.body.contains("airlock_"), "{who:?}: {}", m.body);
        }
        let m = http(main, "GET", "/metrics", &[&bearer]).await;
        assert_eq!(m.status, 200, "{who:?}: {}", m.head);
        assert!(
            m.head.contains("application/openmetrics-text"),
            "{}",
            m.head
        );
        assert!(m
            .body
            .contains("airlock_sandboxes_live{tenant=\"default\"} 0"));
        assert!(m.body.ends_with("# EOF\n"), "{}", m.body);
        // The metrics listener: no token, the same health answers, nothing else served.
        let ops = server.metrics.as_deref().expect("the metrics address");
        let m = get(ops, "/metrics").await;
        assert_eq!(m.status, 200, "{who:?}: {}", m.head);
        assert!(m.body.ends_with("# EOF\n"));
        assert_eq!(get(ops, "/healthz").await.body, "ok\n");
        assert_eq!(get(ops, "/readyz").await.body, "ready\n");
        assert_eq!(get(ops, "/").await.status, 404);
        assert_eq!(get(ops, "/x/abc/").await.status, 404);
        assert_eq!(http(main, "POST", "/healthz", &[]).await.status, 405);
        // HEAD: the head alone.
        let head = http(main, "HEAD", "/healthz", &[]).await;
        assert_eq!((head.status, head.body.as_str()), (200, ""), "{who:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn readyz_is_unready_at_the_capacity_of_sandboxes_or_connections() {
    for who in identities() {
        let server = WsServer::start_as(who, &["--max-sandboxes", "1", "--max-connections", "2"]);
        let addr = server.addr.as_str();
        let mut c = server.connect().await;
        let sid = create(&mut c, json!({"spec": {}})).await;
        let r = get(addr, "/readyz").await;
        assert_eq!((r.status, r.body.as_str()), (503, "not ready\n"), "{who:?}");
        assert_eq!(get(addr, "/healthz").await.status, 200, "{who:?}");
        let disposed = c.call("sandbox.dispose", json!({"sandbox_id": sid})).await;
        result_of(&disposed);
        assert_eq!(get(addr, "/readyz").await.status, 200, "{who:?}");
        // The second (last) connection slot taken: unready; given back: ready.
        // The server counts a connection once it has taken it up, which may follow the
        // client's connect by a moment: readiness is awaited each way, never sampled once.
        let d = server.connect().await;
        ready_becomes(addr, 503, &who).await;
        drop(d);
        ready_becomes(addr, 200, &who).await;
    }
}

/// Wait (at most 10 s) until `/readyz` answers `status`.
async fn ready_becomes(addr: &str, status: u16, who: &impl std::fmt::Debug) {
    let until = Instant::now() + Duration::from_secs(10);
    while get(addr, "/readyz").await.status != status {
        assert!(
            Instant::now() < until,
            "{who:?}: /readyz never answered {status}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Connections that send a partial operator request and then nothing.
async fn slow_requests(addr: &str, n: usize) -> Vec<TcpStream> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let path = ["/metrics", "/healthz", "/readyz"][i % 3];
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n").as_bytes())
            .await
            .unwrap();
        out.push(s);
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn operator_requests_hold_no_slot_and_300_slow_ones_do_not_stall_the_server() {
    for who in identities() {
        // One authorized slot: a health request that took it would lock the client out.
        let server = WsServer::start_as(who, &["--max-connections", "1"]);
        let slow = slow_requests(&server.addr, 300).await;
        let started = Instant::now();
        let mut c = server.connect().await;
        assert!(started.elapsed() < Duration::from_secs(2), "{who:?}");
        let r = c
            .execute(1, json!({"code": "print(6 * 7)"}), &echo_tools)
            .await;
        assert_eq!(result_of(&r)["stdout"], "42\n", "{who:?}: {r}");
        // With the one slot taken, health still answers (from the pending budget).
        let h = get(&server.addr, "/healthz").await;
        assert_eq!((h.status, h.body.as_str()), (200, "ok\n"), "{who:?}");
        assert_eq!(get(&server.addr, "/readyz").await.status, 503, "{who:?}");
        drop((c, slow));
    }
}

/// Starts the server in a user namespace of its own whose `user.max_user_namespaces` is 0: the
/// doctor's user-namespace probes really fail there (ENOSPC), and nothing outside changes.
const NO_USERNS: [&str; 5] = [
    "unshare",
    "-Ur",
    "sh",
    "-c",
    "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" \"$@\"",
];

#[tokio::test(flavor = "multi_thread")]
async fn readyz_is_unready_when_a_required_layer_is_missing() {
    for who in identities() {
        let server = WsServer::start_wrapped(who, &NO_USERNS, &[]);
        let h = get(&server.addr, "/healthz").await;
        assert_eq!((h.status, h.body.as_str()), (200, "ok\n"), "{who:?}");
        let r = get(&server.addr, "/readyz").await;
        assert_eq!(
            (r.status, r.body.as_str()),
            (503, "not ready\n"),
            "{who:?}: {}",
            server.stderr()
        );
        // The reason is the server's log's, not the client's.
        assert!(server.stderr().contains("required layer missing: userns"));
        // A run really is refused there (unready is not a probe's artefact).
        let mut c = server.connect().await;
        let r = c.execute(1, json!({"code": "print(1)"}), &echo_tools).await;
        assert_eq!(result_of(&r)["status"], "refused", "{who:?}: {r}");
        // The same machine outside that namespace is ready.
        let outside = WsServer::start_as(who, &[]);
        assert_eq!(get(&outside.addr, "/readyz").await.status, 200, "{who:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_token_does_not_read_the_metrics_of_every_tenant() {
    for who in identities() {
        let (server, tokens) =
            WsServer::start_tenants(who, &["alice", "bob"], &["--metrics-listen", "127.0.0.1:0"]);
        let alice = format!("Authorization: Bearer {}", tokens["alice"]);
        let m = http(&server.addr, "GET", "/metrics", &[&alice]).await;
        assert_eq!(m.status, 403, "{who:?}: {}", m.head);
        assert!(!m.body.contains("airlock_"), "{who:?}: {}", m.body);
        // The operator's listener serves them.
        let ops = server.metrics.as_deref().expect("the metrics address");
        assert_eq!(get(ops, "/metrics").await.status, 200, "{who:?}");
        assert_eq!(get(&server.addr, "/healthz").await.status, 200, "{who:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn readyz_is_unready_while_a_drain_lets_a_run_finish_and_healthz_stays_alive() {
    for who in identities() {
        let mut server = WsServer::start_as(who, &["--drain-grace", "20"]);
        let addr = server.addr.clone();
        assert_eq!(get(&addr, "/readyz").await.status, 200, "{who:?}");
        let mut c = server.connect().await;
        let sid = create(&mut c, json!({"spec": {}})).await;
        let code = "import time\nprint('go', flush=True)\ntime.sleep(3)\nprint('done')";
        let run = c
            .request(
                "sandbox.run_code",
                json!({"sandbox_id": sid, "code": code, "stream": true}),
            )
            .await;
        // The run is in flight (its first line streamed) when SIGTERM comes.
        loop {
            let m = c.recv().await.expect("the run's output");
            if m.pointer("/params/data").and_then(|d| d.as_str()) == Some("go\n") {
                break;
            }
        }
        signal(server.pid(), libc_sigterm());
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let r = get(&addr, "/readyz").await;
            if r.status == 503 {
                assert_eq!(r.body, "not ready\n", "{who:?}");
                break;
            }
            assert!(
                Instant::now() < until,
                "{who:?}: still ready while draining"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            get(&addr, "/healthz").await.status,
            200,
            "{who:?}: alive while draining"
        );
        let (answer, _) = c.wait_for(run, &no_tools).await;
        assert_eq!(
            result_of(&answer)["stdout"],
            "go\ndone\n",
            "{who:?}: {answer}"
        );
        let status = wait_bounded(&mut server.child, Duration::from_secs(30));
        assert!(status.is_some_and(|s| s.success()), "{who:?}: {status:?}");
    }
}
