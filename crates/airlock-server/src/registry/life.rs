//! What the server keeps about a held sandbox's life beside its spec: the orchestrator's
//! `metadata`, when it was made, and its idle timeout as it stands now (`sandbox.set_timeout`
//! changes it; the spec's own timeout, which the key-reuse rule compares, does not change).
//!
//! `metadata` is the orchestrator's labels, echoed back by `sandbox.create`, `sandbox.connect`
//! and `sandbox.list`: a bounded string map the server never interprets. It takes no part in
//! spec equality: the same key with an equal spec returns the live sandbox with the metadata
//! it was made with.
use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Most entries in `spec.metadata`.
pub const MAX_METADATA_ENTRIES: usize = 32;
/// Longest metadata key, in characters (all ASCII).
pub const MAX_METADATA_KEY: usize = 64;
/// Longest metadata value, in bytes (UTF-8).
pub const MAX_METADATA_VALUE: usize = 512;

/// A checked `spec.metadata`.
pub type Metadata = BTreeMap<String, String>;

/// Longest idle timeout a spec or `sandbox.set_timeout` may ask for.
pub const MAX_IDLE: Duration = Duration::from_secs(24 * 3600);

/// Checks an idle timeout in seconds: in (0, [`MAX_IDLE`]]; the error names `member`.
pub fn checked_idle(member: &str, x: f64) -> Result<Duration, String> {
    let max = MAX_IDLE;
    if x.is_finite() && x > 0.0 && x <= max.as_secs_f64() {
        return Ok(Duration::from_secs_f64(x));
    }
    Err(format!("{member} = {x}: must be in (0, {}]", max.as_secs()))
}

/// Longest lifetime a spec or `sandbox.set_lifetime` may ask for.
pub const MAX_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);

/// Checks a lifetime in seconds: in (0, [`MAX_LIFETIME`]]; the error names `member`.
pub fn checked_lifetime(member: &str, x: f64) -> Result<Duration, String> {
    let max = MAX_LIFETIME;
    if x.is_finite() && x > 0.0 && x <= max.as_secs_f64() {
        return Ok(Duration::from_secs_f64(x));
    }
    Err(format!("{member} = {x}: must be in (0, {}]", max.as_secs()))
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// One held sandbox's life: metadata, birth, its idle timeout now, and the end of its
/// lifetime when it has one (an absolute end, whatever its activity).
#[derive(Debug)]
pub struct Life {
    /// The orchestrator's labels.
    pub metadata: Metadata,
    created: Instant,
    created_at_ms: u64,
    idle: Mutex<Duration>,
    ends: Mutex<Option<Instant>>,
}

impl Life {
    /// A life that starts now, idling out after `idle`.
    #[must_use]
    pub fn new(metadata: Metadata, idle: Duration) -> Self {
        Life {
            metadata,
            created: Instant::now(),
            created_at_ms: now_ms(),
            idle: Mutex::new(idle),
            ends: Mutex::new(None),
        }
    }

    /// This life ending `lifetime` after its birth (none: it ends only by idling out).
    #[must_use]
    pub fn with_lifetime(self, lifetime: Option<Duration>) -> Self {
        *self.ends.lock().unwrap_or_else(PoisonError::into_inner) =
            lifetime.map(|l| self.created + l);
        self
    }

    /// Ends `lifetime` from now (`sandbox.set_lifetime`).
    pub fn set_lifetime(&self, lifetime: Duration) {
        *self.ends.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now() + lifetime);
    }

    /// Whether its lifetime has ended by `now`.
    #[must_use]
    pub fn lived_out(&self, now: Instant) -> bool {
        self.ends
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some_and(|end| now >= end)
    }

    /// When its lifetime ends, on [`Life::created_at_ms`]'s clock; `None` without one.
    #[must_use]
    pub fn ends_at_ms(&self) -> Option<u64> {
        let end = *self.ends.lock().unwrap_or_else(PoisonError::into_inner);
        end.map(|e| self.at_ms(e))
    }

    /// When it was made, in milliseconds since the Unix epoch.
    #[must_use]
    pub fn created_at_ms(&self) -> u64 {
        self.created_at_ms
    }

    /// `at` on the same clock as [`Life::created_at_ms`] (measured on the monotonic clock from
    /// birth, so a wall-clock step never puts a use before the sandbox's creation).
    #[must_use]
    pub fn at_ms(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.created).as_millis();
        self.created_at_ms
            .saturating_add(u64::try_from(since).unwrap_or(u64::MAX))
    }

    /// The idle timeout now.
    #[must_use]
    pub fn idle_timeout(&self) -> Duration {
        *self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces the idle timeout (`sandbox.set_timeout`).
    pub fn set_idle_timeout(&self, idle: Duration) {
        *self.idle.lock().unwrap_or_else(PoisonError::into_inner) = idle;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_timeout_is_in_bounds_or_refused_naming_the_member() {
        assert_eq!(checked_idle("x", 1.5).unwrap(), Duration::from_millis(1500));
        assert!(checked_idle("x", 86400.0).is_ok());
        for bad in [0.0, -1.0, 86400.5, f64::NAN, f64::INFINITY] {
            let e = checked_idle("idle_timeout_s", bad).unwrap_err();
            assert!(e.starts_with("idle_timeout_s = "), "{e}");
        }
    }
}
