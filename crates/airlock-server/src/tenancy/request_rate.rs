//! Each tenant's requests are read at a bounded rate (a token bucket per tenant, shared by its
//! connections): past it, its connections are not read until the rate allows, so a tenant
//! flooding the server — even with requests that are only refused — spends the server's CPU
//! at that rate and no faster, and leaves it to the others. The bucket holds a second's worth
//! and bursts to twice that. The single tenant of a one-token server is not limited.
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::tenancy::tenant::Tenant;

/// Requests per second a tenant of a tenants file is read at, without a policy of its own.
pub const DEFAULT_PER_S: u64 = 500;
/// Longest a request waits for its turn (a tenant can build no deeper debt than this).
const MAX_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// A tenant's rate, requests per second (`None`: not limited).
pub type RateOf = dyn Fn(&Tenant) -> Option<u64> + Send + Sync;

/// The buckets of every tenant.
pub struct RequestRates {
    buckets: Mutex<HashMap<Tenant, Bucket>>,
    rate_of: Box<RateOf>,
}

impl RequestRates {
    /// Rates from `rate_of` (`None`: not limited).
    pub fn new(rate_of: impl Fn(&Tenant) -> Option<u64> + Send + Sync + 'static) -> Self {
        RequestRates {
            buckets: Mutex::new(HashMap::new()),
            rate_of: Box::new(rate_of),
        }
    }

    /// How long `tenant`'s next request must wait, its turn taken now (zero: at once).
    pub fn turn(&self, tenant: &Tenant, now: Instant) -> Duration {
        let Some(rate) = (self.rate_of)(tenant).filter(|r| *r > 0) else {
            return Duration::ZERO;
        };
        let rate = rate as f64;
        let burst = 2.0 * rate;
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let b = buckets.entry(tenant.clone()).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate).min(burst);
        b.at = now;
        b.tokens -= 1.0;
        if b.tokens >= 0.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64((-b.tokens / rate).min(MAX_WAIT.as_secs_f64()))
    }

    /// Wait for `tenant`'s turn.
    pub async fn admit(&self, tenant: &Tenant) {
        let wait = self.turn(tenant, Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

impl std::fmt::Debug for RequestRates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RequestRates(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_bursts_to_twice_its_rate_then_waits_its_share_and_others_do_not() {
        let r = RequestRates::new(|t| (t.as_str() == "a").then_some(10));
        let (a, b) = (Tenant::new("a"), Tenant::new("b"));
        let t0 = Instant::now();
        for _ in 0..20 {
            assert_eq!(r.turn(&a, t0), Duration::ZERO);
        }
        let wait = r.turn(&a, t0);
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-6, "{wait:?}");
        let next = r.turn(&a, t0);
        assert!((next.as_secs_f64() - 0.2).abs() < 1e-6, "{next:?}");
        for _ in 0..1000 {
            assert_eq!(r.turn(&b, t0), Duration::ZERO, "b has no limit");
        }
        // A second later a's debt is paid and it has 8 tokens again.
        let later = t0 + Duration::from_secs(1);
        for _ in 0..8 {
            assert_eq!(r.turn(&a, later), Duration::ZERO);
        }
        assert!(r.turn(&a, later) > Duration::ZERO);
    }

    #[test]
    fn no_debt_is_deeper_than_the_longest_wait() {
        let r = RequestRates::new(|_| Some(1));
        let a = Tenant::new("a");
        let t0 = Instant::now();
        let mut last = Duration::ZERO;
        for _ in 0..100 {
            last = r.turn(&a, t0);
        }
        assert_eq!(last, MAX_WAIT);
    }
}
