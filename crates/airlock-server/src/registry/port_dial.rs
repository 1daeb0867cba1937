//! Reaching a port on a sandbox's own loopback from outside its network namespace: what the
//! exposed-port proxy (the `net` room's) and `sandbox.expose`'s listening check dial.
use std::sync::Arc;

use tokio::net::TcpStream;

use super::sandboxes::Sandboxes;

/// Why dialing a sandbox's port failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DialError {
    /// The sandbox is no longer live.
    #[error("sandbox {0} is no longer live")]
    Gone(String),
    /// Nothing could be reached there (nothing listens, or the sandbox cannot be dialed).
    #[error("{0}")]
    Refused(String),
}

/// Reaches a port on a sandbox's own loopback, from outside its network namespace.
#[async_trait::async_trait]
pub trait PortDialer: Send + Sync {
    /// A connection to 127.0.0.1:`port` in the sandbox `sandbox_id`.
    async fn dial(&self, sandbox_id: &str, port: u16) -> Result<TcpStream, DialError>;

    /// A request reached the sandbox (postpones its idle reclaim).
    fn touch(&self, sandbox_id: &str) {
        let _ = sandbox_id;
    }
}

/// The server's dialer: the live sandbox's own dial into its network namespace.
#[derive(Debug)]
pub struct SandboxDialer(pub Arc<Sandboxes>);

#[async_trait::async_trait]
impl PortDialer for SandboxDialer {
    async fn dial(&self, sandbox_id: &str, port: u16) -> Result<TcpStream, DialError> {
        let held = self
            .0
            .get(sandbox_id)
            .map_err(|_| DialError::Gone(sandbox_id.to_owned()))?;
        held.sandbox
            .dial_port(port)
            .await
            .map_err(|e| DialError::Refused(e.to_string()))
    }

    fn touch(&self, sandbox_id: &str) {
        if let Ok(h) = self.0.get(sandbox_id) {
            h.touch();
        }
    }
}
