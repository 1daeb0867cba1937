//! Serving an exposed port (`sandbox.expose`) on the server's own listener.
//!
//! A request whose target starts with `/x/` is routed here instead of to the WebSocket
//! upgrade ([`route`], decided from at most the first [`SNIFF_MAX`] bytes). Its head is read
//! bounded ([`MAX_HEAD`], under the listener's pending budget and deadline), parsed with the
//! egress proxy's strict grammar, and its token looked up: an unknown token (revoked, never
//! issued, or not even token-shaped) gets one fixed 404 ([`not_found`]). Otherwise the
//! request-target loses its `/x/<token>` (the rest, query included, is kept; empty is `/`),
//! `Proxy-Authorization` and every header carrying one of the server's tokens in any form
//! (`Auth::carries_token`) are dropped and a target carrying one is refused (the guest never
//! learns a token, whoever's),
//! the sandbox's port is dialed through its network namespace
//! ([`PortDialer`](crate::registry::port_dial::PortDialer)) and the
//! rewritten head is forwarded.
//!
//! Then bytes flow both ways through bounded buffers ([`CHUNK`]). The guest's side is hostile
//! and is not parsed: its bytes reach the client as they are; only its first line (at most
//! [`MAX_STATUS_LINE`] bytes) is looked at, when the connection's first request asked for an
//! upgrade. The client's side is framed request by request (one `Content-Length` body, no
//! transfer codings, as the egress proxy does), so each keep-alive request is rewritten and
//! re-checked against its exposure. Only a connection's first request may ask for an upgrade
//! (a WebSocket, `h2c`; a later one closes the connection unforwarded); the client's bytes
//! after it are held until the guest answers, flow unread once it answered `101`, and are
//! never forwarded when it declined (its side is shut: nothing unchecked follows). The
//! connection ends when the guest closes, when either side fails, after [`PROXY_IDLE`] with no
//! byte either way, and at once when the exposure ends (unexpose, sandbox disposal or reclaim)
//! or the server shuts down.
//!
//! Not on hyper (issue 39, measured with hyper 1.13.0): its HTTP/1.1 server reads a
//! connection's next request only once the one before it is answered (two pipelined requests,
//! the first never answered: its service saw the first alone), and its client, by its source,
//! writes a request only once the answer to the one before was read. Three tests here need the pipelined request read
//! while the guest is silent:
//! `keep_alive_requests_are_each_rewritten_and_bodies_and_responses_pass_through` (the guest
//! answers once it has both), and
//! `a_request_naming_another_exposure_on_the_connection_closes_it_unforwarded` and
//! `an_upgrade_past_a_connections_first_request_closes_it_unforwarded` (refused and closed at
//! once; on hyper the connection would hold that request unread until [`PROXY_IDLE`]). Its
//! parser also takes a head the strict grammar refuses (a bare LF after the request line: what
//! `requests_whose_end_or_lines_are_ambiguous_are_refused` pins, invisible once parsed), and it
//! would parse and re-write the guest's answers, which pass here as the guest sent them.
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use airlock_egress::head::{frame, read_head, Framed, HeadError};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::oneshot;

use crate::cancel::CancelToken;
use crate::net::prefixed::Prefixed;
use crate::registry::expose::{Exposure, Exposures};
use crate::registry::port_dial::PortDialer;
use crate::tenancy::auth::Auth;

/// Where exposed ports are served: `/x/<token>/...`.
pub const PREFIX: &[u8] = b"/x/";
/// Longest method the router waits for before deciding (longer ones go to the WebSocket
/// upgrade, which refuses them).
const MAX_METHOD: usize = 16;
/// The paths the listener answers itself ([`crate::net::ops_http`]), each followed by a space or
/// a `?` (so `/metricsfoo` is not one).
pub const OPS_PATHS: [&[u8]; 3] = [b"/healthz", b"/readyz", b"/metrics"];
/// Bytes the router may need to decide: a method, a space, and the prefix or the longest
/// operator path with the byte after it.
pub const SNIFF_MAX: usize = MAX_METHOD + 1 + 9;
/// Largest request head forwarded (a browser's heads, cookies included, are a few KiB).
pub const MAX_HEAD: usize = 16 * 1024;
/// Buffer per direction: the pump holds at most this many bytes of either side at once.
pub const CHUNK: usize = 16 * 1024;
/// A proxied connection with no byte moving either way for this long is closed (long enough
/// for a dev server's long-poll or a quiet WebSocket).
pub const PROXY_IDLE: Duration = Duration::from_secs(300);
/// How long dialing the sandbox's port may take.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// Which service a connection on the listener asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The JSON-RPC WebSocket (the token check is the upgrade's).
    WebSocket,
    /// An exposed port (`/x/...`).
    Port,
    /// An operator endpoint (`/healthz`, `/readyz`, `/metrics`).
    Ops,
}

/// The route of a connection whose first bytes are `first`, or `None` while they cannot yet
/// tell. `METHOD SP /x/` is an exposed port, `METHOD SP` an operator path then a space or `?`
/// an operator endpoint; anything else goes to the WebSocket upgrade, as before.
#[must_use]
pub fn route(first: &[u8]) -> Option<Route> {
    let sp = first.iter().position(|b| *b == b' ');
    let method = &first[..sp.unwrap_or(first.len())];
    if !method
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b))
        || method.len() > MAX_METHOD
    {
        return Some(Route::WebSocket);
    }
    let sp = sp?;
    if sp == 0 {
        return Some(Route::WebSocket);
    }
    route_target(&first[sp + 1..])
}

/// The route of a request whose target starts with `after` (see [`route`]).
fn route_target(after: &[u8]) -> Option<Route> {
    let starts = |p: &[u8]| {
        let n = after.len().min(p.len());
        after[..n] == p[..n]
    };
    let mut undecided = false;
    if starts(PREFIX) {
        if after.len() >= PREFIX.len() {
            return Some(Route::Port);
        }
        undecided = true;
    }
    for path in OPS_PATHS.iter().filter(|p| starts(p)) {
        match after.get(path.len()) {
            None => undecided = true,
            Some(b' ' | b'?') => return Some(Route::Ops),
            Some(_) => {}
        }
    }
    (!undecided).then_some(Route::WebSocket)
}

/// Read from `r` until [`route`] decides; returns the route and every byte read (at most
/// [`SNIFF_MAX`] plus one read). Err when the peer closed first.
pub async fn sniff<R: AsyncRead + Unpin>(r: &mut R) -> io::Result<(Route, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = r.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(route) = route(&buf) {
            return Ok((route, buf));
        }
    }
}

/// A complete response of the broker's own, closing the connection.
fn reply(status: u16, phrase: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n{body}\n",
        body.len() + 1
    )
    .into_bytes()
}

/// The one answer for a token that names no live exposure: the same bytes whether it was
/// revoked, never issued, or not a token at all.
#[must_use]
pub fn not_found() -> Vec<u8> {
    reply(404, "Not Found", "no such exposure")
}

/// The answer when the server is at its connection limit.
#[must_use]
pub fn busy() -> Vec<u8> {
    reply(
        503,
        "Service Unavailable",
        "the server is at its connection limit",
    )
}

/// Why a request head was not forwarded: the response the client gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub Vec<u8>);

impl From<HeadError> for Refusal {
    fn from(e: HeadError) -> Self {
        match e {
            HeadError::TooLarge => Refusal(reply(
                431,
                "Request Header Fields Too Large",
                &format!("the request head is over {MAX_HEAD} bytes"),
            )),
            other => Refusal(reply(400, "Bad Request", &other.to_string())),
        }
    }
}

fn bad(why: impl AsRef<str>) -> Refusal {
    Refusal(reply(400, "Bad Request", why.as_ref()))
}

/// One request head, ready for the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    /// The token its target named.
    pub token: String,
    /// The head to send: target rewritten, the server's token dropped.
    pub head: Vec<u8>,
    /// Body bytes that follow it.
    pub body_length: u64,
    /// Whether it asks for an upgrade (after it, the client's bytes flow unread).
    pub upgrade: bool,
}

/// `/x/<token><rest>` → (`token`, the target the guest sees). `None` unless the target has
/// the prefix.
#[must_use]
pub fn split_target(target: &str) -> Option<(&str, String)> {
    let after = target.strip_prefix("/x/")?;
    let end = after.find(['/', '?']).unwrap_or(after.len());
    let (token, rest) = after.split_at(end);
    let rest = match rest.as_bytes().first() {
        None => "/".to_string(),
        Some(b'?') => format!("/{rest}"),
        Some(_) => rest.to_string(),
    };
    Some((token, rest))
}

/// The headers that say where a request's body ends.
const FRAMING: [&str; 3] = ["content-length", "transfer-encoding", "host"];

/// Parse one request head strictly and rewrite it for the guest (see the module doc).
pub fn rewrite(head: &[u8], auth: &Auth) -> Result<Forward, Refusal> {
    rewrite_framed(frame(head).map_err(bad)?, auth)
}

/// [`rewrite`] of a head already framed.
fn rewrite_framed(framed: Framed<'_>, auth: &Auth) -> Result<Forward, Refusal> {
    let Framed {
        line,
        headers,
        body_length,
    } = framed;
    let Some((token, target)) = split_target(line.target) else {
        return Err(Refusal(not_found()));
    };
    // A token in the request line cannot be cut out without changing what the guest is asked
    // for: the request is refused, unforwarded.
    let request_line = format!("{} {target}", line.method);
    if auth.carries_token(request_line.as_bytes()) {
        return Err(bad("the request line carries a token of this server's"));
    }
    let mut out = format!("{} {target} {}\r\n", line.method, line.version);
    let mut upgrade = false;
    for (k, v) in &headers {
        let carries = auth.carries_token(format!("{k}: {v}").as_bytes());
        // A header that frames the request cannot be dropped without the guest reading the
        // body differently: refused instead.
        if carries && FRAMING.iter().any(|f| k.eq_ignore_ascii_case(f)) {
            return Err(bad(
                "a header framing the request carries a token of this server's",
            ));
        }
        // A proxy's credential is never the origin's; any other header carrying a token of
        // the server's, in any form, in its value or its name, is dropped (the guest never
        // learns one). Only a WebSocket upgrade is passed on: after an accepted upgrade the
        // client's bytes flow unread, and `h2c`'s would be HTTP/2 requests (headers, tokens)
        // the proxy never rewrites; without the offer the guest answers in HTTP/1.1.
        let h2c = k.eq_ignore_ascii_case("http2-settings")
            || (k.eq_ignore_ascii_case("upgrade") && !v.trim().eq_ignore_ascii_case("websocket"));
        if k.eq_ignore_ascii_case("proxy-authorization") || carries || h2c {
            continue;
        }
        upgrade |= k.eq_ignore_ascii_case("upgrade");
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    Ok(Forward {
        token: token.to_owned(),
        head: out.into_bytes(),
        body_length,
        upgrade,
    })
}

/// A request ready to be proxied: its exposure, its first head, and the bytes of the client
/// read past that head.
#[derive(Debug)]
pub struct Opened {
    /// The exposure the token named.
    pub exposure: Exposure,
    forward: Forward,
    carry: Vec<u8>,
}

/// Read and check the first request head of a connection routed here (`sniffed`: the bytes
/// [`sniff`] read). Err: the response to send before closing.
pub async fn open<C: AsyncRead + Unpin>(
    client: &mut C,
    sniffed: Vec<u8>,
    exposures: Option<&Exposures>,
    auth: &Auth,
) -> Result<Opened, Refusal> {
    let (head, carry) = read_head(&mut Prefixed::new(sniffed, client), MAX_HEAD).await?;
    // The exposure first: a peer naming none gets its 404 before any work on its head (the
    // search for tokens is linear, but it is work).
    let framed = frame(&head).map_err(bad)?;
    let exposure = split_target(framed.line.target)
        .and_then(|(token, _)| exposures.and_then(|x| x.lookup(token)))
        .ok_or_else(|| Refusal(not_found()))?;
    let forward = rewrite_framed(framed, auth)?;
    Ok(Opened {
        exposure,
        forward,
        carry,
    })
}

/// What a proxied connection runs under.
pub struct Ctx<'a> {
    /// The server's exposures (each keep-alive request is checked against them again).
    pub exposures: &'a Exposures,
    /// How the sandbox's port is reached.
    pub dialer: &'a dyn PortDialer,
    /// The server's own auth (its token never reaches a guest).
    pub auth: &'a Auth,
    /// Closes a connection with no byte moving.
    pub idle: Duration,
    /// The server's shutdown.
    pub shutdown: &'a CancelToken,
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("idle", &self.idle)
            .finish_non_exhaustive()
    }
}

/// When a byte last moved, either way.
#[derive(Debug)]
struct Activity {
    base: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            base: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        self.base
            .elapsed()
            .saturating_sub(Duration::from_millis(self.last_ms.load(Ordering::Relaxed)))
    }

    /// Resolves once nothing moved for `idle`.
    async fn expired(&self, idle: Duration) {
        loop {
            let quiet = self.idle_for();
            if quiet >= idle {
                return;
            }
            tokio::time::sleep(idle - quiet).await;
        }
    }
}

/// A reader that marks activity on every read that returns bytes.
struct Touching<'a, R> {
    inner: R,
    act: &'a Activity,
}

impl<R: AsyncRead + Unpin> AsyncRead for Touching<'_, R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.act.touch();
        }
        r
    }
}

/// Copy until EOF (`Ok`) or failure, through one bounded buffer.
async fn copy_all<R, W>(r: &mut R, w: &mut W, act: &Activity) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        act.touch();
        w.write_all(&buf[..n]).await?;
        act.touch();
    }
}

/// Copy exactly `len` bytes (a request body), through one bounded buffer.
async fn copy_len<R, W>(r: &mut R, w: &mut W, mut len: u64, act: &Activity) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; CHUNK];
    while len > 0 {
        let want = usize::try_from(len).unwrap_or(CHUNK).min(CHUNK);
        let n = r.read(&mut buf[..want]).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        act.touch();
        w.write_all(&buf[..n]).await?;
        act.touch();
        len -= n as u64;
    }
    Ok(())
}

/// The client's side: one request at a time, each head rewritten and re-checked, each body
/// copied to its length; after an upgrade request, everything unread. `Ok` when the client
/// closed between requests (the guest's write side is shut then).
#[allow(
    clippy::too_many_arguments,
    reason = "the two ends, what came first, and the connection's state"
)]
async fn client_to_guest<R, W>(
    mut r: R,
    mut w: W,
    first: Forward,
    mut carry: Vec<u8>,
    switched: Option<oneshot::Receiver<bool>>,
    exposure: &Exposure,
    ctx: &Ctx<'_>,
    act: &Activity,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut fwd = first;
    let mut switched = switched;
    loop {
        // Only a connection's first request may ask for an upgrade (its answer is then the
        // guest's first bytes): a later one closes the connection unforwarded.
        if fwd.upgrade && switched.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "an upgrade is a connection's first request only",
            ));
        }
        ctx.dialer.touch(&exposure.sandbox_id);
        w.write_all(&fwd.head).await?;
        let from_carry = usize::try_from(fwd.body_length)
            .unwrap_or(usize::MAX)
            .min(carry.len());
        w.write_all(&carry[..from_carry]).await?;
        carry.drain(..from_carry);
        copy_len(&mut r, &mut w, fwd.body_length - from_carry as u64, act).await?;
        if fwd.upgrade {
            // The client's bytes flow unread only once the guest answered `101 Switching
            // Protocols`. A declined upgrade ends the client's side: nothing after it is
            // forwarded unchecked.
            let answer = switched.take();
            let accepted = match answer {
                Some(a) => a.await.unwrap_or(false),
                None => false,
            };
            if accepted {
                w.write_all(&carry).await?;
                copy_all(&mut r, &mut w, act).await?;
            }
            let _ = w.shutdown().await;
            return Ok(());
        }
        // Past the first request, no upgrade is awaited.
        switched = None;
        let mut reader = Prefixed::new(std::mem::take(&mut carry), Touching { inner: &mut r, act });
        let (head, rest) = match read_head(&mut reader, MAX_HEAD).await {
            Ok(h) => h,
            Err(HeadError::Closed) => {
                let _ = w.shutdown().await;
                return Ok(());
            }
            Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
        };
        carry = rest;
        fwd = rewrite(&head, ctx.auth)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "a malformed request"))?;
        // Every request on the connection names the same, still live, exposure.
        let same = fwd.token == exposure.token && ctx.exposures.lookup(&fwd.token).is_some();
        if !same {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "a request for another or a revoked exposure",
            ));
        }
    }
}

/// The most bytes read for the guest's first status line.
const MAX_STATUS_LINE: usize = 1024;

/// Pass the guest's first bytes on to the client up to the end of its first line (or
/// [`MAX_STATUS_LINE`] bytes, or EOF), and return that line: the answer to the connection's
/// first request, whose status says whether an upgrade was accepted.
async fn status_line<R, W>(r: &mut R, w: &mut W, act: &Activity) -> io::Result<Vec<u8>>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < MAX_STATUS_LINE && !line.ends_with(b"\n") {
        if r.read(&mut byte).await? == 0 {
            break;
        }
        act.touch();
        line.push(byte[0]);
    }
    w.write_all(&line).await?;
    Ok(line)
}

/// Whether a status line is `101 Switching Protocols`.
fn is_switching(line: &[u8]) -> bool {
    line.starts_with(b"HTTP/1.1 101 ") || line.starts_with(b"HTTP/1.0 101 ")
}

/// Write one response of the broker's own and close (bounded: a client that does not read
/// gets nothing more).
pub async fn refuse<C: AsyncWrite + Unpin>(client: &mut C, response: &[u8]) {
    let write = async {
        client.write_all(response).await?;
        client.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), write).await;
}

/// Proxy the connection `client`, opened by [`open`], to its exposure's port, until it ends
/// (see the module doc).
pub async fn run<C>(mut client: C, opened: Opened, ctx: &Ctx<'_>)
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let Opened {
        exposure,
        forward,
        carry,
    } = opened;
    let dial = ctx.dialer.dial(&exposure.sandbox_id, exposure.port);
    let guest = tokio::select! {
        r = tokio::time::timeout(DIAL_TIMEOUT, dial) => r,
        () = exposure.revoked.cancelled() => return,
        () = ctx.shutdown.cancelled() => return,
    };
    let guest = match guest {
        Ok(Ok(g)) => g,
        Ok(Err(e)) => {
            let body = format!("port {} of the sandbox did not answer: {e}", exposure.port);
            return refuse(&mut client, &reply(502, "Bad Gateway", &body)).await;
        }
        Err(_) => {
            let body = format!(
                "port {} of the sandbox did not answer in time",
                exposure.port
            );
            return refuse(&mut client, &reply(504, "Gateway Timeout", &body)).await;
        }
    };
    let _ = guest.set_nodelay(true);
    let act = Activity::new();
    let (cr, mut cw) = tokio::io::split(client);
    let (mut gr, gw) = guest.into_split();
    let (tell, switched) = oneshot::channel();
    let up = client_to_guest(cr, gw, forward, carry, Some(switched), &exposure, ctx, &act);
    let down = async {
        let r = match status_line(&mut gr, &mut cw, &act).await {
            Ok(line) => {
                let _ = tell.send(is_switching(&line));
                copy_all(&mut gr, &mut cw, &act).await
            }
            Err(e) => Err(e),
        };
        let _ = cw.shutdown().await;
        r
    };
    tokio::pin!(up, down);
    let idle = act.expired(ctx.idle);
    tokio::pin!(idle);
    let mut up_done = false;
    loop {
        tokio::select! {
            r = &mut up, if !up_done => match r {
                Ok(()) => up_done = true,
                Err(e) => {
                    tracing::debug!(error = %e, "proxied connection: the client's side ended it");
                    break;
                }
            },
            _ = &mut down => break,
            () = &mut idle => {
                tracing::debug!("proxied connection idle; closed");
                break;
            }
            () = exposure.revoked.cancelled() => break,
            () = ctx.shutdown.cancelled() => break,
        }
    }
}

#[cfg(test)]
#[path = "port_proxy_tests.rs"]
mod tests;
