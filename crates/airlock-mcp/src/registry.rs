//! The upstream tools offered to sandboxed code, registered in the host-tool registry
//! (`airlock_router::host_tools`), and the per-run [`ToolHandler`] through which every
//! `call_tool("NAME.tool", args)` passes.
//!
//! Each tool an upstream listed at start-up is registered as a [`HostTool`] named
//! `NAME.tool`, with the upstream's `inputSchema` as its argument schema and an explicit
//! declaration (source and sink `mcp:NAME`, identity `app`: the upstream acts with the
//! credentials airlock was started with). The registry is then sealed, so a program reaches
//! exactly those tools. Its one door ([`HostToolRun`]) applies, in order: the per-run call cap
//! (refusals count), the name (unknown names refused with a sanitized echo), host-side schema
//! validation, the body (the upstream call, with its timeout), and the response caps. Every
//! refusal is a [`ToolFailure`] whose `data` is the registry's `{code, reason, retryable}`.
use std::sync::Arc;

use airlock_broker::{ToolFailure, ToolHandler};
use airlock_policy::Identity;
use airlock_router::host_tools::{
    HostTool, HostToolLimits, HostToolRegistry, HostToolRun, SealedRegistry, ToolBody,
    ToolBodyError, ToolCall, ToolDeclaration,
};
use async_trait::async_trait;
use futures_util::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::{Map, Value};

use crate::config::UpstreamSpec;
use crate::error::McpError;
use crate::upstream::{CallError, Upstream};

/// Longest upstream description kept (stubs, the `execute` description).
pub const MAX_DESCRIPTION_CHARS: usize = 2000;
/// Longest upstream error text relayed to the program.
const MAX_ERROR_TEXT_CHARS: usize = 900;

/// What is known about one registered upstream tool (for stubs and descriptions).
#[derive(Debug, Clone)]
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
    /// Its output schema, when it declares one.
    pub output_schema: Option<Value>,
}

/// The sealed set of upstream tools.
#[derive(Debug)]
pub struct UpstreamTools {
    registry: SealedRegistry,
    tools: Vec<UpstreamTool>,
    _upstreams: Vec<Arc<Upstream>>,
}

impl UpstreamTools {
    /// Start every upstream and register its tools. Any upstream that fails to start fails
    /// the whole start-up (a model must not be told of tools that are not there).
    pub async fn start(
        specs: &[UpstreamSpec],
        start_timeout: std::time::Duration,
        call_timeout: std::time::Duration,
        limits: HostToolLimits,
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
        Ok(Self::from_upstreams(upstreams, limits))
    }

    /// Register the tools of already-started upstreams and seal. A tool the registry refuses
    /// (unusable name, schema that does not compile) is left out, with a warning.
    pub fn from_upstreams(upstreams: Vec<Upstream>, limits: HostToolLimits) -> UpstreamTools {
        let upstreams: Vec<Arc<Upstream>> = upstreams.into_iter().map(Arc::new).collect();
        let listed: Vec<(&str, &[Tool])> =
            upstreams.iter().map(|u| (u.name(), u.tools())).collect();
        let body = |i: usize, t: &UpstreamTool, unwrap: bool| -> Arc<dyn ToolBody> {
            Arc::new(UpstreamBody {
                upstream: Arc::clone(&upstreams[i]),
                tool: t.tool.clone(),
                qualified: t.qualified.clone(),
                unwrap,
            })
        };
        let mut offered = Self::from_listed(&listed, limits, body);
        offered._upstreams = upstreams;
        offered
    }

    /// Register the tools `listed` (each upstream's name and the tools it listed) and seal;
    /// `body(i, tool, unwrap)` answers the calls of a tool of the `i`th upstream (`unwrap`: its
    /// output schema is an SDK's `{"result": X}` wrapper). [`Self::from_upstreams`] for live
    /// upstreams; the `mcp_upstream_reply` fuzz target answers from its input.
    pub(crate) fn from_listed<B>(
        listed: &[(&str, &[Tool])],
        limits: HostToolLimits,
        body: B,
    ) -> UpstreamTools
    where
        B: Fn(usize, &UpstreamTool, bool) -> Arc<dyn ToolBody>,
    {
        let mut registry = HostToolRegistry::new().limits(limits);
        let mut tools = Vec::new();
        for (i, (upstream, listed_tools)) in listed.iter().enumerate() {
            let flow = format!("mcp:{upstream}");
            for t in *listed_tools {
                let name = t.name.to_string();
                if name.is_empty() {
                    // `up.` would pass the registry's name check and call no tool upstream.
                    tracing::warn!(
                        upstream = *upstream,
                        "skipping an upstream tool without a name"
                    );
                    continue;
                }
                if listed_tools.iter().filter(|o| o.name == t.name).count() > 1 {
                    // Which entry's schema would the upstream apply? Neither is taken.
                    tracing::warn!(upstream = *upstream, tool = %name, "skipping a tool listed twice");
                    continue;
                }
                let qualified = format!("{upstream}.{name}");
                let description: String = t
                    .description
                    .as_deref()
                    .unwrap_or("")
                    .chars()
                    .take(MAX_DESCRIPTION_CHARS)
                    .collect();
                let output_schema = t
                    .output_schema
                    .as_ref()
                    .map(|o| Value::Object((**o).clone()));
                let unwrap = output_schema
                    .as_ref()
                    .is_some_and(|o| crate::pytypes::wrapped_result(o).is_some());
                let entry = UpstreamTool {
                    qualified,
                    upstream: (*upstream).to_owned(),
                    tool: name,
                    description,
                    input_schema: Value::Object((*t.input_schema).clone()),
                    output_schema,
                };
                let tool = HostTool {
                    name: entry.qualified.clone(),
                    description: entry.description.clone(),
                    schema: entry.input_schema.clone(),
                    declaration: ToolDeclaration::new(
                        Some(&flow),
                        Some(&flow),
                        Some(Identity::App),
                    ),
                    body: body(i, &entry, unwrap),
                };
                match registry.register(tool) {
                    Ok(()) => tools.push(entry),
                    Err(e) => {
                        tracing::warn!(upstream = *upstream, error = %e, "skipping an upstream tool");
                    }
                }
            }
        }
        tools.sort_by(|a, b| a.qualified.cmp(&b.qualified));
        UpstreamTools {
            registry: registry.seal(),
            tools,
            _upstreams: Vec::new(),
        }
    }

    /// The registered tools, by qualified name.
    pub fn tools(&self) -> impl Iterator<Item = &UpstreamTool> {
        self.tools.iter()
    }

    /// No tools at all.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The sealed registry the calls go through.
    pub fn registry(&self) -> &SealedRegistry {
        &self.registry
    }

    /// The door for one run, with its own counters.
    pub fn for_run(&self) -> RunTools {
        RunTools(self.registry.run(None))
    }
}

/// One upstream tool as a host-tool body.
struct UpstreamBody {
    upstream: Arc<Upstream>,
    tool: String,
    qualified: String,
    /// The output schema is an SDK's `{"result": X}` wrapper: hand the program X.
    unwrap: bool,
}

#[async_trait]
impl ToolBody for UpstreamBody {
    async fn call(&self, call: ToolCall) -> Result<Value, ToolBodyError> {
        let args = arguments(&self.qualified, call.args)?;
        let result = self.upstream.call(&self.tool, args).await;
        reply(&self.qualified, result, self.unwrap)
    }
}

/// A program's arguments as an upstream call takes them: an object (none is an empty one).
pub(crate) fn arguments(qualified: &str, args: Value) -> Result<Map<String, Value>, ToolBodyError> {
    match args {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(Map::new()),
        _ => Err(ToolBodyError {
            public_reason: format!("{qualified} takes an object of arguments"),
            retryable: true,
        }),
    }
}

/// What the program receives for the upstream's answer to a call of `name` (see [`convert`]),
/// or for its failure.
pub(crate) fn reply(
    name: &str,
    result: Result<CallToolResult, CallError>,
    unwrap: bool,
) -> Result<Value, ToolBodyError> {
    let result = result.map_err(|e| match e {
        CallError::Timeout(d) => ToolBodyError {
            public_reason: format!(
                "upstream timeout: {name} did not answer within {:.1} s",
                d.as_secs_f64()
            ),
            retryable: true,
        },
        CallError::Failed(m) => ToolBodyError {
            public_reason: format!("upstream failed: {name}: {}", bounded(&m)),
            retryable: true,
        },
    })?;
    convert(name, result, unwrap)
}

/// One run's door, as a broker tool handler.
#[derive(Debug)]
pub struct RunTools(HostToolRun);

impl RunTools {
    /// Calls made so far in this run (refused ones included).
    pub fn calls(&self) -> u32 {
        self.0.calls()
    }
}

impl ToolHandler for RunTools {
    fn call<'a>(&'a self, name: &'a str, args: Value) -> BoxFuture<'a, Result<Value, ToolFailure>> {
        Box::pin(async move {
            // `call_tool(name)` with no arguments means an empty object.
            let args = if args.is_null() {
                Value::Object(Map::new())
            } else {
                args
            };
            self.0
                .call(name, args)
                .await
                .map_err(|d| airlock_local::tools::failure(&d))
        })
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
/// some (`X` for `{"result": X}` when `unwrap`: the tool's output schema declares that
/// wrapper), else its single content block (text parsed as JSON when it is JSON), else a
/// list. An upstream `isError` result is a failure whose reason carries the upstream's text.
fn convert(name: &str, result: CallToolResult, unwrap: bool) -> Result<Value, ToolBodyError> {
    if result.is_error == Some(true) {
        return Err(ToolBodyError {
            public_reason: format!("upstream error: {name}: {}", bounded(&text_of(&result))),
            retryable: false,
        });
    }
    if let Some(v) = result.structured_content {
        return Ok(match v {
            Value::Object(mut m) if unwrap && m.len() == 1 && m.contains_key("result") => {
                m.remove("result").unwrap_or(Value::Null)
            }
            other => other,
        });
    }
    match result.content.as_slice() {
        [] => Ok(Value::Null),
        [one] => Ok(block_value(one)),
        many => Ok(Value::Array(many.iter().map(block_value).collect())),
    }
}

#[cfg(test)]
mod tests {
    use airlock_policy::TransferLimits;
    use serde_json::json;

    use super::*;

    /// A tool body for tools that are listed, never called.
    struct Uncalled;

    #[async_trait]
    impl ToolBody for Uncalled {
        async fn call(&self, _: ToolCall) -> Result<Value, ToolBodyError> {
            unreachable!("these tests only list tools")
        }
    }

    /// The upstream `up`'s `listed` tools as `airlock mcp` registers them.
    fn offered(listed: &[Tool]) -> UpstreamTools {
        let body =
            |_: usize, _: &UpstreamTool, _: bool| -> Arc<dyn ToolBody> { Arc::new(Uncalled) };
        UpstreamTools::from_listed(&[("up", listed)], HostToolLimits::default(), body)
    }

    /// Found by the `mcp_upstream_reply` soak: an upstream listing one name twice (the first
    /// entry's schema unusable) had the second registered, so the schema the registry checks a
    /// call against was not the first the upstream listed. A repeated name is ambiguous:
    /// neither entry is registered.
    #[test]
    fn a_name_an_upstream_lists_twice_is_not_registered() {
        let mut bad = serde_json::Map::new();
        bad.insert("type".into(), json!(12));
        let listed = [
            Tool::new("twice", "first", bad),
            Tool::new("twice", "second", serde_json::Map::new()),
            Tool::new("again", "one", serde_json::Map::new()),
            Tool::new("again", "two", serde_json::Map::new()),
            Tool::new("once", "", serde_json::Map::new()),
        ];
        let offer = offered(&listed);
        let names: Vec<&str> = offer.tools().map(|t| t.qualified.as_str()).collect();
        assert_eq!(names, ["up.once"]);
    }

    /// Found by the `mcp_upstream_reply` soak: a tool an upstream lists with an empty name was
    /// registered as `up.`, a callable tool whose calls name no tool upstream.
    #[test]
    fn a_listed_tool_without_a_name_is_not_registered() {
        let listed = [
            Tool::new("", "nameless", serde_json::Map::new()),
            Tool::new("ok", "named", serde_json::Map::new()),
        ];
        let offer = offered(&listed);
        let names: Vec<&str> = offer.tools().map(|t| t.qualified.as_str()).collect();
        assert_eq!(names, ["up.ok"]);
    }

    #[test]
    fn results_convert_to_program_values() {
        let r = CallToolResult::success(vec![ContentBlock::text("{\"t\": 3}")]);
        assert_eq!(convert("a.b", r, false).unwrap(), json!({"t": 3}));
        let r = CallToolResult::success(vec![ContentBlock::text("sunny")]);
        assert_eq!(convert("a.b", r, false).unwrap(), json!("sunny"));
        let r = CallToolResult::success(vec![ContentBlock::text("1"), ContentBlock::text("x")]);
        assert_eq!(convert("a.b", r, false).unwrap(), json!([1, "x"]));
        let wrapped = || {
            let mut r = CallToolResult::success(vec![ContentBlock::text("5")]);
            r.structured_content = Some(json!({"result": 5}));
            r
        };
        assert_eq!(convert("a.b", wrapped(), true).unwrap(), json!(5));
        assert_eq!(
            convert("a.b", wrapped(), false).unwrap(),
            json!({"result": 5})
        );
        let err = convert(
            "a.b",
            CallToolResult::error(vec![ContentBlock::text("no city")]),
            false,
        )
        .unwrap_err();
        assert_eq!(err.public_reason, "upstream error: a.b: no city");
        assert!(!err.retryable);
    }

    #[tokio::test]
    async fn an_empty_registry_refuses_every_name_and_counts_the_refusal() {
        let limits = HostToolLimits {
            max_calls_per_run: 1,
            responses: TransferLimits::DEFAULT,
        };
        let reg = UpstreamTools::from_upstreams(Vec::new(), limits);
        let run = reg.for_run();
        let err = run.call("x.y\u{1b}", json!({})).await.unwrap_err();
        assert_eq!(err.code, airlock_protocol::ErrorCode::UnknownTool);
        assert!(!err.message.contains('\u{1b}'));
        assert_eq!(err.data.unwrap()["code"], "unknown_tool");
        let err = run.call("x.y", json!({})).await.unwrap_err();
        assert_eq!(err.code, airlock_protocol::ErrorCode::ToolCallLimit);
        assert_eq!(err.data.unwrap()["code"], "call_cap_exhausted");
        assert_eq!(run.calls(), 2);
    }
}
