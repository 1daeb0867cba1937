//! Allowlist egress for one run: the broker's half of the listener hand-over and the proxy.
//!
//! Before spawn, one end of a fresh socketpair is mapped into the stage at
//! [`EGRESS_CHANNEL_FD`]; pid 1 (inside the sandbox's network namespace, before any untrusted
//! code) sends back a listening socket on `127.0.0.1:PROXY_PORT`. The broker checks it and
//! serves [`Proxy`] on it, connecting out from its own namespace. The task ends (and every
//! proxied connection with it) when the run's [`Egress`] is finished or dropped.
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use airlock_egress::{
    proxy_env, Decision, DecisionLog, EgressSpec, Proxy, ProxyLimits, SystemResolver,
    MAX_DECISIONS, PROXY_PORT,
};
use airlock_executor::config::EGRESS_CHANNEL_FD;
use airlock_protocol::ErrorCode;
use tokio::io::Interest;
use tokio::task::JoinHandle;

use super::prepared::{NotStarted, Prepared};
use crate::limits::Limits;

/// The guest environment: the caller's, with the proxy variables set (and any the caller
/// gave for them replaced) in allowlist mode.
pub(super) fn guest_env(env: &[(String, String)], egress: &EgressSpec) -> Vec<(String, String)> {
    match egress {
        EgressSpec::Closed => env.to_vec(),
        EgressSpec::Allowlist(_) => {
            let ours = proxy_env();
            let mut out: Vec<(String, String)> = env
                .iter()
                .filter(|(k, _)| !ours.iter().any(|(o, _)| o == k))
                .cloned()
                .collect();
            out.extend(ours);
            out
        }
    }
}

/// The proxy port the stage must listen on, or a refusal when this machine cannot enforce
/// allowlist egress.
pub(super) fn proxy_port(egress: &EgressSpec) -> Result<Option<u16>, NotStarted> {
    match egress {
        EgressSpec::Closed => Ok(None),
        EgressSpec::Allowlist(_) => match airlock_egress::availability() {
            Ok(()) => Ok(Some(PROXY_PORT)),
            Err(message) => Err(NotStarted {
                code: ErrorCode::SandboxRefused,
                message,
            }),
        },
    }
}

/// A run's proxy task and its decisions.
#[derive(Debug)]
pub(crate) struct Egress {
    task: JoinHandle<()>,
    log: Arc<DecisionLog>,
}

impl Egress {
    /// Stop serving and return the decisions.
    pub(crate) fn finish(self) -> Vec<Decision> {
        self.task.abort();
        self.log.snapshot().0
    }
}

impl Drop for Egress {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// In allowlist mode, add the hand-over socket to the fds mapped into the stage (`maps`) and
/// start the task that waits for the listener and serves the proxy.
pub(super) fn attach(
    maps: &mut Vec<(OwnedFd, i32)>,
    p: &Prepared,
    limits: &Limits,
) -> std::io::Result<Option<Egress>> {
    let (EgressSpec::Allowlist(rules), Some(port)) = (&limits.egress, p.config.egress_proxy_port)
    else {
        return Ok(None);
    };
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    ours.set_nonblocking(true)?;
    maps.push((theirs.into(), EGRESS_CHANNEL_FD));
    let log = Arc::new(DecisionLog::new(MAX_DECISIONS));
    let proxy = Proxy::new(
        rules.clone(),
        ProxyLimits::default(),
        Arc::new(SystemResolver),
        log.clone(),
    );
    let sock = tokio::net::UnixStream::from_std(ours)?;
    let task = tokio::spawn(async move {
        let Some(fd) = receive(&sock).await else {
            return;
        };
        drop(sock);
        let Some(listener) = checked_listener(fd, port) else {
            tracing::warn!("egress: the stage handed over something other than the proxy listener");
            return;
        };
        proxy.serve(listener).await;
    });
    Ok(Some(Egress { task, log }))
}

async fn receive(sock: &tokio::net::UnixStream) -> Option<OwnedFd> {
    loop {
        sock.readable().await.ok()?;
        match sock.try_io(Interest::READABLE, || {
            airlock_jail::fdpass::recv_fd(sock.as_fd())
        }) {
            Ok(fd) => return fd,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return None,
        }
    }
}

/// The received descriptor as a listener, only if it is a listening TCP socket on
/// `127.0.0.1:port` (what pid 1 creates; anything else is refused).
fn checked_listener(fd: OwnedFd, port: u16) -> Option<tokio::net::TcpListener> {
    let std_listener = std::net::TcpListener::from(fd);
    let expected = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    if std_listener.local_addr().ok()? != expected {
        return None;
    }
    std_listener.set_nonblocking(true).ok()?;
    tokio::net::TcpListener::from_std(std_listener).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowlist_env_replaces_caller_proxy_settings() {
        let env = vec![
            ("HTTPS_PROXY".to_string(), "http://elsewhere:1".to_string()),
            ("K".to_string(), "V".to_string()),
        ];
        assert_eq!(guest_env(&env, &EgressSpec::Closed), env);
        let out = guest_env(&env, &EgressSpec::Allowlist(Default::default()));
        let https: Vec<_> = out.iter().filter(|(k, _)| k == "HTTPS_PROXY").collect();
        assert_eq!(https.len(), 1);
        assert_eq!(https[0].1, "http://127.0.0.1:3128");
        assert!(out.contains(&("K".to_string(), "V".to_string())));
    }
}
