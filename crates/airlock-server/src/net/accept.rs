//! The accept loop both listeners share (`--listen`'s WebSocket listener and
//! `--metrics-listen`'s): every accepted connection takes its place in a pending-connection
//! budget of the listener's own ([`crate::admission`]) and is served on a task of its own; a
//! failed accept (typically EMFILE) backs off rather than spins; finished tasks are reaped as
//! they end. At shutdown the loop stops accepting and hands the connections still being served
//! back to its caller, whose drain differs by listener.
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::admission::{Admission, Pending, MAX_PENDING, MAX_PENDING_PER_PEER};
use crate::cancel::CancelToken;

/// How long a failed accept backs off.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Accept on `listener` (named `name` in the log) until `shutdown`, serving each connection
/// with `serve`; returns the connections still being served.
pub(crate) async fn accept_until_shutdown<F, Fut>(
    listener: &TcpListener,
    name: &'static str,
    shutdown: &CancelToken,
    mut serve: F,
) -> JoinSet<()>
where
    F: FnMut(TcpStream, SocketAddr, Pending) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let admission = Admission::new(MAX_PENDING, MAX_PENDING_PER_PEER);
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let pending = admission.admit(peer.ip());
                    conns.spawn(serve(stream, peer, pending));
                }
                Err(e) => {
                    tracing::warn!(listener = name, error = %e, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns
}
