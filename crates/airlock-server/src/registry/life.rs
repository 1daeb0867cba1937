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

use serde_json::Value;

/// Most entries in `spec.metadata`.
pub const MAX_METADATA_ENTRIES: usize = 32;
/// Longest metadata key, in characters (all ASCII).
pub const MAX_METADATA_KEY: usize = 64;
/// Longest metadata value, in bytes (UTF-8).
pub const MAX_METADATA_VALUE: usize = 512;

/// A checked `spec.metadata`.
pub type Metadata = BTreeMap<String, String>;

fn key_ok(k: &str) -> bool {
    (1..=MAX_METADATA_KEY).contains(&k.len())
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// A key as an error message shows it (cut, debug-quoted: it may be anything).
fn shown(k: &str) -> String {
    format!(
        "{:?}",
        k.chars().take(MAX_METADATA_KEY + 1).collect::<String>()
    )
}

/// Checks `spec.metadata` (absent or `null` is empty); the error is the `invalid_params`
/// message, naming the member.
pub fn parse_metadata(v: Option<Value>) -> Result<Metadata, String> {
    let map = match v {
        None | Some(Value::Null) => return Ok(Metadata::new()),
        Some(Value::Object(m)) => m,
        Some(_) => return Err("spec.metadata must be an object of strings".into()),
    };
    if map.len() > MAX_METADATA_ENTRIES {
        return Err(format!(
            "spec.metadata has {} entries, more than {MAX_METADATA_ENTRIES}",
            map.len()
        ));
    }
    let mut out = Metadata::new();
    for (k, v) in map {
        if !key_ok(&k) {
            return Err(format!(
                "spec.metadata key {}: keys are 1 to {MAX_METADATA_KEY} characters of \
                 [A-Za-z0-9_.-]",
                shown(&k)
            ));
        }
        let Value::String(s) = v else {
            return Err(format!("spec.metadata[{k:?}] must be a string"));
        };
        if s.len() > MAX_METADATA_VALUE {
            return Err(format!(
                "spec.metadata[{k:?}] is {} bytes, more than {MAX_METADATA_VALUE}",
                s.len()
            ));
        }
        out.insert(k, s);
    }
    Ok(out)
}

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

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// One held sandbox's life: metadata, birth, and its idle timeout now.
#[derive(Debug)]
pub struct Life {
    /// The orchestrator's labels.
    pub metadata: Metadata,
    created: Instant,
    created_at_ms: u64,
    idle: Mutex<Duration>,
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
        }
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
    use serde_json::json;

    use super::*;

    #[test]
    fn metadata_is_a_bounded_string_map_and_each_violation_names_the_member() {
        let ok = parse_metadata(Some(
            json!({"owner": "ana", "ticket.id": "T-1", "a_b-c": ""}),
        ))
        .unwrap();
        assert_eq!(ok.len(), 3);
        assert!(parse_metadata(None).unwrap().is_empty());
        assert!(parse_metadata(Some(Value::Null)).unwrap().is_empty());
        let many: serde_json::Map<String, Value> = (0..=MAX_METADATA_ENTRIES)
            .map(|i| (format!("k{i}"), json!("v")))
            .collect();
        let cases = [
            (json!(["a"]), "spec.metadata must be an object"),
            (Value::Object(many), "33 entries"),
            (json!({"": "v"}), "spec.metadata key \"\""),
            (json!({"a b": "v"}), "spec.metadata key \"a b\""),
            (json!({"k".repeat(65): "v"}), "1 to 64 characters"),
            (json!({"k": 1}), "spec.metadata[\"k\"] must be a string"),
            (
                json!({"k": "x".repeat(513)}),
                "spec.metadata[\"k\"] is 513 bytes",
            ),
        ];
        for (v, want) in cases {
            let e = parse_metadata(Some(v.clone())).unwrap_err();
            assert!(e.contains(want), "{v}: {e}");
        }
        // At the bounds exactly is fine.
        let at: serde_json::Map<String, Value> = (0..MAX_METADATA_ENTRIES)
            .map(|i| (format!("{i:0>64}"), json!("é".repeat(256))))
            .collect();
        assert_eq!(parse_metadata(Some(Value::Object(at))).unwrap().len(), 32);
    }

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
