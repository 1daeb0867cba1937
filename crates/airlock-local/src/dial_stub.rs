//! TEMPORARY: the port dial of a sandbox's machine, stubbed until the machine lands (the
//! machine's branch replaces this file). Every dial is refused.
use airlock_router::SandboxError;
use tokio::net::TcpStream;

use crate::sandbox::LocalSandbox;

impl LocalSandbox {
    /// A TCP connection to 127.0.0.1:`port` inside the sandbox's own network namespace;
    /// refused if the sandbox has no machine or nothing listens there.
    pub async fn dial_port(&self, port: u16) -> Result<TcpStream, SandboxError> {
        let _ = port;
        Err(SandboxError::Backend {
            detail: "ports need the sandbox machine (not merged yet)".into(),
        })
    }
}
