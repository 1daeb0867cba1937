//! The MCP server: the code tools `execute`, `run_python` and `exec`, and (in conversation
//! scope) the file tools `write_file`, `read_file` and `list_files`, all served in the
//! session's sandbox (see [`crate::sandboxes`]).
//!
//! - `execute {code, outputs?, timeout_s?}`: a Python program that may call the upstream tools
//!   (through `call_tool("NAME.tool", args)` or the generated `airlock_tools` module, written
//!   into /work before each `execute` run); the tool's description lists them with typed
//!   signatures.
//! - `run_python {code, outputs?, timeout_s?}`: a Python program with no tools at all.
//! - `exec {argv, env?, outputs?, timeout_s?}`: a command.
//! - with `--processes`: `start_process`, `process_output`, `stop_process` (see
//!   [`crate::process_tools`]), on the session sandbox's background processes.
//!
//! Every call is admitted by the policy first. A run is spawned as its own task, so a client
//! that goes away or cancels (`notifications/cancelled`) ends the run through its cancel path
//! (status `cancelled`) rather than by dropping it half-way; the session's sandboxes are
//! disposed when the session ends.
use std::sync::Arc;
use std::time::Duration;

use airlock_broker::run::Cancel;
use airlock_broker::{NoTools, ToolHandler, Workload, GUEST_WORK_DIR};
use airlock_local::RunRequest;
use airlock_policy::GuestRelPath;
use airlock_router::host_tools::HostToolLimits;
use airlock_router::Sandbox;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ErrorData, ServerHandler, ServiceExt};

use crate::config::McpConfig;
use crate::error::McpError;
use crate::registry::UpstreamTools;
use crate::sandboxes::Sandboxes;
use crate::{args, file_tools, outputs, process_tools, progress, result, stubs, tools};

/// Largest line (one message) read from the MCP client. A program must fit the 1 MiB frame
/// cap of the internal hop anyway; the headroom lets a too-large program get a clean
/// "program too large" result instead of being dropped by the transport, and carries a
/// base64 `write_file` of a few MiB.
pub const MAX_CLIENT_LINE: usize = 16 * 1024 * 1024;

struct Inner {
    config: McpConfig,
    upstreams: Arc<UpstreamTools>,
    sandboxes: Sandboxes,
    tools: Vec<Tool>,
    stubs: String,
}

/// The server handler. Cheap to clone.
#[derive(Clone)]
pub struct AirlockMcp {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for AirlockMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AirlockMcp")
            .field("tools", &self.inner.tools.len())
            .finish_non_exhaustive()
    }
}

/// One code-tool call, checked.
pub(crate) struct CodeCall {
    pub(crate) workload: Workload,
    pub(crate) declared: Vec<GuestRelPath>,
    pub(crate) timeout: Duration,
    pub(crate) env: Vec<(String, String)>,
    upstream_tools: bool,
}

impl AirlockMcp {
    /// A server over already-started upstreams, with the session's sandboxes.
    pub fn new(config: McpConfig, upstreams: UpstreamTools) -> Result<AirlockMcp, McpError> {
        let sandboxes = Sandboxes::new(&config)?;
        let tools = tools::list(&upstreams, &sandboxes, config.limits.timeout.as_secs_f64());
        let stubs = stubs::module(&upstreams);
        Ok(AirlockMcp {
            inner: Arc::new(Inner {
                config,
                upstreams: Arc::new(upstreams),
                sandboxes,
                tools,
                stubs,
            }),
        })
    }

    /// The tools this server lists.
    pub fn tools(&self) -> &[Tool] {
        &self.inner.tools
    }

    /// Disposes the session's sandboxes (the session ended).
    pub async fn close(&self) {
        self.inner.sandboxes.dispose_all().await;
    }

    fn code_call(&self, name: &str, a: &JsonObject) -> Result<CodeCall, String> {
        let c = &self.inner.config;
        code_call(name, a, c.limits.timeout, c.python.clone())
    }

    async fn run(&self, call: CodeCall, ctx: RequestContext<RoleServer>) -> CallToolResult {
        let inner = Arc::clone(&self.inner);
        let cancel: Cancel = Box::pin(ctx.ct.clone().cancelled_owned());
        let token = ctx.meta.get_progress_token();
        let peer = ctx.peer.clone();
        let task = tokio::spawn(async move {
            let lease = match inner.sandboxes.lease().await {
                Ok(l) => l,
                Err(why) => return result::refusal(why),
            };
            let out = run_in(
                &inner,
                &lease.sandbox,
                call,
                cancel,
                token.map(|t| (peer, t)),
            )
            .await;
            lease.release().await;
            out
        });
        match task.await {
            Ok(r) => r,
            Err(e) => result::refusal(format!("the run task failed: {e}")),
        }
    }

    async fn file_call(&self, name: &str, a: &JsonObject) -> CallToolResult {
        let lease = match self.inner.sandboxes.lease().await {
            Ok(l) => l,
            Err(why) => return result::refusal(why),
        };
        let c = &self.inner.config;
        let sb = &lease.sandbox;
        let out = match name {
            "write_file" => file_tools::write(sb, a, &c.files_in).await,
            "read_file" => file_tools::read(sb, a, &c.outputs).await,
            "start_process" => process_tools::start(sb, a).await,
            "process_output" => process_tools::output(sb, a).await,
            "stop_process" => process_tools::stop(sb, a).await,
            _ => file_tools::list(sb, a).await,
        };
        lease.release().await;
        out
    }
}

/// A code tool's arguments (`exec` or a Python tool), checked: `max` bounds `timeout_s`.
pub(crate) fn code_call(
    name: &str,
    a: &JsonObject,
    max: Duration,
    interpreter: Option<std::path::PathBuf>,
) -> Result<CodeCall, String> {
    let (workload, env) = if name == "exec" {
        args::only_keys(a, &["argv", "env", "outputs", "timeout_s"])?;
        let argv = args::argv(a)?;
        let env = args::env(a)?;
        args::fits(&argv, &env)?;
        (Workload::Command { argv }, env)
    } else {
        args::only_keys(a, &["code", "outputs", "timeout_s"])?;
        let code = args::string(a, "code")?;
        (Workload::Python { code, interpreter }, Vec::new())
    };
    Ok(CodeCall {
        workload,
        declared: args::declared_outputs(a)?,
        timeout: args::timeout(a, max)?,
        env,
        upstream_tools: name == "execute",
    })
}

/// One run in `sandbox`, then its declared outputs.
async fn run_in(
    inner: &Inner,
    sandbox: &airlock_local::LocalSandbox,
    call: CodeCall,
    cancel: Cancel,
    progress_to: Option<(rmcp::service::Peer<RoleServer>, rmcp::model::ProgressToken)>,
) -> CallToolResult {
    let handler: Box<dyn ToolHandler> = if call.upstream_tools {
        let module = GuestRelPath::parse(stubs::MODULE_FILE).map_err(|e| e.to_string());
        let put = match module {
            Ok(p) => sandbox
                .write_file(GUEST_WORK_DIR, &p, inner.stubs.as_bytes())
                .await
                .map_err(|e| outputs::why(&e)),
            Err(e) => Err(e),
        };
        if let Err(e) = put {
            return result::refusal(format!("cannot write the tool stubs: {e}"));
        }
        Box::new(inner.upstreams.for_run())
    } else {
        Box::new(NoTools)
    };
    let (tap, forwarder) = match progress_to {
        Some((peer, token)) => {
            let (tap, task) = progress::start(peer, token);
            (Some(tap), Some(task))
        }
        None => (None, None),
    };
    let mut req = RunRequest::new(call.workload, call.timeout, call.env);
    req.tools = Some(handler.as_ref());
    req.cancel = Some(cancel);
    req.output = tap;
    let run = sandbox.run_request(req).await;
    if let Some(f) = forwarder {
        let _ = f.await;
    }
    let run = match run {
        Ok(r) => r,
        Err(e) => return result::refusal(format!("the run did not start: {e}")),
    };
    let outs = outputs::collect(sandbox, &call.declared, &inner.config.outputs).await;
    result::to_call_result(&run, &outs, inner.sandboxes.scope().as_str())
}

impl ServerHandler for AirlockMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("airlock", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "airlock runs code in rootless, network-isolated sandboxes. Use `execute` to \
                 write one Python program that calls the upstream tools it lists and prints \
                 the combined answer. Name files to bring back in `outputs` (images come back \
                 as images).",
            )
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        // The revisions with the initialize handshake this server implements.
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.inner.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let a = request.arguments.unwrap_or_default();
        let name = request.name.as_ref();
        if !self.inner.tools.iter().any(|t| t.name == name) {
            let shown: String = name.chars().filter(|c| !c.is_control()).take(64).collect();
            let why = if tools::FILE_TOOLS.contains(&name) {
                " (file tools are not served with --scope call: nothing would persist)"
            } else if process_tools::PROCESS_TOOLS.contains(&name) {
                " (process tools are served only with `airlock mcp --processes`)"
            } else {
                ""
            };
            return Err(ErrorData::invalid_params(
                format!("no tool named {shown:?}{why}"),
                None,
            ));
        }
        let upstreams = !self.inner.upstreams.is_empty();
        let outcome = if tools::CODE_TOOLS.contains(&name) {
            match self.code_call(name, &a) {
                Err(m) => result::refusal(m),
                Ok(call) => {
                    let needs = tools::needs(name, !call.declared.is_empty(), upstreams);
                    match self.inner.sandboxes.admit(&needs) {
                        Err(why) => result::refusal(why),
                        Ok(()) => self.run(call, context).await,
                    }
                }
            }
        } else {
            match self
                .inner
                .sandboxes
                .admit(&tools::needs(name, false, upstreams))
            {
                Err(why) => result::refusal(why),
                Ok(()) => self.file_call(name, &a).await,
            }
        };
        Ok(CallToolResponse::Complete(outcome))
    }
}

/// The registry's per-run bounds from the run limits: the call cap, and the per-response
/// cap of the broker's relay; the run total keeps the registry's default.
pub fn host_tool_limits(limits: &airlock_broker::Limits) -> HostToolLimits {
    let defaults = HostToolLimits::default();
    HostToolLimits {
        max_calls_per_run: limits.max_tool_calls,
        responses: airlock_policy::TransferLimits {
            max_bytes_per_file: u64::try_from(limits.max_tool_response_bytes).unwrap_or(u64::MAX),
            max_files: u64::from(limits.max_tool_calls),
            ..defaults.responses
        },
    }
}

/// Start the upstreams, then serve MCP on stdin/stdout until the client goes away; the
/// session's sandboxes are disposed then.
pub async fn serve_stdio(config: McpConfig) -> Result<(), McpError> {
    let upstreams = UpstreamTools::start(
        &config.upstreams,
        config.upstream_start_timeout,
        config.upstream_call_timeout,
        host_tool_limits(&config.limits),
    )
    .await?;
    let server = AirlockMcp::new(config, upstreams)?;
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let transport = AsyncRwTransport::<RoleServer, _, _>::new(stdin, stdout)
        .with_max_line_length(MAX_CLIENT_LINE);
    let running = server
        .clone()
        .serve(transport)
        .await
        .map_err(|e| McpError::Session(e.to_string()))?;
    let ended = running
        .waiting()
        .await
        .map_err(|e| McpError::Session(e.to_string()));
    server.close().await;
    ended.map(|_| ())
}
