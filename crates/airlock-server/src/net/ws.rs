//! The WebSocket transport (`airlock serve --listen ADDR`).
//!
//! Each text (or binary) message carries one JSON-RPC message. The upgrade is refused with
//! HTTP 401 unless it carries the bearer token; the maximum message and frame size is the
//! internal frame cap, so a message that fits one hop fits the other. A message over the cap
//! is answered `program_too_large` and the connection is closed with 1009 (the stream cannot
//! be resynchronised past an oversized frame). Each connection is its own task with its own
//! reader and writer, so a slow orchestrator only ever slows itself.
//!
//! The same listener serves exposed ports (`sandbox.expose`): a request whose target starts
//! with `/x/` goes to [`crate::net::port_proxy`] instead of the upgrade, decided from its first
//! bytes under the same pending budget and deadline (those bytes are replayed to the upgrade
//! otherwise). A proxied connection takes one of the `--max-connections` slots. A request for
//! `/healthz`, `/readyz` or `/metrics` is answered by [`crate::net::ops_http`], wholly within the
//! pending budget and its deadline: it never takes a slot.
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use airlock_protocol::{ErrorObject, Message, DEFAULT_MAX_MESSAGE_BYTES};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_tungstenite::tungstenite::error::CapacityError;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};
use tokio_tungstenite::WebSocketStream;

use crate::admission::{Pending, UPGRADE_DEADLINE};
use crate::net::accept::accept_until_shutdown;
use crate::net::framed::{FLUSH, OUTBOX};
use crate::net::port_proxy::{self, Route};
use crate::net::prefixed::Prefixed;
use crate::registry::port_dial::SandboxDialer;
use crate::server::Server;
use crate::tenancy::auth::Auth;
use crate::tenancy::tenant::Tenant;
use crate::wire::session::{self, ConnInfo};
use crate::wire::transport::{CloseKind, Inbound, Outbound};

/// Events queued from the reader to the session.
const INBOX: usize = 16;

type Ws = WebSocketStream<Prefixed<TcpStream>>;

/// An accepted connection not yet upgraded, with its place in the pending budget.
struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    auth: Auth,
    pending: Pending,
}

/// The WebSocket limits: the frame cap for messages and frames alike.
pub fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(DEFAULT_MAX_MESSAGE_BYTES))
        .max_frame_size(Some(DEFAULT_MAX_MESSAGE_BYTES))
}

fn decode(bytes: &[u8]) -> Inbound {
    match Message::from_slice(bytes) {
        Ok(m) => Inbound::Message(m),
        Err(e) => Inbound::Invalid(ErrorObject::new(e.error_code(), e.to_string())),
    }
}

/// Read an upgraded connection into `tx` until it ends (`pub(crate)` for the `ws_handshake` fuzz
/// target, which reads an in-memory stream).
pub(crate) async fn read_loop<S>(
    mut stream: SplitStream<WebSocketStream<S>>,
    tx: mpsc::Sender<Inbound>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    while let Some(item) = stream.next().await {
        let event = match item {
            Ok(WsMessage::Text(t)) => decode(t.as_bytes()),
            Ok(WsMessage::Binary(b)) => decode(&b),
            Ok(WsMessage::Close(_)) => break,
            Ok(WsMessage::Ping(_) | WsMessage::Pong(_) | WsMessage::Frame(_)) => continue,
            Err(WsError::Capacity(CapacityError::MessageTooLong { size, .. })) => {
                let _ = tx
                    .send(Inbound::TooLarge {
                        len: size as u64,
                        fatal: true,
                    })
                    .await;
                break;
            }
            Err(e) => {
                tracing::debug!(error = %e, "websocket read ended");
                break;
            }
        };
        if tx.send(event).await.is_err() {
            break;
        }
    }
}

fn close_frame(kind: CloseKind) -> CloseFrame {
    let (code, reason) = match kind {
        CloseKind::Normal => (CloseCode::Normal, "bye"),
        CloseKind::GoingAway => (CloseCode::Away, "the broker is shutting down"),
        CloseKind::Protocol => (CloseCode::Protocol, "protocol violation"),
        CloseKind::TooBig => (CloseCode::Size, "message over the cap"),
    };
    CloseFrame {
        code,
        reason: reason.into(),
    }
}

/// Writes the session's messages; its close frame goes out after the connection's slot is given
/// back (the session is over by then), so a client that reconnects the moment it reads that
/// frame finds the slot free.
async fn write_loop(
    mut sink: SplitSink<Ws, WsMessage>,
    mut rx: mpsc::Receiver<Outbound>,
    slot: crate::wire::in_flight::Slot,
) {
    while let Some(out) = rx.recv().await {
        match out {
            Outbound::Message(m) => {
                let text = match serde_json::to_string(&m) {
                    Ok(t) if t.len() <= DEFAULT_MAX_MESSAGE_BYTES => t,
                    Ok(t) => {
                        tracing::error!(len = t.len(), "outgoing message over the cap not sent");
                        continue;
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "outgoing message not serialisable");
                        continue;
                    }
                };
                if let Err(e) = sink.send(WsMessage::text(text)).await {
                    tracing::debug!(error = %e, "websocket write failed; the peer is gone");
                    return;
                }
            }
            Outbound::Close(kind) => {
                slot.release();
                let _ = sink.send(WsMessage::Close(Some(close_frame(kind)))).await;
                break;
            }
        }
    }
    let _ = sink.close().await;
}

/// The server's side of the WebSocket upgrade: tungstenite's handshake with the frame caps,
/// refused with HTTP 401 by the token check (`pub(crate)` for the `ws_handshake` fuzz target).
/// Answers the tenant the token acts for with the stream.
pub(crate) async fn handshake<S>(
    stream: S,
    auth: Auth,
    peer: SocketAddr,
) -> Result<(WebSocketStream<S>, Tenant), WsError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let tenant = Arc::new(std::sync::Mutex::new(None));
    let seen = Arc::clone(&tenant);
    #[allow(
        clippy::result_large_err,
        reason = "the signature is tungstenite's Callback"
    )]
    let check = move |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
        match auth.check_as(req, resp) {
            Ok((resp, t)) => {
                *seen
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(t);
                Ok(resp)
            }
            Err(refusal) => {
                tracing::warn!(%peer, "unauthenticated upgrade refused");
                Err(refusal)
            }
        }
    };
    let ws =
        tokio_tungstenite::accept_hdr_async_with_config(stream, check, Some(ws_config())).await?;
    let tenant = tenant
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    // The callback ran and admitted the upgrade, or the handshake failed above.
    Ok((ws, tenant.unwrap_or_default()))
}

impl Server {
    /// Accept WebSocket connections on `listener` until shutdown, then wait (bounded by the
    /// configured shutdown timeout) for every connection and its run to end.
    pub async fn serve_websocket(&self, listener: TcpListener, auth: Auth) {
        let slots = Arc::clone(&self.shared.connections);
        let shutdown = self.shared.shutdown.clone();
        if let Ok(addr) = listener.local_addr() {
            let _ = self.shared.listen.set(addr);
        }
        let serve = |stream, peer, pending| {
            let conn = Conn {
                stream,
                peer,
                auth: auth.clone(),
                pending,
            };
            self.clone().connection(conn, Arc::clone(&slots))
        };
        let mut conns = accept_until_shutdown(&listener, "websocket", &shutdown, serve).await;
        drop(listener);
        tracing::info!(connections = conns.len(), "no longer accepting; draining");
        let drain = async { while conns.join_next().await.is_some() {} };
        if tokio::time::timeout(self.shared.config.shutdown_timeout, drain)
            .await
            .is_err()
        {
            tracing::warn!(
                connections = conns.len(),
                "shutdown timeout; aborting what is left"
            );
            conns.shutdown().await;
        }
    }

    /// Upgrade (bounded by the pending budget and its deadline), then serve the connection
    /// in one of the authorized slots.
    async fn connection(self, conn: Conn, slots: Arc<Semaphore>) {
        let Conn {
            mut stream,
            peer,
            auth,
            pending,
        } = conn;
        let _ = stream.set_nodelay(true);
        let deadline = tokio::time::Instant::now() + UPGRADE_DEADLINE;
        let sniffed = self
            .while_pending(&pending, deadline, port_proxy::sniff(&mut stream))
            .await;
        let (route, first) = match sniffed {
            Some(Ok(s)) => s,
            Some(Err(_)) | None => return,
        };
        if route == Route::Ops {
            let door = crate::net::ops_http::Door::Token(&auth);
            let serve = crate::net::ops_http::serve(&mut stream, first, &self.shared, door);
            self.while_pending(&pending, deadline, serve).await;
            return;
        }
        let stream = Prefixed::new(first, stream);
        if route == Route::Port {
            return self
                .port(stream, peer, auth, pending, deadline, slots)
                .await;
        }
        let ws = self
            .while_pending(&pending, deadline, handshake(stream, auth, peer))
            .await;
        drop(pending);
        let (ws, tenant) = match ws {
            Some(Ok(ws)) => ws,
            Some(Err(e)) => {
                tracing::debug!(%peer, error = %e, "websocket upgrade failed");
                return;
            }
            None => return,
        };
        let Ok(slot) = slots.try_acquire_owned() else {
            tracing::warn!(%peer, "connection limit reached; authorized connection closed");
            let (mut sink, _) = ws.split();
            let again = CloseFrame {
                code: CloseCode::Again,
                reason: "the server is at its connection limit".into(),
            };
            let _ = sink.send(WsMessage::Close(Some(again))).await;
            return;
        };
        self.serve_upgraded(
            ws,
            peer,
            tenant,
            crate::wire::in_flight::Slot::holding(slot),
        )
        .await;
    }

    /// `work` bounded by the pending budget: `None` when the deadline passed, the connection
    /// was evicted to admit a newer one, or the server is shutting down.
    pub(crate) async fn while_pending<T>(
        &self,
        pending: &Pending,
        deadline: tokio::time::Instant,
        work: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        tokio::select! {
            r = tokio::time::timeout_at(deadline, work) => match r {
                Ok(v) => Some(v),
                Err(_) => {
                    tracing::debug!("pending connection timed out");
                    None
                }
            },
            () = pending.evicted.cancelled() => {
                tracing::debug!("pending connection evicted");
                None
            }
            () = self.shared.shutdown.cancelled() => None,
        }
    }

    /// A connection routed to an exposed port: its first head read and its token looked up
    /// while pending, then a connection slot, then the proxy.
    async fn port(
        &self,
        mut stream: Prefixed<TcpStream>,
        peer: SocketAddr,
        auth: Auth,
        pending: Pending,
        deadline: tokio::time::Instant,
        slots: Arc<Semaphore>,
    ) {
        let sbs = self.shared.config.sandboxes.clone();
        let exposures = sbs.as_deref().map(|s| s.exposures());
        let opened = self
            .while_pending(
                &pending,
                deadline,
                port_proxy::open(&mut stream, Vec::new(), exposures, &auth),
            )
            .await;
        let opened = match opened {
            Some(Ok(o)) => o,
            Some(Err(refusal)) => {
                tracing::debug!(%peer, "exposed-port request refused");
                return port_proxy::refuse(&mut stream, &refusal.0).await;
            }
            None => return,
        };
        let (Some(sbs), Ok(_slot)) = (sbs, slots.try_acquire_owned()) else {
            tracing::warn!(%peer, "connection limit reached; exposed-port request refused");
            return port_proxy::refuse(&mut stream, &port_proxy::busy()).await;
        };
        drop(pending);
        let dialer = SandboxDialer(Arc::clone(&sbs));
        let ctx = port_proxy::Ctx {
            exposures: sbs.exposures(),
            dialer: &dialer,
            auth: &auth,
            idle: port_proxy::PROXY_IDLE,
            shutdown: &self.shared.shutdown,
        };
        port_proxy::run(stream, opened, &ctx).await;
    }

    /// Serves an upgraded connection; `slot` (its place under `--max-connections`) is held
    /// until the session ends.
    async fn serve_upgraded(
        self,
        ws: Ws,
        peer: SocketAddr,
        tenant: Tenant,
        slot: crate::wire::in_flight::Slot,
    ) {
        let n = self.shared.next_conn.fetch_add(1, Ordering::Relaxed);
        let info = ConnInfo {
            id: format!("conn-{}-{n}", self.shared.epoch),
            peer: peer.to_string(),
            transport: "websocket",
            tenant,
        };
        let (sink, stream) = ws.split();
        let (in_tx, in_rx) = mpsc::channel(INBOX);
        let (out_tx, out_rx) = mpsc::channel(OUTBOX);
        let reader = tokio::spawn(read_loop(stream, in_tx));
        let writer = tokio::spawn(write_loop(sink, out_rx, slot.clone()));
        session::serve(self.shared.clone(), info, in_rx, out_tx).await;
        slot.release();
        if tokio::time::timeout(FLUSH, writer).await.is_err() {
            tracing::warn!(%peer, "the peer did not take the last messages in time");
        }
        reader.abort();
    }
}
