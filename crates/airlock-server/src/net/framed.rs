//! The Content-Length transport (`airlock serve --stdio`): one connection over a byte stream
//! pair, framed exactly as the internal hop is (see `docs/protocol.md`).
//!
//! Recoverable read errors (an undecodable body, a body over the cap, which the reader skips
//! without buffering) are answered and the connection goes on; any other framing error is
//! answered once and ends the connection.
use std::sync::atomic::Ordering;
use std::time::Duration;

use airlock_protocol::{AsyncFrameReader, ErrorObject, FrameError};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::server::Server;
use crate::wire::session::{self, ConnInfo};
use crate::wire::transport::{Inbound, Outbound};

/// Events queued from the reader to the session; the reader waits when it is full, which
/// pushes back on an orchestrator that floods.
const INBOX: usize = 16;
/// Messages queued towards the orchestrator.
pub(crate) const OUTBOX: usize = 64;
/// How long the writer gets to flush what is queued once the session has ended.
pub(crate) const FLUSH: Duration = Duration::from_secs(5);

async fn read_loop<R: AsyncRead + Unpin>(reader: R, tx: mpsc::Sender<Inbound>) {
    let mut frames = AsyncFrameReader::new(reader);
    loop {
        let (event, go_on) = match frames.read_message().await {
            Ok(Some(m)) => (Inbound::Message(m), true),
            Ok(None) => break,
            Err(FrameError::BodyTooLarge { len, .. }) => {
                (Inbound::TooLarge { len, fatal: false }, true)
            }
            Err(e @ FrameError::Decode(_)) => (
                Inbound::Invalid(ErrorObject::new(e.error_code(), e.to_string())),
                true,
            ),
            Err(FrameError::Io(e)) => {
                tracing::debug!(error = %e, "stdio read failed");
                break;
            }
            Err(e) => (
                Inbound::Fatal(ErrorObject::new(e.error_code(), e.to_string())),
                false,
            ),
        };
        if tx.send(event).await.is_err() || !go_on {
            break;
        }
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(mut writer: W, mut rx: mpsc::Receiver<Outbound>) {
    while let Some(out) = rx.recv().await {
        match out {
            Outbound::Message(m) => {
                match airlock_protocol::write_message_async(&mut writer, &m).await {
                    Ok(()) => {}
                    Err(e) if e.is_recoverable() => tracing::error!(error = %e, "message not sent"),
                    Err(e) => {
                        tracing::debug!(error = %e, "write failed; the peer is gone");
                        return;
                    }
                }
            }
            Outbound::Close(_) => break,
        }
    }
    let _ = writer.flush().await;
}

impl Server {
    /// Serve one Content-Length framed connection (stdin/stdout for `--stdio`) until the peer
    /// closes its side or the server shuts down, and every run of it is over.
    pub async fn serve_framed<R, W>(&self, reader: R, writer: W, peer: &str)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let n = self.shared.next_conn.fetch_add(1, Ordering::Relaxed);
        let info = ConnInfo {
            id: format!("conn-{}-{n}", self.shared.epoch),
            peer: peer.into(),
            transport: "stdio",
            tenant: crate::tenancy::tenant::Tenant::single(),
        };
        let (in_tx, in_rx) = mpsc::channel(INBOX);
        let (out_tx, out_rx) = mpsc::channel(OUTBOX);
        let reader = tokio::spawn(read_loop(reader, in_tx));
        let writer = tokio::spawn(write_loop(writer, out_rx));
        session::serve(self.shared.clone(), info, in_rx, out_tx).await;
        if tokio::time::timeout(FLUSH, writer).await.is_err() {
            tracing::warn!("the peer did not take the last messages in time");
        }
        reader.abort();
    }

    /// `--stdio`: serve stdin/stdout.
    pub async fn serve_stdio(&self) {
        self.serve_framed(tokio::io::stdin(), tokio::io::stdout(), "stdio")
            .await;
    }
}
