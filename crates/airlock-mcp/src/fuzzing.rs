//! A tool call's arguments through the functions the server runs on them, up to the point
//! where a sandbox would be touched: the entry point of the `mcp_tool_args` fuzz target
//! (`fuzz/`); and an upstream's replies (its `tools/list` pages, its `tools/call` results)
//! through what `airlock mcp` makes of them, the entry point of `mcp_upstream_reply`. Hidden
//! from the docs; not an API.
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_broker::Workload;
use airlock_policy::{GuestRelPath, TransferLimits};
use airlock_router::host_tools::{HostToolLimits, ToolBody, ToolBodyError, ToolCall};
use async_trait::async_trait;
use rmcp::model::{CallToolResult, ErrorData, JsonObject, ListToolsResult, Tool};
use serde_json::Value;

use crate::registry::{self, UpstreamTools};
use crate::upstream::{self, CallError};
use crate::{file_tools, server};

/// What a tool call's arguments were accepted as: the facts the fuzz oracles check.
#[derive(Debug, Default)]
pub struct Accepted {
    /// Every guest path the arguments name.
    pub paths: Vec<GuestRelPath>,
    /// The run's timeout.
    pub timeout: Option<Duration>,
    /// The argv of an `exec`.
    pub argv: Vec<String>,
    /// The env of an `exec`.
    pub env: Vec<(String, String)>,
    /// The bytes a `write_file` writes, or the cap of a `read_file`.
    pub bytes: Option<u64>,
}

/// Parse the arguments of the tool `name` (`max` bounds `timeout_s`; `limits` are the
/// transfer caps of both directions).
pub fn tool_arguments(
    name: &str,
    a: &JsonObject,
    max: Duration,
    limits: &TransferLimits,
) -> Result<Accepted, String> {
    let mut out = Accepted::default();
    match name {
        "execute" | "run_python" | "exec" => {
            let c = server::code_call(name, a, max, None)?;
            out.paths = c.declared;
            out.timeout = Some(c.timeout);
            out.env = c.env;
            if let Workload::Command { argv } = c.workload {
                out.argv = argv;
            }
        }
        "write_file" => {
            let (p, data) = file_tools::parse_write(a, limits)?;
            out.paths.push(p);
            out.bytes = Some(u64::try_from(data.len()).unwrap_or(u64::MAX));
        }
        "read_file" => {
            let (p, cap) = file_tools::parse_read(a, limits)?;
            out.paths.push(p);
            out.bytes = Some(cap);
        }
        "list_files" => out.paths.extend(file_tools::parse_list(a)?),
        _ => return Err(format!("no tool named {name:?}")),
    }
    Ok(out)
}

/// An upstream's answer to one `tools/call`: its result, or the JSON-RPC error it sent.
pub type Reply = Result<CallToolResult, ErrorData>;

/// The tools an upstream named `name` lists when its `tools/list` answers are `pages` (in
/// order; asking past the last is the upstream failing), as `airlock mcp` takes them at
/// start-up: the tools kept (Err: start-up fails), and the number of pages asked.
pub async fn listed(name: &str, pages: Vec<ListToolsResult>) -> (Result<Vec<Tool>, String>, usize) {
    let mut pages = pages.into_iter();
    let mut asked = 0;
    let page = |_cursor| {
        asked += 1;
        std::future::ready(pages.next().ok_or_else(|| closed().to_string()))
    };
    let kept = upstream::list_tools(name, page).await;
    (kept, asked)
}

/// What the program receives for `reply` to a call of `qualified` (`unwrap`: the tool's output
/// schema is an SDK's `{"result": X}` wrapper), before the registry's response caps; Err is
/// the failure's public reason.
pub fn call_value(qualified: &str, reply: Reply, unwrap: bool) -> Result<Value, String> {
    registry::reply(qualified, failed(reply), unwrap).map_err(|e| e.public_reason)
}

fn failed(reply: Reply) -> Result<CallToolResult, CallError> {
    reply.map_err(|e| CallError::Failed(rmcp::ServiceError::McpError(e).to_string()))
}

/// The upstream `name`'s `tools` registered and sealed as `airlock mcp` does it, each call
/// that passes the registry's gates answered with the next of `replies` (none left: the
/// upstream is gone). The program's calls go through [`UpstreamTools::for_run`].
pub fn offered(
    name: &str,
    tools: &[Tool],
    replies: Vec<Reply>,
    limits: HostToolLimits,
) -> UpstreamTools {
    let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
    let body = |_: usize, t: &registry::UpstreamTool, unwrap: bool| -> Arc<dyn ToolBody> {
        Arc::new(Replayed {
            qualified: t.qualified.clone(),
            unwrap,
            replies: Arc::clone(&replies),
        })
    };
    UpstreamTools::from_listed(&[(name, tools)], limits, body)
}

/// An upstream tool answering from recorded replies.
struct Replayed {
    qualified: String,
    unwrap: bool,
    replies: Arc<Mutex<VecDeque<Reply>>>,
}

#[async_trait]
impl ToolBody for Replayed {
    async fn call(&self, call: ToolCall) -> Result<Value, ToolBodyError> {
        registry::arguments(&self.qualified, call.args)?;
        let next = self.replies.lock().ok().and_then(|mut r| r.pop_front());
        let result = match next {
            Some(reply) => failed(reply),
            None => Err(CallError::Failed(closed().to_string())),
        };
        registry::reply(&self.qualified, result, self.unwrap)
    }
}

/// How rmcp reports an upstream that is gone.
fn closed() -> rmcp::ServiceError {
    rmcp::ServiceError::TransportClosed
}
