//! Decisions: every allow and deny the proxy makes, as a record for the run's result and the
//! observer, and the reason as a stable kind plus a message a model understands.
use std::net::IpAddr;
use std::sync::Mutex;

use serde::Serialize;

/// Why a request was denied.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DenyReason {
    /// No allow rule names the host.
    HostNotAllowed,
    /// A deny rule names the host (deny wins over allow).
    HostDenied,
    /// An allow rule names the host, but not this port.
    PortNotAllowed,
    /// The name resolved to (or is) an address in a range that was not opted into.
    ForbiddenAddress {
        /// The address.
        ip: IpAddr,
        /// The range's name.
        range: &'static str,
    },
    /// The broker could not resolve the name.
    ResolutionFailed(String),
    /// The request was not a proxy request the proxy serves.
    BadRequest(String),
}

impl DenyReason {
    /// A stable, message-free name.
    pub fn kind(&self) -> &'static str {
        match self {
            DenyReason::HostNotAllowed => "host_not_allowed",
            DenyReason::HostDenied => "host_denied",
            DenyReason::PortNotAllowed => "port_not_allowed",
            DenyReason::ForbiddenAddress { .. } => "forbidden_address",
            DenyReason::ResolutionFailed(_) => "resolution_failed",
            DenyReason::BadRequest(_) => "bad_request",
        }
    }

    /// What happened, for a person or a model.
    pub fn message(&self) -> String {
        match self {
            DenyReason::HostNotAllowed => "host not in the allowlist".into(),
            DenyReason::HostDenied => "host is explicitly denied".into(),
            DenyReason::PortNotAllowed => "the host is allowed, but not on this port".into(),
            DenyReason::ForbiddenAddress { ip, range } => {
                format!("it resolves to {ip}, a {range} address, which this sandbox may not reach")
            }
            DenyReason::ResolutionFailed(e) => format!("the name could not be resolved ({e})"),
            DenyReason::BadRequest(e) => format!("not a request this proxy serves ({e})"),
        }
    }
}

/// One allow or deny.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The host as requested (normalised), bounded.
    pub host: String,
    /// The port requested (0 when the request named none it could be read from).
    pub port: u16,
    /// `CONNECT`, or the plain-HTTP method, bounded.
    pub method: String,
    /// `"allow"` or `"deny"`.
    pub decision: &'static str,
    /// `"allowed"` or the deny reason's kind.
    pub reason: &'static str,
    /// The reason, in words.
    pub message: String,
    /// The vetted address the proxy connected to (allowed), or the one that was refused.
    pub address: Option<IpAddr>,
}

impl Decision {
    /// An allow, to `address`.
    pub fn allow(host: &str, port: u16, method: &str, address: IpAddr) -> Decision {
        Decision {
            host: bounded(host),
            port,
            method: bounded(method),
            decision: "allow",
            reason: "allowed",
            message: "allowed by the allowlist".into(),
            address: Some(address),
        }
    }

    /// A deny.
    pub fn deny(host: &str, port: u16, method: &str, why: &DenyReason) -> Decision {
        let address = match why {
            DenyReason::ForbiddenAddress { ip, .. } => Some(*ip),
            _ => None,
        };
        Decision {
            host: bounded(host),
            port,
            method: bounded(method),
            decision: "deny",
            reason: why.kind(),
            message: why.message(),
            address,
        }
    }

    /// Whether the request was allowed.
    pub fn allowed(&self) -> bool {
        self.decision == "allow"
    }
}

fn bounded(s: &str) -> String {
    s.chars().take(255).collect()
}

/// Receives every decision, inline; must not block.
pub trait DecisionSink: Send + Sync {
    /// One decision was made.
    fn record(&self, decision: Decision);
}

/// Keeps the first `cap` decisions of a run and counts the rest.
#[derive(Debug)]
pub struct DecisionLog {
    cap: usize,
    inner: Mutex<(Vec<Decision>, u64)>,
}

impl DecisionLog {
    /// A log keeping at most `cap` records.
    pub fn new(cap: usize) -> DecisionLog {
        DecisionLog {
            cap,
            inner: Mutex::new((Vec::new(), 0)),
        }
    }

    /// The records kept, and how many were dropped past the cap.
    pub fn snapshot(&self) -> (Vec<Decision>, u64) {
        match self.inner.lock() {
            Ok(g) => (g.0.clone(), g.1),
            Err(p) => {
                let g = p.into_inner();
                (g.0.clone(), g.1)
            }
        }
    }
}

impl DecisionSink for DecisionLog {
    fn record(&self, decision: Decision) {
        let mut g = match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if g.0.len() < self.cap {
            g.0.push(decision);
        } else {
            g.1 = g.1.saturating_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_is_bounded() {
        let log = DecisionLog::new(2);
        for i in 0..5u16 {
            log.record(Decision::deny("h", i, "GET", &DenyReason::HostNotAllowed));
        }
        let (kept, dropped) = log.snapshot();
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[1].port, 1);
        assert_eq!(dropped, 3);
    }

    #[test]
    fn deny_records_the_refused_address() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let d = Decision::deny(
            "localhost",
            80,
            "GET",
            &DenyReason::ForbiddenAddress {
                ip,
                range: "loopback (127.0.0.0/8)",
            },
        );
        assert_eq!(
            (d.decision, d.reason, d.address),
            ("deny", "forbidden_address", Some(ip))
        );
        assert!(d.message.contains("127.0.0.1") && d.message.contains("loopback"));
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["decision"], "deny");
    }
}
