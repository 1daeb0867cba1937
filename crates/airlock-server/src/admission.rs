//! Admission of WebSocket connections that have not authenticated yet.
//!
//! A connection holds no serving slot until its upgrade carried the token. Until then it is
//! *pending*, and pending connections live in a small budget of their own: at most
//! [`MAX_PENDING`] server-wide and [`MAX_PENDING_PER_PEER`] per peer address, each with a short
//! upgrade deadline. When the budget is full, the newest arrival evicts the oldest pending
//! connection (of its own address first), so idle or slow unauthenticated connections can
//! neither hold the slots of authorized clients nor keep a new client from being heard: an
//! authorized client that finishes its upgrade within the time it takes an attacker to open
//! [`MAX_PENDING`] fresh connections is always served.
use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::cancel::CancelToken;

/// Unauthenticated connections held at once, server-wide.
pub const MAX_PENDING: usize = 256;
/// Unauthenticated connections held at once from one peer address.
pub const MAX_PENDING_PER_PEER: usize = 128;
/// A peer that has not finished the upgrade by then is dropped.
pub const UPGRADE_DEADLINE: Duration = Duration::from_secs(5);

#[derive(Debug)]
struct Entry {
    id: u64,
    ip: IpAddr,
    evict: CancelToken,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    pending: VecDeque<Entry>,
}

/// The pending budget of one listener.
#[derive(Debug)]
pub struct Admission {
    state: Mutex<State>,
    max_pending: usize,
    per_peer: usize,
}

/// One pending connection's place in the budget; dropping it (upgrade done or failed) frees
/// the place. `evicted` is cancelled when a newer arrival takes the place.
#[derive(Debug)]
pub struct Pending {
    admission: Arc<Admission>,
    id: u64,
    /// Cancelled when this connection is evicted to admit a newer one.
    pub evicted: CancelToken,
}

impl Admission {
    /// A budget of `max_pending` in all and `per_peer` per address (each at least 1).
    pub fn new(max_pending: usize, per_peer: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            max_pending: max_pending.max(1),
            per_peer: per_peer.max(1),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admit a new connection from `ip`, evicting the oldest pending one of the same address
    /// when that address is at its share, else the oldest overall when the budget is full.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Pending {
        let mut s = self.lock();
        let same = s.pending.iter().filter(|e| e.ip == ip).count();
        let victim = if same >= self.per_peer {
            s.pending.iter().position(|e| e.ip == ip)
        } else if s.pending.len() >= self.max_pending {
            Some(0)
        } else {
            None
        };
        if let Some(old) = victim.and_then(|i| s.pending.remove(i)) {
            tracing::warn!(peer = %old.ip, "pending-connection budget full; oldest evicted");
            old.evict.cancel();
        }
        s.next += 1;
        let id = s.next;
        let evict = CancelToken::new();
        s.pending.push_back(Entry {
            id,
            ip,
            evict: evict.clone(),
        });
        Pending {
            admission: Arc::clone(self),
            id,
            evicted: evict,
        }
    }

    /// Connections pending now.
    pub fn pending(&self) -> usize {
        self.lock().pending.len()
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut s = self.admission.lock();
        s.pending.retain(|e| e.id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn the_oldest_pending_connection_makes_room() {
        let a = Admission::new(3, 3);
        let first = a.admit(ip(1));
        let second = a.admit(ip(2));
        let third = a.admit(ip(3));
        let fourth = a.admit(ip(4));
        assert!(first.evicted.is_cancelled());
        assert!(!second.evicted.is_cancelled() && !third.evicted.is_cancelled());
        assert!(!fourth.evicted.is_cancelled());
        assert_eq!(a.pending(), 3);
        drop((first, second));
        assert_eq!(a.pending(), 2);
    }

    #[test]
    fn one_address_evicts_only_itself_past_its_share() {
        let a = Admission::new(10, 2);
        let other = a.admit(ip(9));
        let mine: Vec<Pending> = (0..5).map(|_| a.admit(ip(1))).collect();
        assert!(!other.evicted.is_cancelled());
        let live = mine.iter().filter(|p| !p.evicted.is_cancelled()).count();
        assert_eq!(live, 2);
        assert_eq!(a.pending(), 3);
    }
}
