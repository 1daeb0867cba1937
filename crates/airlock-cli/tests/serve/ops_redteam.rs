//! Red-team of the operator surfaces of `airlock serve` (issue 29) through the real binary,
//! the server as root and as `airlock-test`, each attack asserted by external evidence:
//!
//! - the operator routes as a hostile network peer: one request per connection (a pipelined
//!   upgrade or `/metrics` after `/healthz` is never answered), HTTP/1.0 and keep-alive close
//!   after one answer, path and absolute-form tricks do not reach `/metrics` without the token,
//!   and no answer (200, 400, 401, 404, 405, 431) carries a version, a tenant or a sandbox id;
//! - traces as a hostile tenant: a client-chosen `process_id` (any length up to the message
//!   cap) never reaches an exported span (the bytes the collector receives);
//! - the drain: a `sandbox.snapshot` cut by the shutdown timeout does not leave its sandbox
//!   claimed, so the drain still pauses it and a successor has its files.
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::snapshots::{sandbox, sh, StateDir, IDENTITIES};
use super::support::*;

/// Everything the server sends on a fresh connection after `raw`, until it closes.
async fn exchange(addr: &str, raw: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(raw).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut got))
        .await
        .expect("the server did not close the connection")
        .unwrap_or_default();
    String::from_utf8_lossy(&got).into_owned()
}

/// The status codes of every response in `answer`.
fn statuses(answer: &str) -> Vec<&str> {
    answer
        .match_indices("HTTP/1.1 ")
        .map(|(i, _)| &answer[i + 9..i + 12])
        .collect()
}

/// A WebSocket upgrade with the server's token.
fn upgrade(token: &str) -> String {
    format!(
        "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
         Authorization: Bearer {token}\r\n\r\n"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn operator_routes_answer_one_request_per_connection_and_leak_nothing() {
    for who in IDENTITIES {
        let server = WsServer::start_as(who, &["--metrics-listen", "127.0.0.1:0"]);
        let main = server.addr.as_str();
        let ops = server.metrics.clone().expect("the metrics address");
        let mut c = server.connect().await;
        let sid = create(&mut c, json!({"spec": {}})).await;
        let bearer = format!("Authorization: Bearer {}", server.token);
        // Pipelined after /healthz: an authorized upgrade, and /metrics with the token. One
        // answer, then the connection is closed: nothing smuggled behind it is served.
        for behind in [
            upgrade(&server.token),
            format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{bearer}\r\n\r\n"),
        ] {
            let raw = format!("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n{behind}");
            let got = exchange(main, raw.as_bytes()).await;
            assert_eq!(statuses(&got), ["200"], "{who:?}: {got}");
            assert!(!got.contains("airlock_"), "{who:?}: {got}");
        }
        // HTTP/1.0, and HTTP/1.1 asking for keep-alive: closed after the one answer.
        for raw in [
            "GET /healthz HTTP/1.0\r\n\r\n",
            "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n",
        ] {
            let got = exchange(main, raw.as_bytes()).await;
            assert_eq!(statuses(&got), ["200"], "{who:?} {raw:?}: {got}");
        }
        // Paths that only look like the operator's, and absolute-form targets: no metrics
        // without the token, no upgrade, no exposed port.
        for target in [
            "/metrics?x",
            "/healthz/../metrics",
            "/healthz/../x/abc/",
            "http://127.0.0.1/metrics",
            "//metrics",
        ] {
            let raw = format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n");
            let got = exchange(main, raw.as_bytes()).await;
            assert!(!got.contains("airlock_"), "{who:?} {target}: {got}");
            assert!(!got.contains(" 101 "), "{who:?} {target}: {got}");
        }
        let raw = format!("GET /metrics?x HTTP/1.1\r\nHost: x\r\n{bearer}\r\n\r\n");
        assert!(exchange(main, raw.as_bytes()).await.contains("airlock_"));
        // Every answer an unauthenticated peer can get: nothing but the status.
        let huge = format!("GET /healthz HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(9000));
        let answers = [
            (main, "GET /healthz HTTP/1.1\r\n\r\n".to_owned(), "200"),
            (main, "GET /readyz HTTP/1.1\r\n\r\n".to_owned(), "200"),
            (main, "GET /metrics HTTP/1.1\r\n\r\n".to_owned(), "401"),
            (main, "DELETE /healthz HTTP/1.1\r\n\r\n".to_owned(), "405"),
            (
                main,
                "GET /healthz HTTP/1.1\r\nno colon\r\n\r\n".to_owned(),
                "400",
            ),
            (main, huge, "431"),
            (ops.as_str(), "GET /nope HTTP/1.1\r\n\r\n".to_owned(), "404"),
            (
                ops.as_str(),
                "PUT /metrics HTTP/1.1\r\n\r\n".to_owned(),
                "405",
            ),
        ];
        for (addr, raw, status) in answers {
            let got = exchange(addr, raw.as_bytes()).await;
            assert_eq!(statuses(&got), [status], "{who:?} {raw:.40}: {got}");
            for secret in [
                sid.as_str(),
                env!("CARGO_PKG_VERSION"),
                "default",
                "airlock_",
            ] {
                assert!(!got.contains(secret), "{who:?} {raw:.40}: {secret}: {got}");
            }
            assert!(!got.to_ascii_lowercase().contains("server:"), "{got}");
        }
    }
}

/// A stand-in OTLP collector: every request body it receives, answered `200`.
struct Collector {
    url: String,
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Collector {
    fn start() -> Collector {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&bodies);
        std::thread::spawn(move || {
            for s in listener.incoming() {
                let Ok(mut s) = s else { return };
                if let Some(body) = read_post(&mut s) {
                    kept.lock().unwrap().push(body);
                }
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
            }
        });
        Collector { url, bodies }
    }

    /// Every body received so far, concatenated.
    fn received(&self) -> Vec<u8> {
        self.bodies.lock().unwrap().concat()
    }
}

/// The body of one POST (its head up to `\r\n\r\n`, then `Content-Length` bytes).
fn read_post(s: &mut std::net::TcpStream) -> Option<Vec<u8>> {
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())?;
    while buf.len() < end + len {
        let n = s.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(buf[end..end + len].to_vec())
}

/// Whether `needle` occurs in `hay`.
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_chosen_process_id_does_not_reach_the_exported_spans() {
    for who in IDENTITIES {
        let collector = Collector::start();
        let mut server = WsServer::start_as(who, &["--otlp-endpoint", &collector.url]);
        let mut c = server.connect().await;
        let sid = create(&mut c, json!({"spec": {}})).await;
        // 200 000 bytes the client chose, as the sandbox part of a process id.
        let marker = format!("MARK{}", "Q".repeat(200_000));
        for method in ["process.wait", "process.signal", "process.input"] {
            let params = json!({"process_id": format!("{marker}.1"), "sandbox_id": null});
            let r = c.call(method, params).await;
            assert!(r.get("error").is_some(), "{who:?} {method}: {r:.200}");
        }
        let listed = c.call("sandbox.connect", json!({"sandbox_id": sid})).await;
        result_of(&listed);
        drop(c);
        assert_eq!(server.terminate().code(), Some(0), "{who:?}");
        let got = collector.received();
        // The export happened (the real sandbox's id is on its span), without the marker.
        assert!(contains(&got, sid.as_bytes()), "{who:?}: no spans exported");
        assert!(
            !contains(&got, b"MARKQQQQQQQQ"),
            "{who:?}: the client's process id is in the exported spans ({} bytes)",
            got.len()
        );
    }
}

/// Random bytes in /work: enough that writing their snapshot outlasts the shutdown timeout.
const BIG: &str = "head -c 48000000 /dev/urandom > /work/big && echo kept > /work/kept";

/// Wait (bounded) until a snapshot is being written: a `.tmp-*` file in the store.
async fn writing(store: &std::path::Path) {
    let end = Instant::now() + PATIENCE;
    loop {
        let names = std::fs::read_dir(store).into_iter().flatten().flatten();
        if names
            .map(|e| e.file_name())
            .any(|n| n.to_string_lossy().starts_with(".tmp-"))
        {
            return;
        }
        assert!(
            Instant::now() < end,
            "no snapshot being written in {store:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_snapshot_cut_by_the_shutdown_timeout_does_not_make_the_drain_dispose_its_sandbox() {
    for who in IDENTITIES {
        let state = StateDir::new(who);
        let dir = state.dir.to_str().unwrap();
        let args = [
            "--state-dir",
            dir,
            "--drain-grace",
            "0",
            "--shutdown-timeout",
            "0.05",
            "--log-level",
            "info",
        ];
        let mut server = WsServer::start_as(who, &args);
        let mut c = server.connect().await;
        let sid = sandbox(&mut c, json!({})).await;
        sh(&mut c, &sid, BIG).await;
        // A snapshot in flight (its answer never awaited), then the drain.
        c.request("sandbox.snapshot", json!({"sandbox_id": sid}))
            .await;
        writing(&state.dir.join("snapshots")).await;
        let t0 = Instant::now();
        let status = server.terminate();
        assert_eq!(status.code(), Some(0), "{who:?}: {}", server.stderr());
        eprintln!("{who:?}: exited after {:?}", t0.elapsed());
        let log = server.stderr();
        // The scenario happened: the snapshot's connection was cut by the shutdown timeout.
        assert!(
            log.contains("shutdown timeout; aborting what is left"),
            "{who:?}: the snapshot ended before the timeout: {log}"
        );
        assert!(
            !log.contains("its pause failed"),
            "{who:?}: the drain disposed of the sandbox: {log}"
        );
        assert_eq!(state.records().len(), 1, "{who:?}: {log}");
        drop((c, server));
        let successor = WsServer::start_as(who, &["--state-dir", dir]);
        let mut c = successor.connect().await;
        assert_eq!(
            sh(&mut c, &sid, "cat /work/kept").await,
            "kept\n",
            "{who:?}"
        );
    }
}
