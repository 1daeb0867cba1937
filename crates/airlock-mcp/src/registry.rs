//! The upstream tools offered to sandboxed code, and the per-run [`ToolHandler`] through which
//! every `call_tool("NAME.tool", args)` passes.
//!
//! The registry is sealed at start-up: it holds exactly the tools the upstreams listed then,
//! under qualified names `NAME.tool`. A call is answered only after, in order: the per-run call
//! cap (refusals count), the name (unknown names are refused with a sanitized echo), the
//! arguments (an object, valid against the tool's `inputSchema`, checked on the host), the
//! upstream call (with its timeout), and the response size cap. Every refusal is a
//! [`ToolFailure`] whose `data` is `{code, reason, retryable}`.
//!
//! This mirrors the host-tool registry's contract (source/sink/identity declarations aside);
//! when that registry lands in `airlock-router`, [`UpstreamTools::start`] registers into it
//! and [`RunTools`] becomes a thin adapter.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use airlock_broker::{ToolFailure, ToolHandler};
use airlock_protocol::ErrorCode;
use futures_util::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{json, Map, Value};

use crate::config::UpstreamSpec;
use crate::error::McpError;
use crate::upstream::{CallError, Upstream};

/// Longest upstream description kept (stubs, the `execute` description).
pub const MAX_DESCRIPTION_CHARS: usize = 2000;
/// Longest upstream error text relayed to the program.
const MAX_ERROR_TEXT_CHARS: usize = 4000;
/// Schema violations reported for one call.
const MAX_REPORTED_VIOLATIONS: usize = 5;

/// One registered upstream tool.
#[derive(Debug)]
pub struct UpstreamTool {
    /// `NAME.tool`, as the program calls it.
    pub qualified: String,
    /// The upstream's name.
    pub upstream: String,
    /// The tool's own name at the upstream.
    pub tool: String,
    /// Its description (bounded).
    pub description: String,
    /// Its input schema, as listed.
    pub input_schema: Value,
    index: usize,
    validator: jsonschema::Validator,
}

/// The sealed set of upstream tools.
#[derive(Debug, Default)]
pub struct UpstreamTools {
    upstreams: Vec<Upstream>,
    tools: BTreeMap<String, UpstreamTool>,
}

impl UpstreamTools {
    /// Start every upstream and register its tools. Any upstream that fails to start fails
    /// the whole start-up (a model must not be told of tools that are not there).
    pub async fn start(
        specs: &[UpstreamSpec],
        start_timeout: std::time::Duration,
        call_timeout: std::time::Duration,
    ) -> Result<UpstreamTools, McpError> {
        let mut names = std::collections::BTreeSet::new();
        for s in specs {
            if !names.insert(s.name.as_str()) {
                return Err(McpError::BadUpstreamSpec {
                    spec: s.name.clone(),
                    reason: "the name is used twice".into(),
                });
            }
        }
        let started = futures_util::future::join_all(
            specs
                .iter()
                .map(|s| Upstream::start(s, start_timeout, call_timeout)),
        )
        .await;
        let upstreams = started.into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(Self::from_upstreams(upstreams))
    }

    /// Register the tools of already-started upstreams. A tool whose name is not usable or
    /// whose schema does not compile is left out, with a warning.
    pub fn from_upstreams(upstreams: Vec<Upstream>) -> UpstreamTools {
        let mut tools = BTreeMap::new();
        for (index, up) in upstreams.iter().enumerate() {
            for t in up.tools() {
                let name = t.name.to_string();
                if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
                    tracing::warn!(
                        upstream = up.name(),
                        "skipping a tool with an unusable name"
                    );
                    continue;
                }
                let schema = Value::Object((*t.input_schema).clone());
                let validator = match jsonschema::validator_for(&schema) {
                    Ok(v) => v,
                    Err(e) => {
                        tracing::warn!(upstream = up.name(), tool = %name, error = %e,
                            "skipping a tool whose input schema does not compile");
                        continue;
                    }
                };
                let description: String = t
                    .description
                    .as_deref()
                    .unwrap_or("")
                    .chars()
                    .take(MAX_DESCRIPTION_CHARS)
                    .collect();
                let qualified = format!("{}.{}", up.name(), name);
                tools.insert(
                    qualified.clone(),
                    UpstreamTool {
                        qualified,
                        upstream: up.name().to_owned(),
                        tool: name,
                        description,
                        input_schema: schema,
                        index,
                        validator,
                    },
                );
            }
        }
        UpstreamTools { upstreams, tools }
    }

    /// The registered tools, by qualified name.
    pub fn tools(&self) -> impl Iterator<Item = &UpstreamTool> {
        self.tools.values()
    }

    /// No tools at all.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// A handler for one run: at most `max_calls` calls (refusals count), responses of at most
    /// `max_response_bytes` JSON bytes.
    pub fn for_run(self: &Arc<Self>, max_calls: u32, max_response_bytes: usize) -> RunTools {
        RunTools {
            registry: Arc::clone(self),
            calls: AtomicU32::new(0),
            max_calls,
            max_response_bytes,
        }
    }

    async fn call(&self, name: &str, args: Value, max_bytes: usize) -> Result<Value, ToolFailure> {
        let Some(tool) = self.tools.get(name) else {
            return Err(unknown(name));
        };
        let args = match args {
            Value::Null => Map::new(),
            Value::Object(m) => m,
            other => {
                return Err(denial(
                    ErrorCode::InvalidParams,
                    "invalid_arguments",
                    format!(
                        "{name} takes an object of arguments, got {}",
                        kind_of(&other)
                    ),
                    false,
                ))
            }
        };
        let instance = Value::Object(args);
        let violations: Vec<String> = tool
            .validator
            .iter_errors(&instance)
            .take(MAX_REPORTED_VIOLATIONS)
            .map(|e| {
                let path = e.instance_path().to_string();
                let at = if path.is_empty() {
                    "/".to_owned()
                } else {
                    path
                };
                format!("at {at}: {e}")
            })
            .collect();
        if !violations.is_empty() {
            return Err(denial(
                ErrorCode::InvalidParams,
                "invalid_arguments",
                format!(
                    "arguments do not match the input schema of {name}: {}",
                    violations.join("; ")
                ),
                false,
            ));
        }
        let Value::Object(args) = instance else {
            return Err(unknown(name));
        };
        let upstream = self
            .upstreams
            .get(tool.index)
            .ok_or_else(|| unknown(name))?;
        let result = upstream.call(&tool.tool, args).await.map_err(|e| match e {
            CallError::Timeout(d) => failed(
                "upstream_timeout",
                format!("{name} did not answer within {:.1} s", d.as_secs_f64()),
                true,
            ),
            CallError::Failed(m) => failed(
                "upstream_failed",
                format!("{name} failed: {}", bounded(&m)),
                true,
            ),
        })?;
        let value = convert(name, result)?;
        let size = serde_json::to_vec(&value)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > max_bytes {
            return Err(denial(
                ErrorCode::ToolError,
                "response_too_large",
                format!("{name} answered {size} bytes, above the {max_bytes} byte cap"),
                false,
            ));
        }
        Ok(value)
    }
}

/// The per-run view of the registry handed to the broker.
#[derive(Debug)]
pub struct RunTools {
    registry: Arc<UpstreamTools>,
    calls: AtomicU32,
    max_calls: u32,
    max_response_bytes: usize,
}

impl RunTools {
    /// Calls made so far in this run (refused ones included).
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::Relaxed)
    }
}

impl ToolHandler for RunTools {
    fn call<'a>(&'a self, name: &'a str, args: Value) -> BoxFuture<'a, Result<Value, ToolFailure>> {
        Box::pin(async move {
            let n = self.calls.fetch_add(1, Ordering::Relaxed).saturating_add(1);
            if n > self.max_calls {
                return Err(denial(
                    ErrorCode::ToolCallLimit,
                    "call_cap_exhausted",
                    format!("tool call limit of {} per run reached", self.max_calls),
                    false,
                ));
            }
            self.registry
                .call(name, args, self.max_response_bytes)
                .await
        })
    }
}

/// A refusal with the structured detail `{code, reason, retryable}`.
fn denial(code: ErrorCode, short: &str, reason: String, retryable: bool) -> ToolFailure {
    ToolFailure {
        code,
        message: reason.clone(),
        data: Some(json!({"code": short, "reason": reason, "retryable": retryable})),
    }
}

/// An upstream that did not serve the call: the registry's `tool_failed`, with which way it
/// failed (`upstream_error`, `upstream_timeout`, `upstream_failed`) as `detail`.
fn failed(detail: &str, reason: String, retryable: bool) -> ToolFailure {
    ToolFailure {
        code: ErrorCode::ToolError,
        message: reason.clone(),
        data: Some(json!({
            "code": "tool_failed", "detail": detail, "reason": reason, "retryable": retryable,
        })),
    }
}

fn unknown(name: &str) -> ToolFailure {
    // The name is guest-chosen: echo a bounded, printable rendering only.
    let shown: String = name.chars().filter(|c| !c.is_control()).take(64).collect();
    denial(
        ErrorCode::UnknownTool,
        "unknown_tool",
        format!("no tool named {shown:?} is available"),
        false,
    )
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn bounded(s: &str) -> String {
    let mut out: String = s.chars().take(MAX_ERROR_TEXT_CHARS).collect();
    if out.len() < s.len() {
        out.push_str("...");
    }
    out
}

fn block_value(block: &ContentBlock) -> Value {
    match block {
        ContentBlock::Text(t) => {
            serde_json::from_str(&t.text).unwrap_or_else(|_| Value::String(t.text.clone()))
        }
        other => serde_json::to_value(other).unwrap_or(Value::Null),
    }
}

fn text_of(result: &CallToolResult) -> String {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    texts.join("\n")
}

/// What the program receives for an upstream result: its structured content when it has
/// some, else its single content block (text parsed as JSON when it is JSON), else a list.
fn convert(name: &str, result: CallToolResult) -> Result<Value, ToolFailure> {
    if result.is_error == Some(true) {
        let text = bounded(&text_of(&result));
        return Err(ToolFailure {
            code: ErrorCode::ToolError,
            message: format!("{name} reported an error: {text}"),
            data: Some(json!({
                "code": "tool_failed",
                "detail": "upstream_error",
                "reason": text,
                "retryable": false,
                "structured": result.structured_content,
            })),
        });
    }
    if let Some(v) = result.structured_content {
        return Ok(v);
    }
    match result.content.as_slice() {
        [] => Ok(Value::Null),
        [one] => Ok(block_value(one)),
        many => Ok(Value::Array(many.iter().map(block_value).collect())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_convert_to_program_values() {
        let r = CallToolResult::success(vec![ContentBlock::text("{\"t\": 3}")]);
        assert_eq!(convert("a.b", r).unwrap(), json!({"t": 3}));
        let r = CallToolResult::success(vec![ContentBlock::text("sunny")]);
        assert_eq!(convert("a.b", r).unwrap(), json!("sunny"));
        let r = CallToolResult::success(vec![ContentBlock::text("1"), ContentBlock::text("x")]);
        assert_eq!(convert("a.b", r).unwrap(), json!([1, "x"]));
        let err = convert(
            "a.b",
            CallToolResult::error(vec![ContentBlock::text("no city")]),
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::ToolError);
        let data = err.data.unwrap();
        assert_eq!(data["code"], "tool_failed");
        assert_eq!(data["detail"], "upstream_error");
        assert_eq!(data["reason"], "no city");
        assert_eq!(data["retryable"], false);
    }

    #[tokio::test]
    async fn an_empty_registry_refuses_every_name_and_counts_the_refusal() {
        let reg = Arc::new(UpstreamTools::default());
        let run = reg.for_run(1, 1024);
        let err = run.call("x.y\u{1b}", json!({})).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::UnknownTool);
        assert!(!err.message.contains('\u{1b}'));
        assert_eq!(err.data.unwrap()["code"], "unknown_tool");
        let err = run.call("x.y", json!({})).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::ToolCallLimit);
        assert_eq!(run.calls(), 2);
    }
}
