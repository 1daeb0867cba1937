//! The proxy: accepts the sandbox's connections on a listener the broker was handed, reads
//! one request head per connection, vets it, and either tunnels (`CONNECT`), forwards (plain
//! HTTP, one request per connection), or answers with an explanation. Every decision goes to
//! the sink. Dropping the future returned by [`Proxy::serve`] ends every connection.
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::decision::{Decision, DecisionSink, DenyReason};
use crate::head::{self, HeadError, Request, Target};
use crate::pump::pump;
use crate::reply;
use crate::resolve::Resolver;
use crate::rules::Rules;
use crate::vet::vet;

/// Bounds on what one run's proxy does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyLimits {
    /// Largest request head read (request line + headers).
    pub max_head_bytes: usize,
    /// Concurrent proxied connections per run; more get a 503.
    pub max_connections: usize,
    /// Time for the client to send its head.
    pub head_timeout: Duration,
    /// Time to resolve a name.
    pub resolve_timeout: Duration,
    /// Time to connect to one upstream address.
    pub connect_timeout: Duration,
    /// A connection with no byte moving either way for this long is closed.
    pub idle_timeout: Duration,
}

impl Default for ProxyLimits {
    fn default() -> ProxyLimits {
        ProxyLimits {
            // Real request heads are a few hundred bytes; 16 KiB leaves room for big cookies.
            max_head_bytes: 16 * 1024,
            // pip opens a handful of connections at once; 32 is generous and still bounded.
            max_connections: 32,
            head_timeout: Duration::from_secs(10),
            resolve_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// One run's proxy.
#[derive(Clone)]
pub struct Proxy {
    rules: Arc<Rules>,
    limits: ProxyLimits,
    resolver: Arc<dyn Resolver>,
    sink: Arc<dyn DecisionSink>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("rules", &self.rules)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// A proxy enforcing `rules`, resolving with `resolver`, reporting to `sink`.
    pub fn new(
        rules: Rules,
        limits: ProxyLimits,
        resolver: Arc<dyn Resolver>,
        sink: Arc<dyn DecisionSink>,
    ) -> Proxy {
        Proxy {
            rules: Arc::new(rules),
            limits,
            resolver,
            sink,
        }
    }

    /// Serve every connection `listener` accepts, until this future is dropped (which ends
    /// every connection it started).
    pub async fn serve(&self, listener: TcpListener) {
        let slots = Arc::new(Semaphore::new(self.limits.max_connections));
        let mut conns = JoinSet::new();
        loop {
            while conns.try_join_next().is_some() {}
            let (mut stream, _) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    // Out of fds and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "egress proxy accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            match slots.clone().try_acquire_owned() {
                Ok(permit) => {
                    let me = self.clone();
                    conns.spawn(async move {
                        me.handle(stream).await;
                        drop(permit);
                    });
                }
                Err(_) => {
                    // Best effort, never blocking the accept loop: the answer fits the
                    // socket buffer of a fresh connection.
                    let _ = stream.try_write(&reply::busy(self.limits.max_connections));
                    let _ = stream.shutdown().await;
                }
            }
        }
    }

    /// Serve one client connection to the end.
    pub async fn handle<S: AsyncRead + AsyncWrite + Unpin>(&self, mut client: S) {
        let read = tokio::time::timeout(
            self.limits.head_timeout,
            head::read_head(&mut client, self.limits.max_head_bytes),
        )
        .await;
        let (raw, rest) = match read {
            Ok(Ok(h)) => h,
            Ok(Err(HeadError::Closed)) => return,
            Err(_) => {
                self.refuse(
                    &mut client,
                    "?",
                    0,
                    "?",
                    DenyReason::BadRequest("no request head in time".into()),
                )
                .await;
                return;
            }
            Ok(Err(HeadError::TooLarge)) => {
                let why = DenyReason::BadRequest(format!(
                    "request head over {} bytes",
                    self.limits.max_head_bytes
                ));
                self.refuse(&mut client, "?", 0, "?", why).await;
                return;
            }
            Ok(Err(HeadError::Bad(m))) => {
                self.refuse(&mut client, "?", 0, "?", DenyReason::BadRequest(m))
                    .await;
                return;
            }
        };
        let req = match head::parse(&raw) {
            Ok(r) => r,
            Err(HeadError::Bad(m)) => {
                let method = first_word(&raw);
                self.refuse(&mut client, "?", 0, &method, DenyReason::BadRequest(m))
                    .await;
                return;
            }
            Err(_) => return,
        };
        // Everything malformed was refused by `parse`, before any name was resolved or any
        // upstream contacted; from here on the head is well formed and its end is known.
        let host = req.host.to_string();
        let addrs = match vet(
            &self.rules,
            self.resolver.as_ref(),
            &req.host,
            req.port,
            self.limits.resolve_timeout,
        )
        .await
        {
            Ok(a) => a,
            Err(why) => {
                self.refuse(&mut client, &host, req.port, &req.method, why)
                    .await;
                return;
            }
        };
        let target = format!("{host}:{}", req.port);
        let Some((upstream, ip)) = self.connect(&addrs, req.port).await else {
            // Allowed by policy; record it as such, with no address reached.
            let mut d = Decision::allow(&host, req.port, &req.method, addrs[0]);
            d.message = "allowed, but no address answered".into();
            d.address = None;
            self.sink.record(d);
            let _ = client
                .write_all(&reply::unreachable(&target, "connection failed"))
                .await;
            return;
        };
        self.sink
            .record(Decision::allow(&host, req.port, &req.method, ip));
        self.relay(client, upstream, &req, rest).await;
    }

    async fn relay<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        mut client: S,
        mut upstream: TcpStream,
        req: &Request,
        rest: Vec<u8>,
    ) {
        let idle = self.limits.idle_timeout;
        let first = match &req.target {
            Target::Connect => {
                let ok = b"HTTP/1.1 200 Connection established\r\n\r\n";
                if client.write_all(ok).await.is_err() {
                    return;
                }
                rest
            }
            Target::Http { .. } => {
                return self.forward_one(client, upstream, req, rest).await;
            }
        };
        if !first.is_empty()
            && !matches!(
                tokio::time::timeout(idle, upstream.write_all(&first)).await,
                Ok(Ok(()))
            )
        {
            return;
        }
        let _ = pump(client, upstream, idle).await;
    }

    /// Plain HTTP: forward exactly one request (head rewritten, body by its declared length),
    /// then only the response. Bytes after the body — a pipelined second request — are never
    /// sent, so every request that reaches an origin had its own decision.
    async fn forward_one<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        mut client: S,
        mut upstream: TcpStream,
        req: &Request,
        rest: Vec<u8>,
    ) {
        let idle = self.limits.idle_timeout;
        let body = req.body_length;
        let buffered = usize::try_from(body).unwrap_or(usize::MAX).min(rest.len());
        let mut first = req.origin_head();
        first.extend_from_slice(&rest[..buffered]);
        if !matches!(
            tokio::time::timeout(idle, upstream.write_all(&first)).await,
            Ok(Ok(()))
        ) {
            return;
        }
        let mut remaining = body - buffered as u64;
        let mut buf = vec![0u8; 16 * 1024];
        while remaining > 0 {
            let want = usize::try_from(remaining)
                .unwrap_or(buf.len())
                .min(buf.len());
            let n = match tokio::time::timeout(idle, client.read(&mut buf[..want])).await {
                Ok(Ok(n)) if n > 0 => n,
                _ => return,
            };
            if !matches!(
                tokio::time::timeout(idle, upstream.write_all(&buf[..n])).await,
                Ok(Ok(()))
            ) {
                return;
            }
            remaining -= n as u64;
        }
        let _ = upstream.shutdown().await;
        loop {
            let n = match tokio::time::timeout(idle, upstream.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => n,
                _ => break,
            };
            if client.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = client.shutdown().await;
    }

    /// Connect to the vetted addresses in order; never resolves again.
    async fn connect(&self, addrs: &[IpAddr], port: u16) -> Option<(TcpStream, IpAddr)> {
        for ip in addrs {
            let sa = SocketAddr::new(*ip, port);
            if let Ok(Ok(s)) =
                tokio::time::timeout(self.limits.connect_timeout, TcpStream::connect(sa)).await
            {
                let _ = s.set_nodelay(true);
                return Some((s, *ip));
            }
        }
        None
    }

    async fn refuse<S: AsyncWrite + Unpin>(
        &self,
        client: &mut S,
        host: &str,
        port: u16,
        method: &str,
        why: DenyReason,
    ) {
        let target = if port == 0 {
            host.to_string()
        } else {
            format!("{host}:{port}")
        };
        let answer = reply::denied(&target, &why, &self.rules);
        self.sink.record(Decision::deny(host, port, method, &why));
        let _ = tokio::time::timeout(self.limits.head_timeout, async {
            let _ = client.write_all(&answer).await;
            let _ = client.shutdown().await;
        })
        .await;
    }
}

/// The method of a refused head, for the decision record: a token of at most 32 bytes, else
/// `?` (a malformed head's bytes are not echoed into the record).
fn first_word(raw: &[u8]) -> String {
    let end = raw.iter().position(|b| *b == b' ').unwrap_or(raw.len());
    match &raw[..end] {
        w if w.len() <= 32 && crate::syntax::is_token(w) => String::from_utf8_lossy(w).into_owned(),
        _ => "?".into(),
    }
}
