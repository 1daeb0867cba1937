//! The metrics listener (`airlock serve --metrics-listen ADDR`): `/metrics`, `/healthz` and
//! `/readyz` on an address of their own, with no token (operators restrict who reaches it by
//! network). It serves nothing else: no WebSocket, no exposed port (`404` for any other
//! path). Each connection is one request, read and answered under a pending-connection budget
//! of its own ([`crate::admission`]: the same bounds and deadline as the main listener's), so
//! slow or idle clients here hold a bounded part of the server and nothing of the main
//! listener's.
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};

use crate::admission::{Pending, UPGRADE_DEADLINE};
use crate::net::accept::accept_until_shutdown;
use crate::net::ops_http::{self, Door};
use crate::server::Server;

impl Server {
    /// Answer operator requests on `listener` until the server shuts down.
    pub async fn serve_ops(&self, listener: TcpListener) {
        let shutdown = self.shared.shutdown.clone();
        let serve = |stream, _peer, pending| self.clone().ops_connection(stream, pending);
        let mut conns = accept_until_shutdown(&listener, "metrics", &shutdown, serve).await;
        // Every connection is bounded by its deadline; none outlives the server's shutdown.
        conns.shutdown().await;
    }

    /// One request on the metrics listener, within the budget and its deadline.
    async fn ops_connection(self, mut stream: TcpStream, pending: Pending) {
        let deadline = tokio::time::Instant::now() + UPGRADE_DEADLINE;
        let shared = Arc::clone(&self.shared);
        let serve = ops_http::serve(&mut stream, Vec::new(), &shared, Door::Open);
        self.while_pending(&pending, deadline, serve).await;
    }
}
