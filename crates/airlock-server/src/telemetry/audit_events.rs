//! The policy layer's events as audit lines: every sandbox acquired or refused, disposed,
//! outputs collected, egress decided, host tool called, as one JSON object per line with an
//! `event` name, in the same file as the run records (`--audit`).
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use airlock_router::{
    EgressDecided, HostToolCalled, OutputsCollected, SandboxAcquired, SandboxDisposed,
    SandboxObserver,
};
use serde_json::{json, Value};

use crate::telemetry::audit::AuditSink;

/// Writes router and backend events to an [`AuditSink`].
#[derive(Debug)]
pub struct AuditObserver(pub Arc<AuditSink>);

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

impl AuditObserver {
    fn emit(&self, event: &str, mut fields: Value) {
        if let Value::Object(m) = &mut fields {
            m.insert("event".into(), json!(event));
            m.insert("ts_ms".into(), json!(now_ms()));
        }
        self.0.write_line(&fields, event);
    }
}

impl SandboxObserver for AuditObserver {
    fn sandbox_acquired(&self, e: &SandboxAcquired) {
        let event = if e.failure.is_some() {
            "sandbox_refused"
        } else {
            "sandbox_acquired"
        };
        self.emit(
            event,
            json!({
                "key": e.key.to_string(),
                "egress": e.egress.as_str(),
                "scope": e.scope.map(|s| s.as_str()),
                "backend": e.backend,
                "reused": e.reused,
                "failure": e.failure,
            }),
        );
    }

    fn sandbox_disposed(&self, e: &SandboxDisposed) {
        self.emit(
            "sandbox_disposed",
            json!({ "key": e.key.to_string(), "failure": e.failure.map(|c| c.as_str()) }),
        );
    }

    fn host_tool_called(&self, e: &HostToolCalled) {
        self.emit(
            "host_tool_called",
            json!({
                "key": e.key.as_ref().map(ToString::to_string),
                "tool": crate::telemetry::audit::sanitize(&e.tool),
                "outcome": format!("{:?}", e.outcome),
                "response_bytes": e.response_bytes,
                "failure": e.failure,
            }),
        );
    }

    fn outputs_collected(&self, e: &OutputsCollected) {
        self.emit(
            "outputs_collected",
            json!({
                "key": e.key.as_ref().map(ToString::to_string),
                "count": e.count,
                "bytes": e.bytes,
                "failure": e.failure,
            }),
        );
    }

    fn egress_decided(&self, e: &EgressDecided) {
        self.emit(
            "egress_decided",
            json!({
                "key": e.key.to_string(),
                "host": crate::telemetry::audit::sanitize(&e.host),
                "port": e.port,
                "allowed": e.allowed,
                "reason": e.reason,
            }),
        );
    }
}
