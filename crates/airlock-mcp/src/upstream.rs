//! One upstream MCP server: started by airlock (outside the sandbox, with airlock's own
//! environment and so its credentials), spoken to as an MCP client over its stdin/stdout.
//!
//! Every read is bounded (one line, one JSON-RPC message, at most [`MAX_UPSTREAM_LINE`] bytes;
//! a longer line is dropped by the transport), every step has a timeout, the number of tools
//! taken from one upstream is capped, and the process is killed when the [`Upstream`] drops.
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, Tool,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::ServiceExt;

use crate::config::UpstreamSpec;
use crate::error::McpError;

/// Largest line (one message) read from an upstream. Tool results relayed into a sandbox are
/// capped far lower (the run's `max_tool_response_bytes`); tools/list pages of a large server
/// fit comfortably in 4 MiB.
pub const MAX_UPSTREAM_LINE: usize = 4 * 1024 * 1024;

/// Most tools taken from one upstream; the rest are ignored with a warning. Every tool costs
/// a line in the `execute` description and a stub, so this bounds both.
pub const MAX_TOOLS_PER_UPSTREAM: usize = 128;

/// The tools an upstream lists, `page` asking for one page of its `tools/list` (given the
/// cursor of the previous one): the pages in order, until one names no next page, at most
/// [`MAX_TOOLS_PER_UPSTREAM`] tools kept and [`MAX_TOOL_PAGES`] pages asked (the rest ignored
/// with a warning), so an endless listing holds at most one page besides the tools kept.
pub(crate) async fn list_tools<F, Fut, E>(name: &str, mut page: F) -> Result<Vec<Tool>, E>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<ListToolsResult, E>>,
{
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_TOOL_PAGES {
        let p = page(cursor).await?;
        tools.extend(p.tools);
        cursor = p.next_cursor;
        if tools.len() > MAX_TOOLS_PER_UPSTREAM {
            tools.truncate(MAX_TOOLS_PER_UPSTREAM);
            cursor.get_or_insert_default();
        }
        if cursor.is_none() || tools.len() == MAX_TOOLS_PER_UPSTREAM {
            break;
        }
    }
    if cursor.is_some() {
        tracing::warn!(
            upstream = %name,
            kept = tools.len(),
            "upstream lists more than {MAX_TOOLS_PER_UPSTREAM} tools or {MAX_TOOL_PAGES} pages; \
             ignoring the rest"
        );
    }
    Ok(tools)
}

/// Most `tools/list` pages asked of one upstream.
pub const MAX_TOOL_PAGES: usize = 32;

/// Why an upstream call produced no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// It did not answer within the budget.
    Timeout(Duration),
    /// The connection or the protocol failed (the upstream died, sent garbage, or refused the
    /// request at the JSON-RPC level).
    Failed(String),
}

/// A live upstream server and the tools it listed at start-up.
pub struct Upstream {
    name: String,
    service: RunningService<RoleClient, ClientConfig>,
    tools: Vec<Tool>,
    call_timeout: Duration,
    // Dropping the child kills the upstream (kill_on_drop).
    _child: tokio::process::Child,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.name)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// Start `spec`, initialize an MCP session and list its tools, all within `start_timeout`.
    pub async fn start(
        spec: &UpstreamSpec,
        start_timeout: Duration,
        call_timeout: Duration,
    ) -> Result<Upstream, McpError> {
        let name = spec.name.clone();
        let (program, args) = spec
            .argv
            .split_first()
            .ok_or_else(|| McpError::BadUpstreamSpec {
                spec: name.clone(),
                reason: "the command is empty".into(),
            })?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| McpError::Spawn {
                name: name.clone(),
                program: program.clone(),
                source,
            })?;
        let fail = |step, reason: String| McpError::Upstream {
            name: name.clone(),
            step,
            reason,
        };
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| fail("spawn", "no stdin".into()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| fail("spawn", "no stdout".into()))?;
        let transport = AsyncRwTransport::<RoleClient, _, _>::new(stdout, stdin)
            .with_max_line_length(MAX_UPSTREAM_LINE);
        let mut info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("airlock", env!("CARGO_PKG_VERSION")),
        );
        // The initialize-handshake revision most stdio servers speak today.
        info.protocol_version = ProtocolVersion::V_2025_06_18;
        let service = tokio::time::timeout(start_timeout, info.serve(transport))
            .await
            .map_err(|_| fail("initialize", format!("no answer within {start_timeout:?}")))?
            .map_err(|e| fail("initialize", e.to_string()))?;
        let peer = service.peer();
        let page =
            |cursor| peer.list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)));
        let tools = tokio::time::timeout(start_timeout, list_tools(&name, page))
            .await
            .map_err(|_| fail("tools/list", format!("no answer within {start_timeout:?}")))?
            .map_err(|e| fail("tools/list", e.to_string()))?;
        Ok(Upstream {
            name,
            service,
            tools,
            call_timeout,
            _child: child,
        })
    }

    /// The name given on the command line.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tools it listed at start-up.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Call one of its tools, within the call budget.
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<CallToolResult, CallError> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(arguments);
        match tokio::time::timeout(self.call_timeout, self.service.peer().call_tool(params)).await {
            Err(_) => Err(CallError::Timeout(self.call_timeout)),
            Ok(Err(e)) => Err(CallError::Failed(e.to_string())),
            Ok(Ok(result)) => Ok(result),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn page(first: usize, n: usize, more: bool) -> ListToolsResult {
        let tools = (first..first + n)
            .map(|i| Tool::new(format!("t{i}"), "", serde_json::Map::new()))
            .collect();
        let mut p = ListToolsResult::with_all_items(tools);
        p.next_cursor = more.then(|| format!("c{}", first + n));
        p
    }

    /// Found reading rmcp's `list_all_tools` for the `mcp_upstream_reply` fuzz target (its
    /// bound): an upstream whose `tools/list` always names a next page kept airlock asking, and
    /// holding every tool of every page, until the start timeout.
    #[tokio::test]
    async fn a_listing_that_never_ends_is_cut() {
        for per_page in [0, 1, 100] {
            let asked = Cell::new(0usize);
            let endless = |_cursor| {
                asked.set(asked.get() + 1);
                assert!(asked.get() <= 1000, "the listing never ends");
                std::future::ready(Ok::<_, ()>(page(asked.get() * per_page, per_page, true)))
            };
            let tools = list_tools("up", endless).await.unwrap();
            assert!(tools.len() <= MAX_TOOLS_PER_UPSTREAM);
            assert!(asked.get() <= MAX_TOOL_PAGES, "{} pages", asked.get());
        }
    }

    #[tokio::test]
    async fn pages_are_read_in_order_up_to_the_cap() {
        let asked = Cell::new(0usize);
        let three = |cursor: Option<String>| {
            let n = asked.get();
            assert_eq!(cursor, (n > 0).then(|| format!("c{}", n * 50)));
            asked.set(n + 1);
            std::future::ready(Ok::<_, ()>(page(n * 50, 50, n < 2)))
        };
        let tools = list_tools("up", three).await.unwrap();
        let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        let want: Vec<String> = (0..MAX_TOOLS_PER_UPSTREAM)
            .map(|i| format!("t{i}"))
            .collect();
        assert_eq!(names, want);
        assert_eq!(asked.get(), 3);
    }
}
