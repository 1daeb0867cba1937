//! The OpenTelemetry span of one served request (`execute` and the session methods): named
//! after its method, a child of the client's span when the request carried a trace context
//! (`crate::telemetry::trace_context`), else the root of a fresh trace.
//!
//! Spans are `tracing` spans of target [`TARGET`]; the `airlock` binary exports that target
//! alone over OTLP when `--otlp-endpoint` is given (and keeps it out of the stderr logs), so
//! without an endpoint they cost next to nothing. Attributes are ids, names and codes only:
//! never program text, stdin, env values or tool arguments.
use airlock_protocol::{ErrorCode, Message};
use opentelemetry::Context;
use serde_json::Value;
use tracing::field::Empty;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::tenancy::conn_info::ConnInfo;

/// The `tracing` target of every span exported as an OpenTelemetry span.
pub const TARGET: &str = "airlock_trace";

/// Members of a successful answer copied onto the span when they are strings.
const ANSWER_ATTRIBUTES: [(&str, &str); 4] = [
    ("sandbox_id", "airlock.sandbox_id"),
    ("run_id", "airlock.run_id"),
    ("status", "airlock.status"),
    ("via", "airlock.via"),
];

/// The span of a request for `method` on `info`'s connection, under `parent` when given.
pub fn request(method: &str, info: &ConnInfo, parent: Option<Context>) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        parent: None,
        "request",
        otel.name = method,
        otel.kind = "server",
        otel.status_code = Empty,
        rpc.system = "jsonrpc",
        rpc.method = method,
        airlock.tenant = info.tenant.as_str(),
        airlock.connection = info.id.as_str(),
        airlock.transport = info.transport,
        airlock.sandbox_id = Empty,
        airlock.run_id = Empty,
        airlock.status = Empty,
        airlock.via = Empty,
        airlock.error_code = Empty,
    );
    if let Some(cx) = parent {
        // Fails only when the span is disabled (no exporter): nothing to parent then.
        let _ = span.set_parent(cx);
    }
    span
}

/// Records the sandbox a request acts on.
pub fn record_sandbox(span: &Span, sandbox_id: &str) {
    span.record("airlock.sandbox_id", sandbox_id);
}

/// Records what a request was answered: the error's code name (and an error status), or the
/// ids, run status and `via` a success carries.
pub fn record_answer(span: &Span, msg: &Message) {
    let Message::Response(r) = msg else {
        return;
    };
    match &r.outcome {
        Ok(Value::Object(m)) => {
            for (member, attribute) in ANSWER_ATTRIBUTES {
                if let Some(v) = m.get(member).and_then(Value::as_str) {
                    span.record(attribute, v);
                }
            }
        }
        Ok(_) => {}
        Err(e) => {
            let code = e.error_code().map_or("unknown", ErrorCode::name);
            span.record("airlock.error_code", code);
            span.record("otel.status_code", "error");
        }
    }
}
