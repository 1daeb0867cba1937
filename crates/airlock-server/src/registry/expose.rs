//! The server's exposures (`sandbox.expose`): which unguessable URL token serves which port
//! of which sandbox's own loopback.
//!
//! A token is the exposure's address and its credential at once: 160 bits from the kernel,
//! lowercase hex. An exposure ends with `sandbox.unexpose` and with its sandbox (dispose,
//! idle reclaim, scope purge, shutdown); either way its token is forgotten (a request naming
//! it is answered exactly as one naming a token never issued) and its [`Exposure::revoked`]
//! token is cancelled, which closes every live connection proxied through it.
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::cancel::CancelToken;

/// Random bytes in a token (160 bits: unguessable, and no oracle tells a guess that named a
/// revoked exposure from one that never existed).
pub const TOKEN_BYTES: usize = 20;
/// Exposures one sandbox may hold at once.
pub const MAX_PER_SANDBOX: usize = 16;

/// One live exposure.
#[derive(Debug, Clone)]
pub struct Exposure {
    /// The sandbox whose loopback it reaches.
    pub sandbox_id: String,
    /// The port on that loopback.
    pub port: u16,
    /// The URL token.
    pub token: String,
    /// Cancelled when the exposure ends: every connection proxied through it closes.
    pub revoked: CancelToken,
}

/// Why an exposure was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExposeError {
    /// The sandbox ended while the exposure was being made.
    #[error("sandbox {0} is no longer live")]
    Gone(String),
    /// The sandbox holds its maximum of exposures.
    #[error("sandbox {sandbox_id} already exposes {max} ports; unexpose one first")]
    Full {
        /// The sandbox.
        sandbox_id: String,
        /// The bound.
        max: usize,
    },
    /// The kernel's random source failed (no token is ever made from anything weaker).
    #[error("no random bytes for an exposure token: {0}")]
    Random(String),
}

/// Every live exposure of one server, by token.
#[derive(Debug, Default)]
pub struct Exposures {
    by_token: Mutex<HashMap<String, Exposure>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A fresh token: [`TOKEN_BYTES`] from the kernel's CSPRNG, hex. Fails rather than fall back
/// to anything guessable.
fn mint_token() -> Result<String, ExposeError> {
    let mut b = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut b).map_err(|e| ExposeError::Random(e.to_string()))?;
    Ok(hex::encode(b))
}

/// Whether `s` has the shape of a token (a request naming anything else is answered as an
/// unknown token, without a lookup).
#[must_use]
pub fn is_token_shaped(s: &str) -> bool {
    s.len() == 2 * TOKEN_BYTES && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl Exposures {
    /// An empty registry.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Expose `port` of `sandbox_id` (the live exposure of that port when there is one).
    /// `live` is asked under the registry's lock, so an exposure never outlives a sandbox
    /// whose [`Exposures::end_sandbox`] ran: the caller removes the sandbox from its live set
    /// first, then ends its exposures.
    pub fn expose(
        &self,
        sandbox_id: &str,
        port: u16,
        live: impl FnOnce() -> bool,
    ) -> Result<Exposure, ExposeError> {
        let mut map = lock(&self.by_token);
        if !live() {
            return Err(ExposeError::Gone(sandbox_id.to_owned()));
        }
        let mine = map.values().filter(|e| e.sandbox_id == sandbox_id);
        let mut count = 0;
        for e in mine {
            if e.port == port {
                return Ok(e.clone());
            }
            count += 1;
        }
        if count >= MAX_PER_SANDBOX {
            return Err(ExposeError::Full {
                sandbox_id: sandbox_id.to_owned(),
                max: MAX_PER_SANDBOX,
            });
        }
        let exposure = Exposure {
            sandbox_id: sandbox_id.to_owned(),
            port,
            token: mint_token()?,
            revoked: CancelToken::new(),
        };
        map.insert(exposure.token.clone(), exposure.clone());
        Ok(exposure)
    }

    /// Revoke the exposure of `port` of `sandbox_id`; whether there was one.
    pub fn unexpose(&self, sandbox_id: &str, port: u16) -> bool {
        let mut map = lock(&self.by_token);
        let before = map.len();
        map.retain(|_, e| {
            let gone = e.sandbox_id == sandbox_id && e.port == port;
            if gone {
                e.revoked.cancel();
            }
            !gone
        });
        map.len() != before
    }

    /// End every exposure of `sandbox_id` (it was disposed or reclaimed).
    pub fn end_sandbox(&self, sandbox_id: &str) {
        lock(&self.by_token).retain(|_, e| {
            let gone = e.sandbox_id == sandbox_id;
            if gone {
                e.revoked.cancel();
            }
            !gone
        });
    }

    /// The live exposure `token` names, if any.
    #[must_use]
    pub fn lookup(&self, token: &str) -> Option<Exposure> {
        if !is_token_shaped(token) {
            return None;
        }
        lock(&self.by_token).get(token).cloned()
    }

    /// Live exposures.
    #[must_use]
    pub fn len(&self) -> usize {
        lock(&self.by_token).len()
    }

    /// Whether none is live.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_exposed_twice_has_one_token_and_unexpose_forgets_it() {
        let x = Exposures::new();
        let a = x.expose("sb-1", 8000, || true).unwrap();
        assert!(is_token_shaped(&a.token), "{}", a.token);
        assert_eq!(x.expose("sb-1", 8000, || true).unwrap().token, a.token);
        let b = x.expose("sb-2", 8000, || true).unwrap();
        assert_ne!(a.token, b.token);
        assert!(x.unexpose("sb-1", 8000));
        assert!(a.revoked.is_cancelled());
        assert!(x.lookup(&a.token).is_none());
        assert!(!x.unexpose("sb-1", 8000));
        assert!(x.lookup(&b.token).is_some());
    }

    #[test]
    fn an_ended_sandbox_takes_its_exposures_and_gets_no_new_one() {
        let x = Exposures::new();
        let a = x.expose("sb-1", 1, || true).unwrap();
        let b = x.expose("sb-1", 2, || true).unwrap();
        let other = x.expose("sb-2", 1, || true).unwrap();
        x.end_sandbox("sb-1");
        assert!(a.revoked.is_cancelled() && b.revoked.is_cancelled());
        assert!(!other.revoked.is_cancelled());
        assert_eq!(x.len(), 1);
        assert_eq!(
            x.expose("sb-1", 3, || false).unwrap_err(),
            ExposeError::Gone("sb-1".into())
        );
    }

    #[test]
    fn a_sandbox_holds_a_bounded_number_of_exposures() {
        let x = Exposures::new();
        for p in 1..=MAX_PER_SANDBOX {
            x.expose("sb-1", u16::try_from(p).unwrap(), || true)
                .unwrap();
        }
        assert!(matches!(
            x.expose("sb-1", 9999, || true),
            Err(ExposeError::Full { .. })
        ));
        // Re-exposing a port it holds is not a new one.
        assert!(x.expose("sb-1", 1, || true).is_ok());
    }

    #[test]
    fn lookups_of_anything_not_token_shaped_find_nothing() {
        let x = Exposures::new();
        let a = x.expose("sb-1", 1, || true).unwrap();
        assert!(x.lookup(&a.token.to_uppercase()).is_none());
        assert!(x.lookup(&a.token[1..]).is_none());
        assert!(x.lookup("").is_none());
        assert!(x.lookup(&a.token).is_some());
    }
}
