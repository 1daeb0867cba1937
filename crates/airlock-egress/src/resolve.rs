//! Name resolution, done by the broker (never by the sandbox), behind a trait so tests can
//! inject answers (a name that flips between a public and a private address, say).
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Most addresses kept from one answer: enough for dual-stack and a few fallbacks.
pub const MAX_ADDRESSES: usize = 8;

/// Resolves a host name to addresses.
#[async_trait::async_trait]
pub trait Resolver: Send + Sync {
    /// Every address `name` resolves to right now (the proxy connects only to what this
    /// returned, and never asks again for the same request).
    async fn resolve(&self, name: &str, port: u16) -> std::io::Result<Vec<IpAddr>>;
}

/// The broker's own system resolver (`getaddrinfo`, in the broker's network namespace).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

#[async_trait::async_trait]
impl Resolver for SystemResolver {
    async fn resolve(&self, name: &str, port: u16) -> std::io::Result<Vec<IpAddr>> {
        let addrs = tokio::net::lookup_host((name, port)).await?;
        let mut out: Vec<IpAddr> = Vec::new();
        for a in addrs {
            if out.len() == MAX_ADDRESSES {
                break;
            }
            if !out.contains(&a.ip()) {
                out.push(a.ip());
            }
        }
        Ok(out)
    }
}

/// A resolver answering from a table, each name with a queue of answers (the last one
/// repeats): for tests, and for hosts that pin names.
#[derive(Debug, Clone, Default)]
pub struct StaticResolver {
    table: Arc<Mutex<BTreeMap<String, Vec<Vec<IpAddr>>>>>,
}

impl StaticResolver {
    /// An empty table: every name fails to resolve.
    pub fn new() -> StaticResolver {
        StaticResolver::default()
    }

    /// Answer `name` with `answers[0]`, then `answers[1]`, ..., repeating the last.
    pub fn answer(&self, name: &str, answers: Vec<Vec<IpAddr>>) {
        if let Ok(mut t) = self.table.lock() {
            t.insert(name.to_ascii_lowercase(), answers);
        }
    }

    /// How many answers are still queued for `name` before the last one repeats.
    pub fn pending(&self, name: &str) -> usize {
        self.table
            .lock()
            .ok()
            .and_then(|t| t.get(name).map(|q| q.len().saturating_sub(1)))
            .unwrap_or(0)
    }
}

#[async_trait::async_trait]
impl Resolver for StaticResolver {
    async fn resolve(&self, name: &str, _port: u16) -> std::io::Result<Vec<IpAddr>> {
        let not_found = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such host");
        let mut t = self.table.lock().map_err(|_| not_found())?;
        let queue = t.get_mut(name).ok_or_else(not_found)?;
        let answer = if queue.len() > 1 {
            queue.remove(0)
        } else {
            queue.first().cloned().ok_or_else(not_found)?
        };
        Ok(answer)
    }
}
