//! The MCP server: tools `execute`, `run_python` and `exec`, each call one fresh sandboxed
//! run with the configured limits.
//!
//! - `execute {code, outputs?}`: a Python program that may call the upstream tools (through
//!   `call_tool("NAME.tool", args)` or the generated `airlock_tools` module in its work dir);
//!   the tool's description lists those tools.
//! - `run_python {code, outputs?}`: a Python program with no tools at all.
//! - `exec {argv, outputs?}`: a command.
//!
//! A run is spawned as its own task, so a client that goes away or cancels (`notifications/
//! cancelled`) ends the run through its cancel path (status `cancelled`) rather than by
//! dropping it half-way.
use std::sync::Arc;

use airlock_broker::{NoTools, RunSpec, ToolHandler, Workload};
use airlock_policy::GuestRelPath;
use airlock_router::host_tools::HostToolLimits;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use crate::config::McpConfig;
use crate::error::McpError;
use crate::registry::UpstreamTools;
use airlock_broker::SandboxFs;
use airlock_jail::dirfd::DirFd;

use crate::{outputs, result, stubs};

/// Largest line (one message) read from the MCP client. A program must fit the 1 MiB frame
/// cap of the internal hop anyway; the headroom lets a too-large program get a clean
/// "program too large" result instead of being dropped by the transport.
pub const MAX_CLIENT_LINE: usize = 4 * 1024 * 1024;

/// Most declared outputs one call may name.
const MAX_DECLARED_OUTPUTS: usize = 64;

struct Inner {
    config: McpConfig,
    upstreams: Arc<UpstreamTools>,
    runs: Semaphore,
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

fn schema(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(JsonObject::new()),
    }
}

fn outputs_schema() -> Value {
    json!({
        "type": "array", "items": {"type": "string"}, "maxItems": MAX_DECLARED_OUTPUTS,
        "description": "Files (relative to the run's work dir, its current directory) to return after the run."
    })
}

fn tool_list(upstreams: &UpstreamTools) -> Vec<Tool> {
    let code = json!({
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "The Python 3 program."},
            "outputs": outputs_schema(),
        },
        "required": ["code"],
        "additionalProperties": false,
    });
    let exec = json!({
        "type": "object",
        "properties": {
            "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                     "description": "The command and its arguments (argv[0] is looked up on PATH)."},
            "outputs": outputs_schema(),
        },
        "required": ["argv"],
        "additionalProperties": false,
    });
    vec![
        Tool::new(
            "execute",
            stubs::execute_description(upstreams),
            schema(code.clone()),
        ),
        Tool::new(
            "run_python",
            "Run a Python 3 program in a fresh, network-isolated airlock sandbox with no tools, \
             and return its stdout, stderr and status.",
            schema(code),
        ),
        Tool::new(
            "exec",
            "Run a command in a fresh, network-isolated airlock sandbox and return its stdout, \
             stderr and status.",
            schema(exec),
        ),
    ]
}

impl AirlockMcp {
    /// A server over already-started upstreams.
    pub fn new(config: McpConfig, upstreams: UpstreamTools) -> AirlockMcp {
        let tools = tool_list(&upstreams);
        let stubs = stubs::module(&upstreams);
        let permits = config.max_concurrent_runs.max(1);
        AirlockMcp {
            inner: Arc::new(Inner {
                config,
                upstreams: Arc::new(upstreams),
                runs: Semaphore::new(permits),
                tools,
                stubs,
            }),
        }
    }

    /// The tools this server lists.
    pub fn tools(&self) -> &[Tool] {
        &self.inner.tools
    }

    async fn run(
        &self,
        workload: Workload,
        declared: Vec<GuestRelPath>,
        upstream_tools: bool,
        ct: rmcp::service::RequestContext<RoleServer>,
    ) -> CallToolResult {
        let inner = Arc::clone(&self.inner);
        let cancel = ct.ct.clone().cancelled_owned();
        let task = tokio::spawn(async move {
            let Ok(_permit) = inner.runs.acquire().await else {
                return result::refusal("the server is shutting down");
            };
            let limits = inner.config.limits.clone();
            let handler: Box<dyn ToolHandler> = if upstream_tools {
                Box::new(inner.upstreams.for_run())
            } else {
                Box::new(NoTools)
            };
            let mut spec = RunSpec {
                workload,
                limits,
                sandbox: None,
                cwd: None,
                env: Vec::new(),
                executor: inner.config.executor.clone(),
                output: None,
            };
            let fs = match fresh_sandbox(&spec).await {
                Ok(fs) => Arc::new(fs),
                Err(why) => return result::refusal(why),
            };
            spec.sandbox = Some(Arc::clone(&fs));
            if upstream_tools {
                let stubs = inner.stubs.clone();
                let put = fs.as_owner(|work| write_new(work, stubs::MODULE_FILE, stubs.as_bytes()));
                if let Err(e) = put {
                    return result::refusal(format!("cannot write the tool stubs: {e}"));
                }
            }
            let run =
                airlock_broker::run::run_cancellable(spec, handler.as_ref(), Box::pin(cancel))
                    .await;
            let outs = fs.as_owner(|work| outputs::collect(work, &declared, &inner.config.outputs));
            result::to_call_result(&run, &outs)
        });
        match task.await {
            Ok(r) => r,
            Err(e) => result::refusal(format!("the run task failed: {e}")),
        }
    }
}

fn declared_outputs(args: &JsonObject) -> Result<Vec<GuestRelPath>, String> {
    match args.get("outputs") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => {
            if items.len() > MAX_DECLARED_OUTPUTS {
                return Err(format!(
                    "at most {MAX_DECLARED_OUTPUTS} outputs may be declared"
                ));
            }
            items
                .iter()
                .map(|v| match v {
                    Value::String(s) => outputs::check(s),
                    _ => Err("outputs must be strings".to_owned()),
                })
                .collect()
        }
        Some(_) => Err("outputs must be an array of strings".to_owned()),
    }
}

fn only_keys(args: &JsonObject, allowed: &[&str]) -> Result<(), String> {
    match args.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "unknown argument {:?} (expected: {})",
            k.chars().take(64).collect::<String>(),
            allowed.join(", ")
        )),
        None => Ok(()),
    }
}

impl ServerHandler for AirlockMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("airlock", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "airlock runs code in fresh, rootless, network-isolated sandboxes. Use `execute` \
                 to write one Python program that calls the upstream tools it lists and prints \
                 the combined answer.",
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
        let args = request.arguments.unwrap_or_default();
        let name = request.name.as_ref();
        let outcome = match name {
            "execute" | "run_python" => {
                let checked = only_keys(&args, &["code", "outputs"]).and_then(|()| {
                    let code = match args.get("code") {
                        Some(Value::String(c)) => c.clone(),
                        _ => return Err("`code` must be a string".to_owned()),
                    };
                    Ok((code, declared_outputs(&args)?))
                });
                match checked {
                    Ok((code, declared)) => {
                        let workload = Workload::Python {
                            code,
                            interpreter: self.inner.config.python.clone(),
                        };
                        self.run(workload, declared, name == "execute", context)
                            .await
                    }
                    Err(m) => result::refusal(m),
                }
            }
            "exec" => {
                let checked = only_keys(&args, &["argv", "outputs"]).and_then(|()| {
                    let argv = match args.get("argv") {
                        Some(Value::Array(a)) if !a.is_empty() => a
                            .iter()
                            .map(|v| v.as_str().map(str::to_owned))
                            .collect::<Option<Vec<_>>>()
                            .ok_or_else(|| "`argv` must be strings".to_owned())?,
                        _ => return Err("`argv` must be a non-empty array of strings".to_owned()),
                    };
                    Ok((argv, declared_outputs(&args)?))
                });
                match checked {
                    Ok((argv, declared)) => {
                        self.run(Workload::Command { argv }, declared, false, context)
                            .await
                    }
                    Err(m) => result::refusal(m),
                }
            }
            other => {
                let shown: String = other.chars().filter(|c| !c.is_control()).take(64).collect();
                return Err(ErrorData::invalid_params(
                    format!("no tool named {shown:?}"),
                    None,
                ));
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

/// Start the upstreams, then serve MCP on stdin/stdout until the client goes away.
pub async fn serve_stdio(config: McpConfig) -> Result<(), McpError> {
    let upstreams = UpstreamTools::start(
        &config.upstreams,
        config.upstream_start_timeout,
        config.upstream_call_timeout,
        host_tool_limits(&config.limits),
    )
    .await?;
    let server = AirlockMcp::new(config, upstreams);
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let transport = AsyncRwTransport::<RoleServer, _, _>::new(stdin, stdout)
        .with_max_line_length(MAX_CLIENT_LINE);
    let running = server
        .serve(transport)
        .await
        .map_err(|e| McpError::Session(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| McpError::Session(e.to_string()))?;
    Ok(())
}

/// A fresh sandbox filesystem for one call (freed when the call's handles drop).
async fn fresh_sandbox(spec: &RunSpec) -> Result<SandboxFs, String> {
    let root = airlock_broker::run::root_for(spec)
        .await
        .map_err(|n| n.message)?;
    SandboxFs::create(&spec.executor, root)
        .await
        .map_err(|e| e.to_string())
}

/// Creates `name` in the work dir (it must not exist) with `data`.
fn write_new(work: &DirFd, name: &str, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    work.create_at(name, 0o644)?.write_all(data)
}
