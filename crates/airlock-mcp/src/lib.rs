//! airlock as a Model Context Protocol server ("code mode").
//!
//! `airlock mcp` serves MCP over stdio (newline-delimited JSON-RPC, via the official `rmcp`
//! SDK) and offers sandboxed code execution as tools: `execute` (a Python program that may call
//! upstream MCP tools), `run_python` (a Python program with no tools), `exec` (a command), and
//! `write_file`, `read_file`, `list_files` on the session's one sandbox (the `local` backend
//! behind the router, under the policy: [`sandboxes`]), whose files persist across calls;
//! with `--processes`, `start_process`, `process_output` and `stop_process` on that sandbox's
//! background processes ([`process_tools`]).
//! Upstream MCP servers are started by airlock itself, outside the sandbox; their tools reach
//! the sandboxed program only through [`UpstreamTools`]: each tool is registered in the
//! host-tool registry (`airlock_router::host_tools`, sealed at start-up), whose one door refuses
//! unknown names, validates arguments against the tool's input schema on the host, caps calls
//! and response sizes; every upstream call has a timeout. Credentials the upstreams hold never
//! enter the sandbox.

pub mod args;
pub mod config;
pub mod config_file;
pub mod error;
pub mod file_tools;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod media;
pub mod outputs;
pub mod process_tools;
pub mod progress;
pub mod pytypes;
pub mod registry;
pub mod result;
pub mod rich;
pub mod sandboxes;
pub mod server;
pub mod stubs;
pub mod tools;
pub mod upstream;
pub mod words;

pub use config::{McpConfig, UpstreamSpec};
pub use error::McpError;
pub use registry::{RunTools, UpstreamTool, UpstreamTools};
pub use server::{serve_stdio, AirlockMcp};
pub use upstream::Upstream;
