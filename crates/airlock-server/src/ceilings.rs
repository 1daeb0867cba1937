//! Server-wide ceilings on what an orchestrator may ask for, and the resolution of an
//! `execute` request's `limits` against them.
//!
//! A limit the request leaves out gets the server's default (itself never above the ceiling).
//! A limit asked above its ceiling is refused, naming the limit: the server never silently
//! clamps, because a caller who asked for 10 minutes and got 5 would misread the timeout.
use std::time::Duration;

use serde::Deserialize;

use airlock_broker::limits::Limits;

/// The most any one run may be given. Kept as plain data so a policy file can fill it later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ceilings {
    /// Longest wall-clock budget.
    pub timeout: Duration,
    /// Largest memory ceiling.
    pub memory_bytes: u64,
    /// Most tool calls per run.
    pub max_tool_calls: u32,
    /// Largest captured output per stream.
    pub max_output_bytes: usize,
}

impl Default for Ceilings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(300),
            memory_bytes: 1024 * 1024 * 1024,
            max_tool_calls: 1024,
            max_output_bytes: 256 * 1024,
        }
    }
}

/// The `limits` member of `execute` params; every field optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestedLimits {
    /// Wall-clock budget in seconds.
    pub timeout_s: Option<f64>,
    /// Memory ceiling in MiB.
    pub memory_mb: Option<u64>,
    /// Tool calls allowed.
    pub max_tool_calls: Option<u32>,
    /// Captured bytes per output stream.
    pub max_output_bytes: Option<usize>,
}

/// A requested limit the server will not grant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("limits.{limit}: {reason}")]
pub struct LimitRefusal {
    /// The wire name of the limit (`timeout_s`, `memory_mb`, ...).
    pub limit: &'static str,
    /// Why, with the ceiling when that is the reason.
    pub reason: String,
}

fn refuse(limit: &'static str, reason: impl Into<String>) -> LimitRefusal {
    LimitRefusal {
        limit,
        reason: reason.into(),
    }
}

const MIB: u64 = 1024 * 1024;

impl Ceilings {
    /// The limits of a run: `defaults` (lowered to the ceilings) overridden by `req`.
    pub fn resolve(
        &self,
        defaults: &Limits,
        req: &RequestedLimits,
    ) -> Result<Limits, LimitRefusal> {
        let mut limits = Limits {
            timeout: defaults.timeout.min(self.timeout),
            memory_bytes: defaults.memory_bytes.min(self.memory_bytes),
            max_tool_calls: defaults.max_tool_calls.min(self.max_tool_calls),
            max_output_bytes: defaults.max_output_bytes.min(self.max_output_bytes),
            ..defaults.clone()
        };
        if let Some(t) = req.timeout_s {
            if !(t.is_finite() && t > 0.0) {
                return Err(refuse(
                    "timeout_s",
                    format!("must be a positive number, got {t}"),
                ));
            }
            let max = self.timeout.as_secs_f64();
            if t > max {
                return Err(refuse(
                    "timeout_s",
                    format!("{t} exceeds the server ceiling of {max}"),
                ));
            }
            limits.timeout = Duration::from_secs_f64(t);
        }
        if let Some(mb) = req.memory_mb {
            let max = self.memory_bytes / MIB;
            if mb == 0 {
                return Err(refuse("memory_mb", "must be at least 1"));
            }
            if mb > max {
                return Err(refuse(
                    "memory_mb",
                    format!("{mb} exceeds the server ceiling of {max}"),
                ));
            }
            limits.memory_bytes = mb * MIB;
        }
        if let Some(n) = req.max_tool_calls {
            if n > self.max_tool_calls {
                let max = self.max_tool_calls;
                return Err(refuse(
                    "max_tool_calls",
                    format!("{n} exceeds the server ceiling of {max}"),
                ));
            }
            limits.max_tool_calls = n;
        }
        if let Some(n) = req.max_output_bytes {
            if n > self.max_output_bytes {
                let max = self.max_output_bytes;
                return Err(refuse(
                    "max_output_bytes",
                    format!("{n} exceeds the server ceiling of {max}"),
                ));
            }
            limits.max_output_bytes = n;
        }
        Ok(limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ceilings() -> Ceilings {
        Ceilings {
            timeout: Duration::from_secs(10),
            memory_bytes: 256 * MIB,
            max_tool_calls: 5,
            max_output_bytes: 1000,
        }
    }

    #[test]
    fn absent_limits_get_defaults_lowered_to_the_ceilings() {
        let got = ceilings()
            .resolve(&Limits::default(), &RequestedLimits::default())
            .unwrap();
        assert_eq!(got.timeout, Duration::from_secs(10));
        assert_eq!(got.memory_bytes, 256 * MIB);
        assert_eq!(got.max_tool_calls, 5);
        assert_eq!(got.max_output_bytes, 1000);
        assert_eq!(got.grace, Limits::default().grace);
    }

    #[test]
    fn requests_within_the_ceilings_are_granted_exactly() {
        let req = RequestedLimits {
            timeout_s: Some(2.5),
            memory_mb: Some(64),
            max_tool_calls: Some(0),
            max_output_bytes: Some(10),
        };
        let got = ceilings().resolve(&Limits::default(), &req).unwrap();
        assert_eq!(got.timeout, Duration::from_millis(2500));
        assert_eq!(got.memory_bytes, 64 * MIB);
        assert_eq!(got.max_tool_calls, 0);
        assert_eq!(got.max_output_bytes, 10);
    }

    #[test]
    fn above_ceiling_asks_are_refused_by_name() {
        let c = ceilings();
        let d = Limits::default();
        let cases = [
            (
                RequestedLimits {
                    timeout_s: Some(10.5),
                    ..Default::default()
                },
                "timeout_s",
            ),
            (
                RequestedLimits {
                    timeout_s: Some(-1.0),
                    ..Default::default()
                },
                "timeout_s",
            ),
            (
                RequestedLimits {
                    memory_mb: Some(257),
                    ..Default::default()
                },
                "memory_mb",
            ),
            (
                RequestedLimits {
                    memory_mb: Some(0),
                    ..Default::default()
                },
                "memory_mb",
            ),
            (
                RequestedLimits {
                    max_tool_calls: Some(6),
                    ..Default::default()
                },
                "max_tool_calls",
            ),
            (
                RequestedLimits {
                    max_output_bytes: Some(1001),
                    ..Default::default()
                },
                "max_output_bytes",
            ),
        ];
        for (req, name) in cases {
            let err = c.resolve(&d, &req).unwrap_err();
            assert_eq!(err.limit, name, "{req:?}");
            assert!(
                err.to_string().starts_with(&format!("limits.{name}:")),
                "{err}"
            );
        }
    }

    #[test]
    fn unknown_limit_names_do_not_parse() {
        let r: Result<RequestedLimits, _> = serde_json::from_value(serde_json::json!({"cpu": 1}));
        assert!(r.is_err());
    }
}
