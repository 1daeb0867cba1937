//! The proxy end to end on loopback: stand-in servers on 127.0.0.2/127.0.0.3, the proxy on
//! 127.0.0.1, an injected resolver; every assertion is checked against what the servers saw.
#![allow(clippy::unwrap_used, reason = "test helpers fail loudly")]
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use airlock_egress::{DecisionLog, Proxy, ProxyLimits, Rules, StaticResolver};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A server that answers every connection with a fixed HTTP response and counts them.
struct Server {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
}

async fn server(ip: &str, body: &'static str) -> Server {
    let l = TcpListener::bind((ip, 0)).await.unwrap();
    let addr = l.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            h.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let first = String::from_utf8_lossy(&got)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string();
                let reply = format!("{body} {first}");
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                    reply.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
            });
        }
    });
    Server { addr, hits }
}

struct Harness {
    proxy: SocketAddr,
    log: Arc<DecisionLog>,
    _task: tokio::task::JoinHandle<()>,
}

async fn proxy(rules: Rules, resolver: StaticResolver, limits: ProxyLimits) -> Harness {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let log = Arc::new(DecisionLog::new(64));
    let p = Proxy::new(rules, limits, Arc::new(resolver), log.clone());
    let task = tokio::spawn(async move { p.serve(l).await });
    Harness {
        proxy: addr,
        log,
        _task: task,
    }
}

async fn exchange(proxy: SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

fn rules(allow: &[String], deny: &[&str], private: &[&str]) -> Rules {
    Rules::parse(allow, deny, private).unwrap()
}

#[tokio::test]
async fn allowed_host_is_forwarded_and_tunnelled_denied_host_sees_nothing() {
    let good = server("127.0.0.2", "good").await;
    let evil = server("127.0.0.3", "evil").await;
    let r = StaticResolver::new();
    r.answer("good.test", vec![vec![good.addr.ip()]]);
    r.answer("evil.test", vec![vec![evil.addr.ip()]]);
    let h = proxy(
        rules(
            &[format!("good.test:{}", good.addr.port())],
            &[],
            &["127.0.0.0/8"],
        ),
        r,
        ProxyLimits::default(),
    )
    .await;

    let port = good.addr.port();
    let resp = exchange(
        h.proxy,
        &format!(
            "GET http://good.test:{port}/x?y=1 HTTP/1.1\r\nProxy-Connection: keep-alive\r\n\r\n"
        ),
    )
    .await;
    assert!(resp.starts_with("HTTP/1.1 200 OK"), "{resp}");
    assert!(
        resp.ends_with("good GET /x?y=1 HTTP/1.1"),
        "origin-form path forwarded: {resp}"
    );

    let mut s = TcpStream::connect(h.proxy).await.unwrap();
    s.write_all(format!("CONNECT good.test:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = [0u8; 39];
    s.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"HTTP/1.1 200 Connection established\r\n\r\n");
    s.write_all(b"GET /tunnel HTTP/1.1\r\n\r\n").await.unwrap();
    let mut rest = String::new();
    s.read_to_string(&mut rest).await.unwrap();
    assert!(rest.ends_with("good GET /tunnel HTTP/1.1"), "{rest}");
    assert_eq!(good.hits.load(Ordering::SeqCst), 2);

    let eport = evil.addr.port();
    for req in [
        format!("GET http://evil.test:{eport}/ HTTP/1.1\r\n\r\n"),
        format!("CONNECT evil.test:{eport} HTTP/1.1\r\n\r\n"),
        format!("CONNECT 127.0.0.3:{eport} HTTP/1.1\r\n\r\n"),
    ] {
        let resp = exchange(h.proxy, &req).await;
        assert!(resp.starts_with("HTTP/1.1 403 Forbidden"), "{resp}");
        assert!(resp.contains("denied: host not in the allowlist"), "{resp}");
        assert!(
            resp.contains("retrying another way will not work"),
            "{resp}"
        );
    }
    assert_eq!(
        evil.hits.load(Ordering::SeqCst),
        0,
        "a denied server saw a connection"
    );

    let (log, dropped) = h.log.snapshot();
    assert_eq!(dropped, 0);
    let kinds: Vec<(&str, &str)> = log.iter().map(|d| (d.decision, d.reason)).collect();
    assert_eq!(
        kinds,
        [
            ("allow", "allowed"),
            ("allow", "allowed"),
            ("deny", "host_not_allowed"),
            ("deny", "host_not_allowed"),
            ("deny", "host_not_allowed")
        ]
    );
    assert_eq!(log[0].address, Some(good.addr.ip()));
}

#[tokio::test]
async fn a_rebinding_name_is_refused_once_it_points_inside() {
    let inside = server("127.0.0.2", "inside").await;
    let port = inside.addr.port();
    let r = StaticResolver::new();
    let public: IpAddr = "192.0.2.1".parse().unwrap();
    // First answer: a (documentation, hence unroutable but special) address we opted into,
    // standing in for "public"; second answer: the loopback server, not opted into.
    r.answer("flip.test", vec![vec![public], vec![inside.addr.ip()]]);
    let h = proxy(
        rules(&[format!("flip.test:{port}")], &[], &["192.0.2.0/24"]),
        r,
        ProxyLimits {
            connect_timeout: Duration::from_millis(200),
            ..ProxyLimits::default()
        },
    )
    .await;
    let first = exchange(
        h.proxy,
        &format!("CONNECT flip.test:{port} HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(
        first.starts_with("HTTP/1.1 502"),
        "allowed but unreachable: {first}"
    );
    let second = exchange(
        h.proxy,
        &format!("CONNECT flip.test:{port} HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(second.starts_with("HTTP/1.1 403"), "{second}");
    assert!(
        second.contains("127.0.0.2") && second.contains("loopback"),
        "{second}"
    );
    assert_eq!(inside.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn denied_port_bad_requests_and_deny_rules() {
    let good = server("127.0.0.2", "good").await;
    let port = good.addr.port();
    let other = server("127.0.0.2", "other").await;
    let r = StaticResolver::new();
    r.answer("good.test", vec![vec![good.addr.ip()]]);
    let h = proxy(
        rules(
            &[format!("good.test:{port}"), "*.test".into()],
            &["bad.test"],
            &["127.0.0.0/8"],
        ),
        r,
        ProxyLimits {
            max_head_bytes: 1024,
            ..ProxyLimits::default()
        },
    )
    .await;
    let resp = exchange(
        h.proxy,
        &format!("CONNECT good.test:{} HTTP/1.1\r\n\r\n", other.addr.port()),
    )
    .await;
    assert!(
        resp.starts_with("HTTP/1.1 403") && resp.contains("not on this port"),
        "{resp}"
    );
    let resp = exchange(h.proxy, "CONNECT bad.test:443 HTTP/1.1\r\n\r\n").await;
    assert!(resp.contains("explicitly denied"), "{resp}");
    let resp = exchange(h.proxy, "GET /relative HTTP/1.1\r\nHost: good.test\r\n\r\n").await;
    assert!(resp.starts_with("HTTP/1.1 400"), "{resp}");
    let huge = format!(
        "GET http://good.test/ HTTP/1.1\r\nX: {}\r\n\r\n",
        "a".repeat(4000)
    );
    let resp = exchange(h.proxy, &huge).await;
    assert!(
        resp.starts_with("HTTP/1.1 400") && resp.contains("over 1024 bytes"),
        "{resp}"
    );
    assert_eq!(other.hits.load(Ordering::SeqCst), 0);
    let (log, _) = h.log.snapshot();
    let kinds: Vec<&str> = log.iter().map(|d| d.reason).collect();
    assert_eq!(
        kinds,
        [
            "port_not_allowed",
            "host_denied",
            "bad_request",
            "bad_request"
        ]
    );
}

#[tokio::test]
async fn connections_beyond_the_cap_get_a_503() {
    let h = proxy(
        rules(&[], &[], &[]),
        StaticResolver::new(),
        ProxyLimits {
            max_connections: 2,
            head_timeout: Duration::from_secs(5),
            ..ProxyLimits::default()
        },
    )
    .await;
    // Two connections that never send a head hold both slots.
    let _a = TcpStream::connect(h.proxy).await.unwrap();
    let _b = TcpStream::connect(h.proxy).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let resp = exchange(h.proxy, "CONNECT x.test:443 HTTP/1.1\r\n\r\n").await;
    assert!(resp.starts_with("HTTP/1.1 503"), "{resp}");
}

/// A stand-in that records every byte it receives on its first connection.
async fn recorder(ip: &str) -> (SocketAddr, Arc<std::sync::Mutex<Vec<u8>>>) {
    let l = TcpListener::bind((ip, 0)).await.unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    tokio::spawn(async move {
        if let Ok((mut s, _)) = l.accept().await {
            let mut buf = vec![0u8; 4096];
            loop {
                match tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await {
                    Ok(Ok(n)) if n > 0 => {
                        s2.lock().unwrap().extend_from_slice(&buf[..n]);
                        if s2.lock().unwrap().windows(4).any(|w| w == b"\r\n\r\n") {
                            let _ = s
                                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                                .await;
                        }
                    }
                    _ => break,
                }
            }
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn plain_http_forwards_one_request_with_the_vetted_host() {
    // Review #19: a forged Host must not reach the origin, and a pipelined second request (or
    // one hidden after a declared body) must not be forwarded without its own decision.
    let (addr, seen) = recorder("127.0.0.2").await;
    let h = proxy(
        rules(&[addr.to_string()], &[], &["127.0.0.0/8"]),
        StaticResolver::default(),
        ProxyLimits::default(),
    )
    .await;
    let req = format!(
        "POST http://{addr}/a HTTP/1.1\r\nHost: evil.example:8767\r\nContent-Length: 4\r\n\r\nbody\
         GET http://{addr}/second HTTP/1.1\r\nHost: {addr}\r\n\r\n"
    );
    let out = exchange(h.proxy, &req).await;
    assert!(out.contains("200 OK"), "{out}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let got = String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
    assert!(got.starts_with("POST /a HTTP/1.1\r\n"), "{got}");
    assert!(got.contains(&format!("Host: {addr}\r\n")), "{got}");
    assert!(!got.contains("evil.example"), "{got}");
    assert!(got.ends_with("\r\n\r\nbody"), "{got}");
    assert!(
        !got.contains("/second"),
        "pipelined request forwarded: {got}"
    );
    // Chunked bodies are refused rather than guessed at.
    let chunked = format!(
        "POST http://{addr}/c HTTP/1.1\r\nHost: {addr}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    );
    let refused = exchange(h.proxy, &chunked).await;
    assert!(refused.contains(" 400 "), "{refused}");
}

#[tokio::test]
async fn malformed_heads_get_a_400_before_any_resolution_or_connection() {
    let good = server("127.0.0.2", "good").await;
    let port = good.addr.port();
    let r = StaticResolver::new();
    // Two queued answers: `pending` drops to 0 the first time the name is resolved.
    r.answer(
        "good.test",
        vec![vec![good.addr.ip()], vec![good.addr.ip()]],
    );
    let h = proxy(
        rules(&[format!("good.test:{port}")], &[], &["127.0.0.0/8"]),
        r.clone(),
        ProxyLimits::default(),
    )
    .await;
    let url = format!("http://good.test:{port}");
    let heads = [
        format!("GET {url}/a\nHost:evil.example\n\nGET\t/b HTTP/1.1\r\n\r\n"),
        format!("GET {url}/a\rb HTTP/1.1\r\n\r\n"),
        format!("GET {url}/a\tb HTTP/1.1\r\n\r\n"),
        format!("GET {url}/ HTTP/1.1\r\nA: 1\r\n folded\r\n\r\n"),
        format!("GET {url}/ HTTP/1.1\r\nHost: good.test\r\nHost: evil.example\r\n\r\n"),
        format!("POST {url}/ HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"),
        format!("POST {url}/ HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nbody"),
        format!("CONNECT good.test:{port} HTTP/1.1\r\nX: a\0b\r\n\r\n"),
        // A bare LF with the head still open: answered at once, not after the deadline.
        format!("GET {url}/ HTTP/1.1\nHost: good.test"),
    ];
    for head in &heads {
        let mut s = TcpStream::connect(h.proxy).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(3), s.read_to_end(&mut out))
            .await
            .unwrap()
            .unwrap();
        let out = String::from_utf8_lossy(&out);
        assert!(
            out.starts_with("HTTP/1.1 400 Bad Request"),
            "{head:?}: {out}"
        );
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        good.hits.load(Ordering::SeqCst),
        0,
        "a malformed head reached the origin"
    );
    assert_eq!(r.pending("good.test"), 1, "a malformed head was resolved");
    let (log, _) = h.log.snapshot();
    assert!(log.iter().all(|d| d.reason == "bad_request"), "{log:?}");
    assert_eq!(log.len(), heads.len());
    // The same proxy, resolver and origin serve a well-formed request: the evidence is live.
    let ok = exchange(h.proxy, &format!("GET {url}/ok HTTP/1.1\r\n\r\n")).await;
    assert!(ok.ends_with("good GET /ok HTTP/1.1"), "{ok}");
    assert_eq!(
        (good.hits.load(Ordering::SeqCst), r.pending("good.test")),
        (1, 0)
    );
}
