//! One audit record per run, as a JSON line appended to a sink.
//!
//! A record says who ran what under which limits, every tool call the orchestrator was asked
//! to answer (name, latency, outcome), how the run ended and its peak memory. Guest-chosen
//! strings (tool names) are bounded and stripped of control characters before they are
//! written, so a program cannot forge or bloat audit lines.
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use airlock_broker::limits::Limits;
use airlock_broker::result::RunResult;

/// Longest tool name kept in a record.
const MAX_AUDIT_NAME: usize = 64;

/// The limits a run was given, in wire units.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditLimits {
    /// Wall-clock budget, seconds.
    pub timeout_s: f64,
    /// Memory ceiling, MiB.
    pub memory_mb: u64,
    /// Tool calls allowed.
    pub max_tool_calls: u32,
    /// Captured bytes per stream.
    pub max_output_bytes: usize,
}

impl From<&Limits> for AuditLimits {
    fn from(l: &Limits) -> Self {
        Self {
            timeout_s: l.timeout.as_secs_f64(),
            memory_mb: l.memory_bytes / (1024 * 1024),
            max_tool_calls: l.max_tool_calls,
            max_output_bytes: l.max_output_bytes,
        }
    }
}

/// One tool call relayed to the orchestrator (or answered by the broker for it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallRecord {
    /// The tool name (bounded, control characters removed).
    pub name: String,
    /// Time from the guest's call to the answer, in milliseconds.
    pub latency_ms: f64,
    /// `ok`, or the error code's name (`tool_error`, `unknown_tool`, ...).
    pub outcome: String,
}

impl ToolCallRecord {
    /// A record with `name` sanitised.
    pub fn new(name: &str, latency_ms: f64, outcome: impl Into<String>) -> Self {
        Self {
            name: sanitize(name),
            latency_ms,
            outcome: outcome.into(),
        }
    }
}

/// Bounded, printable rendering of a guest-chosen string.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control())
        .take(MAX_AUDIT_NAME)
        .collect()
}

/// The record of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditRecord {
    /// Unix time the record was written, milliseconds.
    pub ts_ms: u64,
    /// The run.
    pub run_id: String,
    /// The connection that asked for it.
    pub connection: String,
    /// The peer address (or `stdio`).
    pub peer: String,
    /// The tenant it ran for.
    pub tenant: String,
    /// `websocket` or `stdio`.
    pub transport: &'static str,
    /// `python` or `command`.
    pub workload: &'static str,
    /// The limits granted.
    pub limits: AuditLimits,
    /// Time spent waiting for a run slot, milliseconds.
    pub queued_ms: f64,
    /// Tool calls relayed to the orchestrator, in order.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Tool calls the program made, those refused by the broker included.
    pub tool_calls_total: u32,
    /// How it ended (`completed`, `timeout`, `cancelled`, ...).
    pub status: &'static str,
    /// The error code of a run that did not complete.
    pub error_code: Option<i64>,
    /// Exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Signal, when it was killed.
    pub signal: Option<i32>,
    /// Wall time of the run, milliseconds.
    pub wall_time_ms: f64,
    /// Peak resident memory of the run tree, bytes.
    pub peak_rss_bytes: u64,
}

/// What the session knows about a run when it ends.
#[derive(Debug)]
pub struct RunFacts<'a> {
    /// Run id.
    pub run_id: &'a str,
    /// Connection id.
    pub connection: &'a str,
    /// Peer.
    pub peer: &'a str,
    /// The tenant it ran for.
    pub tenant: &'a crate::tenancy::tenant::Tenant,
    /// Transport name.
    pub transport: &'static str,
    /// Workload kind.
    pub workload: &'static str,
    /// Limits granted.
    pub limits: &'a Limits,
    /// Queue wait.
    pub queued_ms: f64,
}

impl AuditRecord {
    /// Build the record of a finished run.
    pub fn new(facts: &RunFacts<'_>, tool_calls: Vec<ToolCallRecord>, result: &RunResult) -> Self {
        let ts_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Self {
            ts_ms,
            run_id: facts.run_id.to_string(),
            connection: facts.connection.to_string(),
            peer: facts.peer.to_string(),
            tenant: facts.tenant.to_string(),
            transport: facts.transport,
            workload: facts.workload,
            limits: facts.limits.into(),
            queued_ms: facts.queued_ms,
            tool_calls,
            tool_calls_total: result.tool_calls,
            status: result.status.as_str(),
            error_code: result.error.as_ref().map(|e| e.code),
            exit_code: result.exit_code,
            signal: result.signal,
            wall_time_ms: result.wall_time_ms,
            peak_rss_bytes: result.peak_rss_bytes,
        }
    }
}

/// Where audit lines go. Writes are serialised; each record is one `write` of one line.
pub struct AuditSink {
    out: Mutex<Box<dyn Write + Send>>,
}

impl std::fmt::Debug for AuditSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditSink")
    }
}

impl AuditSink {
    /// Append to `path` (created `0600` if missing).
    pub fn open(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)?;
        Ok(Self::from_writer(Box::new(file)))
    }

    /// Any writer (tests, stderr).
    pub fn from_writer(out: Box<dyn Write + Send>) -> Self {
        Self {
            out: Mutex::new(out),
        }
    }

    /// Write one record. A failing sink is logged, never fatal to the run.
    pub fn write(&self, record: &AuditRecord) {
        self.write_line(record, &record.run_id);
    }

    /// Write one JSON line of any serialisable record (policy events, see `audit_events`).
    pub fn write_line(&self, record: &impl Serialize, what: &str) {
        let mut line = match serde_json::to_vec(record) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "audit record could not be serialised");
                return;
            }
        };
        line.push(b'\n');
        let written = match self.out.lock() {
            Ok(mut out) => out.write_all(&line).and_then(|()| out.flush()),
            Err(_) => Err(std::io::Error::other("audit sink lock poisoned")),
        };
        if let Err(e) = written {
            tracing::error!(error = %e, record = %what, "audit record could not be written");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_chosen_names_are_bounded_and_printable() {
        let r = ToolCallRecord::new(&format!("a\nb\u{1b}[31m{}", "x".repeat(500)), 1.0, "ok");
        assert!(!r.name.contains('\n') && !r.name.contains('\u{1b}'));
        assert_eq!(r.name.chars().count(), MAX_AUDIT_NAME);
    }
}
