//! Exposed ports (`sandbox.expose`, `sandbox.unexpose`) held to `docs/server.md` ("Ports:
//! sandbox.expose") through the real binary: the capability gate, the stdio refusal, the URL
//! on the server's own listener, a background server fetched through it, and one answer for
//! every token that names no live exposure.
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::support::*;

const REFUSED: i64 = -32007;
const INVALID_PARAMS: i64 = -32602;
const NOT_FOUND: i64 = -32016;

/// The identities the attack tests run the server as.
const IDENTITIES: [Option<&str>; 2] = [None, Some("airlock-test")];

async fn create(c: &mut WsClient, requires: &[&str]) -> String {
    let r = c
        .call("sandbox.create", json!({"spec": {"requires": requires}}))
        .await;
    result_of(&r)["sandbox_id"].as_str().unwrap().to_string()
}

async fn expose(c: &mut WsClient, sid: &str, port: u32) -> Value {
    c.call("sandbox.expose", json!({"sandbox_id": sid, "port": port}))
        .await
}

/// The URL of an exposure (asserted to be one).
async fn exposed(c: &mut WsClient, sid: &str, port: u32) -> String {
    let r = expose(c, sid, port).await;
    let r = result_of(&r);
    assert_eq!(r["port"], port, "{r}");
    assert_eq!(r["expires"], Value::Null, "{r}");
    r["url"].as_str().unwrap().to_string()
}

/// `url` split into the listener's address and the path.
fn split_url(url: &str) -> (String, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let slash = rest.find('/').unwrap();
    (rest[..slash].to_string(), rest[slash..].to_string())
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`): every byte of the answer.
async fn http(addr: &str, method: &str, path: &str, headers: &str) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut all = Vec::new();
    tokio::time::timeout(PATIENCE, s.read_to_end(&mut all))
        .await
        .expect("no answer in time")
        .unwrap();
    all
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn expose_is_refused_without_the_ports_capability_and_ports_are_checked() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    // The default spec does not hold `ports`: a spec must ask for it.
    let r = c.call("sandbox.create", json!({"spec": {}})).await;
    let requires = &result_of(&r)["requires"];
    assert!(
        !requires.as_array().unwrap().contains(&json!("ports")),
        "{r}"
    );
    let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_string();
    for method in ["sandbox.expose", "sandbox.unexpose"] {
        let r = c
            .call(method, json!({"sandbox_id": sid, "port": 8000}))
            .await;
        assert_eq!(error_code(&r), REFUSED, "{method}: {r}");
        let msg = r["error"]["message"].as_str().unwrap();
        assert!(msg.contains("ports"), "{msg}");
    }
    let sid = create(&mut c, &["exec", "ports"]).await;
    for bad in [
        json!(0),
        json!(65536),
        json!(-1),
        json!("8000"),
        Value::Null,
    ] {
        let r = c
            .call("sandbox.expose", json!({"sandbox_id": sid, "port": bad}))
            .await;
        assert_eq!(error_code(&r), INVALID_PARAMS, "{bad}: {r}");
    }
    let r = c
        .call(
            "sandbox.expose",
            json!({"sandbox_id": "sb-nope", "port": 80}),
        )
        .await;
    assert_eq!(error_code(&r), NOT_FOUND, "{r}");
    // The URL is on the server's own listener, and the same port has one URL.
    let url = exposed(&mut c, &sid, 8000).await;
    assert!(
        url.starts_with(&format!("http://{}/x/", server.addr)) && url.ends_with('/'),
        "{url}"
    );
    let token = url.trim_end_matches('/').rsplit('/').next().unwrap();
    assert!(token.len() >= 32, "{token}: 128 bits at least");
    assert_eq!(exposed(&mut c, &sid, 8000).await, url);
    assert_ne!(exposed(&mut c, &sid, 8001).await, url);
    let r = c
        .call("sandbox.unexpose", json!({"sandbox_id": sid, "port": 8000}))
        .await;
    assert_eq!(result_of(&r), &json!({"port": 8000}));
    // Re-exposing after a revocation mints a new URL.
    assert_ne!(exposed(&mut c, &sid, 8000).await, url);
}

#[test]
fn expose_on_a_stdio_server_is_refused_naming_the_flag_to_use() {
    let mut s = StdioServer::start(&[]);
    s.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "sandbox.create",
                   "params": {"spec": {"requires": ["exec", "ports"]}}}),
    );
    let r = s.recv().unwrap();
    let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_string();
    s.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "sandbox.expose",
                   "params": {"sandbox_id": sid, "port": 8000}}),
    );
    let r = s.recv().unwrap();
    assert_eq!(error_code(&r), REFUSED, "{r}");
    assert_eq!(r["error"]["data"]["kind"], "PortsNeedListener", "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.contains("--listen"), "{msg}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revoked_or_disposed_token_is_answered_exactly_like_one_never_issued() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let sid = create(&mut c, &["exec", "ports"]).await;
    let other = create(&mut c, &["exec", "ports"]).await;
    let revoked = exposed(&mut c, &sid, 8000).await;
    let live = exposed(&mut c, &sid, 8001).await;
    let disposed = exposed(&mut c, &other, 8000).await;
    c.call("sandbox.unexpose", json!({"sandbox_id": sid, "port": 8000}))
        .await;
    let r = c
        .call("sandbox.dispose", json!({"sandbox_id": other}))
        .await;
    assert!(result_of(&r)["disposal"].is_null(), "{r}");
    let (addr, _) = split_url(&live);
    let never = "/x/0123456789abcdef0123456789abcdef01234567/";
    let bearer = format!("Authorization: Bearer {}\r\n", server.token);
    let mut answers = Vec::new();
    for path in [
        split_url(&revoked).1,
        split_url(&disposed).1,
        never.to_string(),
        "/x/not-a-token/".to_string(),
        "/x/".to_string(),
    ] {
        for headers in ["", bearer.as_str()] {
            for method in ["GET", "POST"] {
                let a = http(&addr, method, &path, headers).await;
                answers.push((format!("{method} {path} {headers:?}"), a));
            }
        }
    }
    let first = answers[0].1.clone();
    assert!(
        text(&first).starts_with("HTTP/1.1 404 "),
        "{}",
        text(&first)
    );
    for (what, a) in &answers {
        assert_eq!(text(a), text(&first), "{what}");
    }
    // The live URL is not refused as unknown: before the machine every dial is refused (502),
    // after it nothing listens on 8001 (502 as well).
    let a = text(&http(&addr, "GET", &split_url(&live).1, "").await);
    assert!(a.starts_with("HTTP/1.1 502 "), "{a}");
    assert!(a.contains("port 8001"), "{a}");
    // The WebSocket still answers on the same listener, token checked as before.
    assert!(server.connect_with(None).await.is_err());
    let r = c.call("sandbox.connect", json!({"sandbox_id": sid})).await;
    assert_eq!(result_of(&r)["sandbox_id"], sid);
}

// ---- Needs the sandbox machine (`process.start`, `LocalSandbox::dial_port`). ----

const MACHINE_SPEC: [&str; 6] = [
    "run_code",
    "exec",
    "files_in",
    "files_out",
    "processes",
    "ports",
];

/// Start `python3 -m http.server PORT` in `sid` serving `/work`, with `index.html` = `body`,
/// and wait until `url` answers 200.
async fn serve_http(c: &mut WsClient, sid: &str, port: u16, body: &str, url: &str) {
    let r = c
        .call(
            "files.write",
            json!({"sandbox_id": sid, "path": "index.html", "data": b64(body.as_bytes())}),
        )
        .await;
    result_of(&r);
    let argv = json!([
        "python3",
        "-m",
        "http.server",
        port.to_string(),
        "--bind",
        "127.0.0.1",
        "--directory",
        "/work"
    ]);
    let r = c
        .call("process.start", json!({"sandbox_id": sid, "argv": argv}))
        .await;
    assert!(result_of(&r)["process_id"].is_string(), "{r}");
    let (addr, path) = split_url(url);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let a = text(&http(&addr, "GET", &path, "").await);
        if a.starts_with("HTTP/1.0 200") || a.starts_with("HTTP/1.1 200") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the sandbox's server never answered: {a}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandboxs_http_server_is_fetched_through_its_url() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let sid = create(&mut c, &MACHINE_SPEC).await;
    let url = exposed(&mut c, &sid, 8000).await;
    serve_http(&mut c, &sid, 8000, "hello from the sandbox", &url).await;
    let (addr, path) = split_url(&url);
    let a = text(&http(&addr, "GET", &format!("{path}index.html?x=1"), "").await);
    assert!(a.contains("200"), "{a}");
    assert!(a.ends_with("hello from the sandbox"), "{a}");
}

#[tokio::test(flavor = "multi_thread")]
async fn unexpose_and_dispose_close_live_proxied_connections_at_once() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    for end in ["sandbox.unexpose", "sandbox.dispose"] {
        let sid = create(&mut c, &MACHINE_SPEC).await;
        let url = exposed(&mut c, &sid, 8000).await;
        serve_http(&mut c, &sid, 8000, "x", &url).await;
        let (addr, path) = split_url(&url);
        // A keep-alive connection, open and idle after one exchange.
        let mut s = TcpStream::connect(&addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut b = vec![0u8; 4096];
        let n = tokio::time::timeout(PATIENCE, s.read(&mut b))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0);
        let params = match end {
            "sandbox.unexpose" => json!({"sandbox_id": sid, "port": 8000}),
            _ => json!({"sandbox_id": sid}),
        };
        let started = Instant::now();
        result_of(&c.call(end, params).await);
        // Whatever was still buffered, then the end of the connection.
        let closed = tokio::time::timeout(Duration::from_secs(2), async {
            loop {
                match s.read(&mut b).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "{end}: the proxied connection stayed open");
        assert!(started.elapsed() < Duration::from_secs(2));
        let a = text(&http(&addr, "GET", &path, "").await);
        assert!(a.starts_with("HTTP/1.1 404 "), "{end}: {a}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exposed_url_reaches_only_its_own_sandboxs_loopback() {
    for who in IDENTITIES {
        let server = WsServer::start_as(who, &[]);
        let mut c = server.connect().await;
        // Sandbox B serves on 8000; sandbox A exposes its own 8000, where nothing listens.
        let a = create(&mut c, &MACHINE_SPEC).await;
        let b = create(&mut c, &MACHINE_SPEC).await;
        let b_url = exposed(&mut c, &b, 8000).await;
        serve_http(&mut c, &b, 8000, "sandbox B", &b_url).await;
        let a_url = exposed(&mut c, &a, 8000).await;
        let (addr, a_path) = split_url(&a_url);
        let got = text(&http(&addr, "GET", &a_path, "").await);
        assert!(got.starts_with("HTTP/1.1 502 "), "{who:?}: {got}");
        assert!(
            !got.contains("sandbox B"),
            "{who:?}: A's URL reached B: {got}"
        );
        // A port the host listens on, on its own loopback: exposing it reaches the sandbox's
        // loopback, never the host's.
        let host = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = host.local_addr().unwrap().port();
        let h_url = exposed(&mut c, &a, u32::from(port)).await;
        let got = text(&http(&addr, "GET", &split_url(&h_url).1, "").await);
        assert!(got.starts_with("HTTP/1.1 502 "), "{who:?}: {got}");
        let accepted = tokio::time::timeout(Duration::from_millis(500), host.accept()).await;
        assert!(
            accepted.is_err(),
            "{who:?}: the host's listener got a connection"
        );
        // The server's own listener, exposed from inside: the sandbox's loopback, not the host's.
        let own = server
            .addr
            .rsplit(':')
            .next()
            .unwrap()
            .parse::<u32>()
            .unwrap();
        let o_url = exposed(&mut c, &a, own).await;
        let got = text(&http(&addr, "GET", &split_url(&o_url).1, "").await);
        assert!(got.starts_with("HTTP/1.1 502 "), "{who:?}: {got}");
    }
}

/// A guest server that writes every request head it gets to `/work/seen.log` and answers
/// 200 with the count of heads so far.
const ECHO_SERVER: &str = r#"
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open("/work/seen.log", "a") as f:
            f.write(self.requestline + "\n" + str(self.headers) + "\n")
        body = b"seen"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", 8000), H).serve_forever()
"#;

/// Alice sends her token, in every form a client might, to Bob's exposed URL; Bob's guest
/// logs every request head it gets. No form of her token (nor Bob's, nor either one's in the
/// target) reaches his guest, while the rest of each request does. Root and airlock-test.
#[tokio::test(flavor = "multi_thread")]
async fn no_tenants_token_reaches_a_guest_whatever_form_carries_it() {
    use base64::Engine as _;
    let b64s = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    for who in IDENTITIES {
        let (server, tokens) = WsServer::start_tenants(who, &["alice", "bob"], &[]);
        let (alice, bob) = (tokens["alice"].clone(), tokens["bob"].clone());
        let mut b = server.connect_as(&bob).await;
        let sid = create(&mut b, &MACHINE_SPEC).await;
        let r = b
            .call(
                "files.write",
                json!({"sandbox_id": sid, "path": "echo.py", "data": b64(ECHO_SERVER.as_bytes())}),
            )
            .await;
        result_of(&r);
        let r = b
            .call(
                "process.start",
                json!({"sandbox_id": sid, "argv": ["python3", "/work/echo.py"]}),
            )
            .await;
        assert!(result_of(&r)["process_id"].is_string(), "{r}");
        let url = exposed(&mut b, &sid, 8000).await;
        let (addr, path) = split_url(&url);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !text(&http(&addr, "GET", &path, "").await).contains("200") {
            assert!(
                Instant::now() < deadline,
                "{who:?}: the guest never answered"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut forms = Vec::new();
        for tok in [&alice, &bob] {
            forms.extend([
                format!("Authorization: Bearer\t{tok}"),
                format!("Authorization: {tok}"),
                format!("Authorization: Basic {}", b64s(&format!("x:{tok}"))),
                format!("authorization: bearer {tok}"),
                format!("Proxy-Authorization: Bearer {tok}"),
                format!("Cookie: session=1; token={tok}"),
                format!("X-Api-Key: {tok}"),
                format!("X-Wrapped: {}", b64s(tok)),
            ]);
        }
        let mut forwarded = 0;
        for form in &forms {
            let got =
                text(&http(&addr, "GET", &path, &format!("{form}\r\nX-Keep: kept\r\n")).await);
            assert!(got.starts_with("HTTP/1.0 200"), "{who:?} {form}: {got}");
            forwarded += 1;
        }
        // A token in the target: refused, never forwarded.
        for tok in [&alice, &bob] {
            let got = text(&http(&addr, "GET", &format!("{path}?token={tok}"), "").await);
            assert!(got.starts_with("HTTP/1.1 400 "), "{who:?}: {got}");
        }
        let r = b
            .call("files.read", json!({"sandbox_id": sid, "path": "seen.log"}))
            .await;
        let seen = text(&unb64(&result_of(&r)["data"]));
        assert_eq!(
            seen.matches("X-Keep: kept").count(),
            forwarded,
            "{who:?}: {seen}"
        );
        for tok in [&alice, &bob] {
            let basic = b64s(&format!("x:{tok}"));
            let wrapped = b64s(tok);
            for needle in [tok.as_str(), &tok[8..], basic.as_str(), wrapped.as_str()] {
                assert!(
                    !seen.contains(needle),
                    "{who:?}: the guest saw {needle}: {seen}"
                );
            }
        }
        assert!(
            !seen.to_ascii_lowercase().contains("proxy-authorization"),
            "{who:?}: {seen}"
        );
    }
}

/// A guest port that never accepts (a full backlog) cannot stall the server: dials of one
/// sandbox take one lane and are refused as busy past its wait, so a wave of requests to that
/// port leaves the server's threads bounded, and another sandbox's port and session calls are
/// served meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn a_port_that_never_accepts_cannot_stall_the_server() {
    const STUCK: &str = "import socket, time\n\
        l = socket.socket(); l.bind(('127.0.0.1', 8001)); l.listen(0)\n\
        held = []\n\
        for _ in range(8):\n    s = socket.socket(); s.setblocking(False)\n    \
        try:\n        s.connect(('127.0.0.1', 8001))\n    except BlockingIOError:\n        pass\n    \
        held.append(s)\n\
        print('stuck', flush=True)\n\
        time.sleep(600)\n";
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let a = create(&mut c, &MACHINE_SPEC).await;
    let b = create(&mut c, &MACHINE_SPEC).await;
    let url_b = exposed(&mut c, &b, 8000).await;
    serve_http(&mut c, &b, 8000, "b is fine", &url_b).await;
    let r = c
        .call(
            "process.start",
            json!({"sandbox_id": a, "argv": ["python3", "-c", STUCK]}),
        )
        .await;
    let pid = result_of(&r)["process_id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = c.call("process.output", json!({"process_id": pid})).await;
        if String::from_utf8_lossy(&unb64(&result_of(&r)["stdout"])).contains("stuck") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the stuck listener never started"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let url_a = exposed(&mut c, &a, 8001).await;
    let (addr, path_a) = split_url(&url_a);
    let wave: Vec<_> = (0..60)
        .map(|_| {
            let (addr, path) = (addr.clone(), path_a.clone());
            tokio::spawn(async move { http(&addr, "GET", &path, "").await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Meanwhile: B's port and a session call on B are served promptly.
    let (_, path_b) = split_url(&url_b);
    let started = Instant::now();
    let got = text(&http(&addr, "GET", &format!("{path_b}index.html"), "").await);
    assert!(got.ends_with("b is fine"), "{got}");
    let r = c
        .call(
            "sandbox.exec",
            json!({"sandbox_id": b, "argv": ["echo", "ok"]}),
        )
        .await;
    assert_eq!(result_of(&r)["stdout"], "ok\n", "{r}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "another sandbox waited {:?} behind a stuck port",
        started.elapsed()
    );
    let threads = std::fs::read_to_string(format!("/proc/{}/status", server.pid()))
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("Threads:")
                .map(|t| t.trim().parse::<u32>().unwrap())
        })
        .unwrap();
    assert!(threads < 40, "the server grew to {threads} threads");
    for w in wave {
        let a = text(&w.await.unwrap());
        assert!(a.starts_with("HTTP/1.1 50"), "{a}");
    }
}
