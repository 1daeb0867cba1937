//! A tool call's arguments through the functions the server runs on them, up to the point
//! where a sandbox would be touched: the entry point of the `mcp_tool_args` fuzz target
//! (`fuzz/`). Hidden from the docs; not an API.
use std::time::Duration;

use airlock_broker::Workload;
use airlock_policy::{GuestRelPath, TransferLimits};
use rmcp::model::JsonObject;

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
