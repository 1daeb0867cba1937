//! A span per tool call a run makes: wraps a run's [`ToolHandler`] (the registry's door, the
//! orchestrator relay, or no tools at all), so every call is seen — one the door denies as
//! much as one the orchestrator answers. The span is a child of the request's span and names
//! the tool, the run and the outcome (`ok` or the error code), never the arguments.
use airlock_broker::tools::{ToolFailure, ToolHandler};
use futures_util::future::BoxFuture;
use serde_json::Value;
use tracing::field::Empty;
use tracing::{Instrument, Span};

use crate::telemetry::request_span::TARGET;

/// A run's tools, traced.
pub struct TracedTools<'a> {
    inner: &'a dyn ToolHandler,
    request: Span,
    run_id: String,
}

impl std::fmt::Debug for TracedTools<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracedTools")
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

impl<'a> TracedTools<'a> {
    /// `inner`'s calls, each a span under `request`, for run `run_id`.
    pub fn new(inner: &'a dyn ToolHandler, request: Span, run_id: &str) -> Self {
        Self {
            inner,
            request,
            run_id: run_id.to_owned(),
        }
    }

    fn span(&self, name: &str) -> Span {
        tracing::info_span!(
            target: TARGET,
            parent: &self.request,
            "tool_call",
            otel.name = "tool.call",
            otel.kind = "internal",
            otel.status_code = Empty,
            airlock.tool = crate::telemetry::audit::sanitize(name).as_str(),
            airlock.run_id = self.run_id.as_str(),
            airlock.outcome = Empty,
            airlock.error_code = Empty,
        )
    }
}

impl ToolHandler for TracedTools<'_> {
    fn call<'b>(&'b self, name: &'b str, args: Value) -> BoxFuture<'b, Result<Value, ToolFailure>> {
        let span = self.span(name);
        Box::pin(async move {
            let result = self.inner.call(name, args).instrument(span.clone()).await;
            match &result {
                Ok(_) => span.record("airlock.outcome", "ok"),
                Err(f) => span
                    .record("airlock.outcome", "error")
                    .record("airlock.error_code", f.code.name())
                    .record("otel.status_code", "error"),
            };
            result
        })
    }
}
