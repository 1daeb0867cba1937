use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::registry::port_dial::{DialError, PortDialer};

const SERVER_TOKEN: &str = "server-token-0123456789";

fn auth() -> Auth {
    Auth::bearer(SERVER_TOKEN).unwrap()
}

#[test]
fn only_method_sp_x_slash_goes_to_the_proxy() {
    assert_eq!(route(b"GET /x/"), Some(Route::Port));
    assert_eq!(route(b"POST /x/abc HTTP/1.1\r\n"), Some(Route::Port));
    assert_eq!(route(b"GET / HTTP/1.1\r\n"), Some(Route::WebSocket));
    assert_eq!(route(b"GET /xy"), Some(Route::WebSocket));
    assert_eq!(route(b"GET /X/"), Some(Route::WebSocket));
    assert_eq!(route(b"GET /metrics HTTP/1.1\r\n"), Some(Route::Ops));
    assert_eq!(route(b"GET /readyz?x HTTP/1.1\r\n"), Some(Route::Ops));
    assert_eq!(route(b"GET /healthz"), None);
    assert_eq!(route(b"GET /healthzz HTTP/1.1\r\n"), Some(Route::WebSocket));
    assert_eq!(
        route(b"GET /metrics/x HTTP/1.1\r\n"),
        Some(Route::WebSocket)
    );
    assert_eq!(route(b"\x16\x03\x01"), Some(Route::WebSocket));
    assert_eq!(route(b" /x/"), Some(Route::WebSocket));
    assert_eq!(
        route(b"AVERYVERYLONGMETHODNAME /x/"),
        Some(Route::WebSocket)
    );
    // Undecided until the bytes tell.
    assert_eq!(route(b""), None);
    assert_eq!(route(b"GE"), None);
    assert_eq!(route(b"GET "), None);
    assert_eq!(route(b"GET /x"), None);
}

#[test]
fn the_target_loses_its_prefix_and_keeps_the_rest() {
    let t = "0123456789abcdef0123456789abcdef01234567";
    let cases = [
        (format!("/x/{t}/"), "/"),
        (format!("/x/{t}"), "/"),
        (format!("/x/{t}?a=1&b=/x/"), "/?a=1&b=/x/"),
        (format!("/x/{t}/static/app.js?v=2"), "/static/app.js?v=2"),
        (format!("/x/{t}//etc/passwd"), "//etc/passwd"),
    ];
    for (target, want) in cases {
        let (token, rest) = split_target(&target).unwrap();
        assert_eq!((token, rest.as_str()), (t, want), "{target}");
    }
    assert!(split_target("/y/abc").is_none());
    assert_eq!(split_target("/x/").unwrap(), ("", "/".to_string()));
}

#[test]
fn the_servers_token_never_reaches_the_guest_and_other_credentials_do() {
    let head = format!(
        "GET /x/tok/a?b HTTP/1.1\r\nHost: 127.0.0.1:9\r\nAuthorization: Bearer {SERVER_TOKEN}\r\n\
         Cookie: c=1\r\nAuthorization: Basic dXNlcjpwdw==\r\n\r\n"
    );
    let f = rewrite(head.as_bytes(), &auth()).unwrap();
    let out = String::from_utf8(f.head).unwrap();
    assert_eq!(
        out,
        "GET /a?b HTTP/1.1\r\nHost: 127.0.0.1:9\r\nCookie: c=1\r\n\
         Authorization: Basic dXNlcjpwdw==\r\n\r\n"
    );
    assert_eq!(f.token, "tok");
    assert_eq!(f.body_length, 0);
    assert!(!f.upgrade);
    assert!(!out.contains(SERVER_TOKEN));
}

/// Found by the `proxy_rewrite` fuzz target: a token in a header's name, or in the method.
#[test]
fn a_token_in_a_header_name_or_the_request_line_never_reaches_the_guest() {
    let head = format!(
        "POST /x/tok/ HTTP/1.1\r\nHost: h\r\nX-{SERVER_TOKEN}: 1\r\nContent-Length: 0\r\n\r\n"
    );
    let out = String::from_utf8(rewrite(head.as_bytes(), &auth()).unwrap().head).unwrap();
    assert_eq!(
        out,
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"
    );
    for head in [
        format!("{SERVER_TOKEN} /x/tok/ HTTP/1.1\r\nHost: h\r\n\r\n"),
        format!("GET /x/tok/?a=Bearer%20{SERVER_TOKEN} HTTP/1.1\r\nHost: h\r\n\r\n"),
    ] {
        let Err(Refusal(r)) = rewrite(head.as_bytes(), &auth()) else {
            panic!("forwarded: {head:?}")
        };
        assert!(String::from_utf8_lossy(&r).starts_with("HTTP/1.1 400 "));
    }
}

#[test]
fn requests_whose_end_or_lines_are_ambiguous_are_refused() {
    let bad = [
        "POST /x/t/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST /x/t/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "GET /x/t/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "GET /x/t/ HTTP/1.1\nHost: a\r\n\r\n",
        "GET /x/t/ HTTP/1.1\r\n folded: yes\r\n\r\n",
        "GET /x/t/ HTTP/2.0\r\n\r\n",
        "GET http://h/x/t/ HTTP/1.1\r\n\r\n",
    ];
    for h in bad {
        let Err(Refusal(r)) = rewrite(h.as_bytes(), &auth()) else {
            panic!("accepted {h:?}");
        };
        let status = String::from_utf8_lossy(&r[..12]).into_owned();
        assert!(
            status.ends_with("400") || status.ends_with("404"),
            "{h:?} -> {status}"
        );
    }
    let ok = rewrite(
        b"POST /x/t/up HTTP/1.1\r\nContent-Length: 5\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        &auth(),
    )
    .unwrap();
    assert_eq!(ok.body_length, 5);
    assert!(ok.upgrade);
}

async fn open_bytes(req: &[u8], x: &Exposures) -> Result<(String, Vec<u8>), Vec<u8>> {
    let (mut far, mut near) = tokio::io::duplex(64 * 1024);
    far.write_all(req).await.unwrap();
    drop(far);
    match open(&mut near, Vec::new(), Some(x), &auth()).await {
        Ok(o) => Ok((o.exposure.token, o.carry)),
        Err(r) => Err(r.0),
    }
}

#[tokio::test]
async fn a_revoked_token_is_answered_exactly_like_one_never_issued() {
    let x = Exposures::new();
    let live = x.expose("sb-1", 8000, || true).unwrap();
    let revoked = x.expose("sb-1", 8001, || true).unwrap();
    assert!(x.unexpose("sb-1", 8001));
    let ended = x.expose("sb-2", 8000, || true).unwrap();
    x.end_sandbox("sb-2");
    let req = |t: &str| format!("GET /x/{t}/ HTTP/1.1\r\nHost: h\r\n\r\n");
    let (token, carry) = open_bytes(req(&live.token).as_bytes(), &x).await.unwrap();
    assert_eq!((token, carry), (live.token.clone(), Vec::new()));
    let never = "0123456789abcdef0123456789abcdef01234567";
    let answers = [
        open_bytes(req(&revoked.token).as_bytes(), &x)
            .await
            .unwrap_err(),
        open_bytes(req(&ended.token).as_bytes(), &x)
            .await
            .unwrap_err(),
        open_bytes(req(never).as_bytes(), &x).await.unwrap_err(),
        open_bytes(req("not-a-token").as_bytes(), &x)
            .await
            .unwrap_err(),
        open_bytes(req("").as_bytes(), &x).await.unwrap_err(),
    ];
    for a in &answers {
        assert_eq!(a, &not_found(), "{}", String::from_utf8_lossy(a));
    }
    // A server with no sandboxes answers the same.
    let (mut far, mut near) = tokio::io::duplex(4096);
    far.write_all(req(&live.token).as_bytes()).await.unwrap();
    let r = open(&mut near, Vec::new(), None, &auth())
        .await
        .unwrap_err();
    assert_eq!(r.0, not_found());
}

#[tokio::test]
async fn a_head_over_the_cap_is_431_before_any_lookup() {
    let x = Exposures::new();
    let live = x.expose("sb-1", 8000, || true).unwrap();
    let big = format!(
        "GET /x/{}/ HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        live.token,
        "a".repeat(MAX_HEAD)
    );
    let r = open_bytes(big.as_bytes(), &x).await.unwrap_err();
    assert!(
        r.starts_with(b"HTTP/1.1 431 "),
        "{}",
        String::from_utf8_lossy(&r)
    );
}

/// Dials a listener on the host instead of a sandbox's loopback.
struct HostDialer(SocketAddr);

#[async_trait::async_trait]
impl PortDialer for HostDialer {
    async fn dial(&self, _sandbox_id: &str, _port: u16) -> Result<TcpStream, DialError> {
        TcpStream::connect(self.0)
            .await
            .map_err(|e| DialError::Refused(e.to_string()))
    }
}

/// A proxied connection on `client`'s far end, over `x`, dialing `upstream`.
fn proxy(
    x: Arc<Exposures>,
    upstream: SocketAddr,
    idle: Duration,
) -> (DuplexStream, tokio::task::JoinHandle<()>) {
    let (client, mut near) = tokio::io::duplex(64 * 1024);
    let task = tokio::spawn(async move {
        let shutdown = CancelToken::new();
        let dialer = HostDialer(upstream);
        let auth = auth();
        match open(&mut near, Vec::new(), Some(&x), &auth).await {
            Ok(o) => {
                let ctx = Ctx {
                    exposures: &x,
                    dialer: &dialer,
                    auth: &auth,
                    idle,
                    shutdown: &shutdown,
                };
                run(near, o, &ctx).await;
            }
            Err(r) => refuse(&mut near, &r.0).await,
        }
    });
    (client, task)
}

/// Read from `r` until `needle` has arrived; everything read.
async fn read_until<R: AsyncRead + Unpin>(r: &mut R, needle: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    while !got.windows(needle.len()).any(|w| w == needle) {
        let n = tokio::time::timeout(Duration::from_secs(5), r.read(&mut b))
            .await
            .expect("timed out")
            .unwrap();
        assert!(
            n > 0,
            "eof before {:?}: {:?}",
            needle,
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&b[..n]);
    }
    got
}

async fn closes<R: AsyncRead + Unpin>(r: &mut R) -> bool {
    let mut b = [0u8; 1024];
    matches!(
        tokio::time::timeout(Duration::from_secs(5), r.read(&mut b)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn keep_alive_requests_are_each_rewritten_and_bodies_and_responses_pass_through() {
    let x = Arc::new(Exposures::new());
    let e = x.expose("sb-1", 8000, || true).unwrap();
    let host = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (mut client, task) = proxy(Arc::clone(&x), host.local_addr().unwrap(), PROXY_IDLE);
    let t = &e.token;
    let two = format!(
        "POST /x/{t}/a?q=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello\
         GET /x/{t} HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer {SERVER_TOKEN}\r\n\r\n"
    );
    client.write_all(two.as_bytes()).await.unwrap();
    let (mut guest, _) = host.accept().await.unwrap();
    let seen = read_until(&mut guest, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").await;
    assert_eq!(
        String::from_utf8(seen).unwrap(),
        "POST /a?q=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello\
         GET / HTTP/1.1\r\nHost: h\r\n\r\n"
    );
    // Whatever the guest answers reaches the client as it is, garbage included.
    let garbage = b"HTTP/1.1 200 OK\r\nContent-Length: 999999\r\n\r\n\x00\xffnot http at all";
    guest.write_all(garbage).await.unwrap();
    let back = read_until(&mut client, b"not http at all").await;
    assert_eq!(back, garbage);
    drop(guest);
    assert!(closes(&mut client).await);
    task.await.unwrap();
}

#[tokio::test]
async fn after_an_accepted_upgrade_the_bytes_flow_unread_both_ways() {
    let x = Arc::new(Exposures::new());
    let e = x.expose("sb-1", 8000, || true).unwrap();
    let host = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (mut client, _task) = proxy(Arc::clone(&x), host.local_addr().unwrap(), PROXY_IDLE);
    let mut req = format!(
        "GET /x/{}/ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        e.token
    )
    .into_bytes();
    req.extend_from_slice(b"\x81\x05frame GET /x/not-parsed");
    client.write_all(&req).await.unwrap();
    let (mut guest, _) = host.accept().await.unwrap();
    let seen = read_until(&mut guest, b"\r\n\r\n").await;
    assert!(seen.starts_with(b"GET /ws HTTP/1.1\r\n"));
    // Nothing past the upgrade request reaches the guest before it switched.
    assert!(
        seen.ends_with(b"\r\n\r\n"),
        "{:?}",
        String::from_utf8_lossy(&seen)
    );
    guest
        .write_all(b"HTTP/1.1 101 Switching\r\n\r\n\x81\x02ok")
        .await
        .unwrap();
    read_until(&mut guest, b"/x/not-parsed").await;
    read_until(&mut client, b"\x81\x02ok").await;
}

/// `curl --http2` on `http://` asks for `Upgrade: h2c` on its first request; a guest that
/// declines answers it normally. Nothing the client sends after it — a request naming another
/// exposure, carrying the server's token — reaches the guest unchecked.
#[tokio::test]
async fn after_a_declined_upgrade_nothing_more_is_forwarded() {
    let x = Arc::new(Exposures::new());
    let mine = x.expose("sb-1", 8000, || true).unwrap();
    let other = x.expose("sb-2", 8000, || true).unwrap();
    let host = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (mut client, task) = proxy(Arc::clone(&x), host.local_addr().unwrap(), PROXY_IDLE);
    let req = format!(
        "GET /x/{}/one HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n\
         Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\n\
         POST /x/{}/two HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer {SERVER_TOKEN}\r\n\
         Content-Length: 6\r\n\r\nsecret",
        mine.token, other.token
    );
    client.write_all(req.as_bytes()).await.unwrap();
    let (mut guest, _) = host.accept().await.unwrap();
    let seen = read_until(&mut guest, b"\r\n\r\n").await;
    assert!(seen.starts_with(b"GET /one HTTP/1.1\r\n"));
    guest
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno")
        .await
        .unwrap();
    read_until(&mut client, b"\r\n\r\nno").await;
    // The guest hears nothing more: its side is shut.
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), guest.read_to_end(&mut rest)).await;
    let rest = String::from_utf8_lossy(&rest);
    assert!(
        !rest.contains("two") && !rest.contains(SERVER_TOKEN) && !rest.contains(&other.token),
        "{rest}"
    );
    drop(guest);
    task.await.unwrap();
}

/// `curl --http2` offers `h2c`: the offer is taken out (the guest answers in HTTP/1.1 and each
/// later request is rewritten), since after an accepted one the client's HTTP/2 frames would
/// flow unread, tokens and all.
#[test]
fn an_h2c_offer_is_taken_out_and_only_a_websocket_upgrade_passes() {
    let head = "GET /x/tok/ HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\n\
                Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n";
    let f = rewrite(head.as_bytes(), &auth()).unwrap();
    let out = String::from_utf8(f.head).unwrap();
    assert_eq!(
        out,
        "GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\n\r\n"
    );
    assert!(!f.upgrade);
    let ws = "GET /x/tok/ HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
    assert!(rewrite(ws.as_bytes(), &auth()).unwrap().upgrade);
}

#[tokio::test]
async fn an_upgrade_past_a_connections_first_request_closes_it_unforwarded() {
    let x = Arc::new(Exposures::new());
    let e = x.expose("sb-1", 8000, || true).unwrap();
    let host = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (mut client, task) = proxy(Arc::clone(&x), host.local_addr().unwrap(), PROXY_IDLE);
    let req = format!(
        "GET /x/{t}/a HTTP/1.1\r\nHost: h\r\n\r\n\
         GET /x/{t}/b HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        t = e.token
    );
    client.write_all(req.as_bytes()).await.unwrap();
    let (mut guest, _) = host.accept().await.unwrap();
    let mut seen = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), guest.read_to_end(&mut seen)).await;
    let seen = String::from_utf8_lossy(&seen);
    assert!(
        seen.starts_with("GET /a HTTP/1.1\r\n") && !seen.contains("GET /b"),
        "{seen}"
    );
    assert!(closes(&mut client).await);
    task.await.unwrap();
}

#[tokio::test]
async fn unexpose_closes_a_live_proxied_connection_at_once() {
    let x = Arc::new(Exposures::new());
    let e = x.expose("sb-1", 8000, || true).unwrap();
    let host = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (mut client, task) = proxy(Arc::clone(&x), host.local_addr().unwrap(), PROXY_IDLE);
    let req = format!("GET /x/{}/ HTTP/1.1\r\nHost: h\r\n\r\n", e.token);
    client.write_all(req.as_bytes()).await.unwrap();
    let (mut guest, _) = host.accept().await.unwrap();
    read_until(&mut guest, b"\r\n\r\n").await;
    guest
        .write_all(b"HTTP/1.1 200 OK\r\n\r\nstreaming")
        .await
        .unwrap();
    read_until(&mut client, b"streaming").await;
    let started = Instant::now();
    assert!(x.unexpose("sb-1", 8000));
    assert!(
        closes(&mut client).await,
        "the client's connection stays open"
    );
    assert!(
        closes(&mut guest).await,
        "the guest's connection stays open"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    task.await.unwrap();
}

#[tokio::test]
async fn a_request_naming_another_exposure_on_the_connection_closes_it_unforwarded() {
    let x = Arc::new(Exposures::new());
    let mine = x.expose("sb-1", 8000, || true).unwrap();
    let other = x.expose("sb-2", 8000, || true).unwrap();
    let host = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (mut client, task) = proxy(Arc::clone(&x), host.local_addr().unwrap(), PROXY_IDLE);
    let req = format!(
        "GET /x/{}/ HTTP/1.1\r\nHost: h\r\n\r\nGET /x/{}/ HTTP/1.1\r\nHost: h\r\n\r\n",
        mine.token, other.token
    );
    client.write_all(req.as_bytes()).await.unwrap();
    let (mut guest, _) = host.accept().await.unwrap();
    let mut all = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), guest.read_to_end(&mut all)).await;
    assert_eq!(all, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    assert!(closes(&mut client).await);
    task.await.unwrap();
}

#[tokio::test]
async fn a_quiet_connection_is_closed_after_the_idle_timeout() {
    let x = Arc::new(Exposures::new());
    let e = x.expose("sb-1", 8000, || true).unwrap();
    let host = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let idle = Duration::from_millis(300);
    let (mut client, task) = proxy(Arc::clone(&x), host.local_addr().unwrap(), idle);
    let req = format!("GET /x/{}/ HTTP/1.1\r\nHost: h\r\n\r\n", e.token);
    client.write_all(req.as_bytes()).await.unwrap();
    let (_guest, _) = host.accept().await.unwrap();
    assert!(closes(&mut client).await);
    task.await.unwrap();
}

#[tokio::test]
async fn a_port_nobody_answers_on_is_a_502_naming_the_port() {
    let x = Arc::new(Exposures::new());
    let e = x.expose("sb-1", 8000, || true).unwrap();
    let host = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = host.local_addr().unwrap();
    drop(host);
    let (mut client, task) = proxy(Arc::clone(&x), addr, PROXY_IDLE);
    let req = format!("GET /x/{}/ HTTP/1.1\r\nHost: h\r\n\r\n", e.token);
    client.write_all(req.as_bytes()).await.unwrap();
    let mut all = Vec::new();
    client.read_to_end(&mut all).await.unwrap();
    let text = String::from_utf8(all).unwrap();
    assert!(text.starts_with("HTTP/1.1 502 "), "{text}");
    assert!(text.contains("port 8000"), "{text}");
    task.await.unwrap();
}
