//! The server's Prometheus metrics: one registry (`prometheus-client`), the families recorded
//! as runs, refusals, transfers, tool calls and egress decisions pass through, and the text
//! exposition `GET /metrics` answers (OpenMetrics text, which Prometheus scrapes).
//!
//! Recording is one call at the few places those already pass: a run's result
//! ([`Metrics::run_ended`], its tool calls too: relayed, or refused before the relay), every answer a session sends ([`Metrics::answered`]: its error
//! code, if any, is a refusal), a file transfer ([`Metrics::transferred`]), the policy layer's
//! egress decisions ([`crate::ops::metrics_observer`]). What is read at scrape time (sandboxes live
//! and paused, each sandbox's memory and disk) is [`crate::ops::metrics_live`]'s. Every label takes
//! its values from a closed set (a status, a `via`, an error-code name, a tenant, a held
//! sandbox's id), so the series are bounded.
use std::sync::{Arc, OnceLock};

use airlock_broker::result::RunResult;
use airlock_protocol::{ErrorCode, Message};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::telemetry::audit::ToolCallRecord;

/// The tool-call outcome of a call refused before it reached the orchestrator.
const REFUSED: &str = "refused";

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Labels whose values are all static names.
type Static<const N: usize> = [(&'static str, &'static str); N];
/// One label whose value is owned (a tool call's outcome).
type Owned = [(&'static str, String); 1];

/// Builds histograms of one bucket layout.
#[derive(Debug, Clone, Copy)]
struct Buckets {
    start: f64,
    count: u16,
}

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(exponential_buckets(self.start, 2.0, self.count))
    }
}

/// Run latency: 5 ms doubling to ~330 s (past the 300 s ceiling's default).
const RUN_SECONDS: Buckets = Buckets {
    start: 0.005,
    count: 17,
};
/// Time queued for a run slot: 1 ms doubling to ~260 s.
const QUEUE_SECONDS: Buckets = Buckets {
    start: 0.001,
    count: 19,
};

/// Every family the server records, and the registry that exposes them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    runs: Family<Static<2>, Counter>,
    run_seconds: Family<Static<1>, Histogram, Buckets>,
    queued_seconds: Family<Static<1>, Histogram, Buckets>,
    refusals: Family<Static<1>, Counter>,
    egress: Family<Static<1>, Counter>,
    tool_calls: Family<Owned, Counter>,
    transfer_bytes: Family<Static<1>, Counter>,
    /// What the scrape reads live (set once the server's sandboxes exist).
    live: Arc<OnceLock<Arc<crate::registry::sandboxes::Sandboxes>>>,
}

/// What a byte count moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// `files.write` payload bytes into a sandbox.
    FilesWrite,
    /// `files.read` payload bytes out of a sandbox.
    FilesRead,
    /// Bytes a run's program wrote to stdout.
    Stdout,
    /// Bytes a run's program wrote to stderr.
    Stderr,
}

impl Transfer {
    fn as_str(self) -> &'static str {
        match self {
            Transfer::FilesWrite => "files_write",
            Transfer::FilesRead => "files_read",
            Transfer::Stdout => "stdout",
            Transfer::Stderr => "stderr",
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every family registered (and no sample yet).
    #[must_use]
    pub fn new() -> Self {
        let mut m = Metrics {
            registry: Registry::default(),
            runs: Family::default(),
            run_seconds: Family::new_with_constructor(RUN_SECONDS),
            queued_seconds: Family::new_with_constructor(QUEUE_SECONDS),
            refusals: Family::default(),
            egress: Family::default(),
            tool_calls: Family::default(),
            transfer_bytes: Family::default(),
            live: Arc::new(OnceLock::new()),
        };
        m.register();
        m
    }

    fn register(&mut self) {
        let r = &mut self.registry;
        r.register(
            "airlock_runs",
            "Runs that started, by status and by how the run's process came to be (via)",
            self.runs.clone(),
        );
        r.register(
            "airlock_run_duration_seconds",
            "Wall time of a run from spawn to teardown, by via",
            self.run_seconds.clone(),
        );
        r.register(
            "airlock_run_queued_seconds",
            "Time a run waited for a run slot before it started, by via",
            self.queued_seconds.clone(),
        );
        r.register(
            "airlock_refusals",
            "Requests answered with a JSON-RPC error, by the error code's name (kind)",
            self.refusals.clone(),
        );
        r.register(
            "airlock_egress_decisions",
            "Egress proxy decisions of allowlist sandboxes, by decision (allowed, denied)",
            self.egress.clone(),
        );
        r.register(
            "airlock_tool_calls",
            "Tool calls runs made, by outcome: relayed to the orchestrator (ok, an error \
             code's name, abandoned), or refused before it",
            self.tool_calls.clone(),
        );
        r.register(
            "airlock_transfer_bytes",
            "Bytes moved: files.write and files.read payloads, runs' stdout and stderr (kind)",
            self.transfer_bytes.clone(),
        );
        r.register_collector(Box::new(crate::ops::metrics_live::Live::new(Arc::clone(
            &self.live,
        ))));
    }

    /// Read the live and paused sandboxes of `sandboxes` at each scrape (the first call wins).
    pub fn watch(&self, sandboxes: Arc<crate::registry::sandboxes::Sandboxes>) {
        let _ = self.live.set(sandboxes);
    }

    /// A run ended with `result` (one that never started — cancelled while queued — is not
    /// counted); `calls` are its tool calls as the audit record has them: those that reached
    /// the orchestrator's relay. The rest of the calls its program made (`result.tool_calls`
    /// counts every one) were refused before they got there — by the host-tool registry's
    /// door, the run's `max_tool_calls`, or a sandbox without host tools — and count as
    /// `refused`.
    pub fn run_ended(&self, result: &RunResult, calls: &[ToolCallRecord]) {
        if result.cancelled_before_start() {
            return;
        }
        let via = [("via", result.via.as_str())];
        self.runs
            .get_or_create(&[("status", result.status.as_str()), via[0]])
            .inc();
        self.run_seconds
            .get_or_create(&via)
            .observe(result.wall_time_ms / 1000.0);
        self.queued_seconds
            .get_or_create(&via)
            .observe(result.queued_ms / 1000.0);
        self.transferred(Transfer::Stdout, result.stdout_bytes);
        self.transferred(Transfer::Stderr, result.stderr_bytes);
        for c in calls {
            self.tool_calls
                .get_or_create(&[("outcome", c.outcome.clone())])
                .inc();
        }
        let relayed = u64::try_from(calls.len()).unwrap_or(u64::MAX);
        let refused = u64::from(result.tool_calls).saturating_sub(relayed);
        if refused > 0 {
            self.tool_calls
                .get_or_create(&[("outcome", REFUSED.to_owned())])
                .inc_by(refused);
        }
    }

    /// A message a session sends: an error response counts as a refusal of its code's kind.
    pub fn answered(&self, msg: &Message) {
        let Message::Response(r) = msg else { return };
        let Err(e) = &r.outcome else { return };
        let kind = ErrorCode::from_code(e.code).map_or("other", ErrorCode::name);
        self.refusals.get_or_create(&[("kind", kind)]).inc();
    }

    /// `bytes` moved as `what`.
    pub fn transferred(&self, what: Transfer, bytes: u64) {
        self.transfer_bytes
            .get_or_create(&[("kind", what.as_str())])
            .inc_by(bytes);
    }

    /// An egress proxy's decision.
    pub fn egress_decided(&self, allowed: bool) {
        let decision = if allowed { "allowed" } else { "denied" };
        self.egress.get_or_create(&[("decision", decision)]).inc();
    }

    /// The exposition: every family, the live gauges read now, and the closing `# EOF`.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Err(e) = encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "metrics did not encode");
            out.clear();
            out.push_str("# EOF\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_protocol::{ErrorObject, Id};

    #[test]
    fn refusals_are_counted_by_code_name_and_successes_not_at_all() {
        let m = Metrics::new();
        let busy = Message::error(Some(Id::Number(1)), ErrorObject::new(ErrorCode::Busy, "b"));
        m.answered(&busy);
        m.answered(&busy);
        m.answered(&Message::success(Id::Number(2), serde_json::json!({})));
        m.transferred(Transfer::FilesWrite, 7);
        let text = m.render();
        assert!(
            text.contains("airlock_refusals_total{kind=\"busy\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("airlock_transfer_bytes_total{kind=\"files_write\"} 7\n"));
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn tool_calls_the_relay_never_saw_are_counted_refused() {
        let m = Metrics::new();
        let mut result = RunResult::not_started(ErrorCode::InternalError, "x");
        result.tool_calls = 5;
        let relayed = [
            ToolCallRecord::new("add", 1.0, "ok"),
            ToolCallRecord::new("add", 1.0, "tool_error"),
        ];
        m.run_ended(&result, &relayed);
        // A run whose every call was relayed adds no refusal.
        result.tool_calls = 1;
        m.run_ended(&result, &relayed[..1]);
        let text = m.render();
        for line in [
            "airlock_tool_calls_total{outcome=\"ok\"} 2\n",
            "airlock_tool_calls_total{outcome=\"tool_error\"} 1\n",
            "airlock_tool_calls_total{outcome=\"refused\"} 3\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }
}
