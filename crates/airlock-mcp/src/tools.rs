//! The tools this server lists, their input schemas and descriptions, and what each needs of
//! the sandbox (the capabilities the policy is asked about).
use std::sync::Arc;

use airlock_policy::{Capability, IsolationScope};
use rmcp::model::{JsonObject, Tool};
use serde_json::{json, Value};

use crate::args::{MAX_DECLARED_OUTPUTS, MAX_ENV_VARS};
use crate::registry::UpstreamTools;
use crate::sandboxes::Sandboxes;
use crate::{process_tools, stubs};

/// The code tools.
pub const CODE_TOOLS: [&str; 3] = ["execute", "run_python", "exec"];
/// The file tools (listed in conversation scope only: in call scope nothing would persist).
pub const FILE_TOOLS: [&str; 3] = ["write_file", "read_file", "list_files"];

/// What a call of `tool` needs; `outputs` when it declared outputs, `upstreams` when the
/// server has upstream tools.
pub fn needs(tool: &str, outputs: bool, upstreams: bool) -> Vec<Capability> {
    let mut n = match tool {
        "execute" if upstreams => vec![Capability::RunCode, Capability::HostTools],
        "execute" | "run_python" => vec![Capability::RunCode],
        "exec" => vec![Capability::Exec],
        "write_file" => vec![Capability::FilesIn],
        "read_file" => vec![Capability::FilesOut],
        "list_files" => vec![Capability::FilesList],
        "start_process" | "process_output" | "stop_process" => vec![Capability::Processes],
        _ => Vec::new(),
    };
    if outputs {
        n.push(Capability::FilesOut);
    }
    n
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
        "description": "Files (relative to /work, the program's current directory) to attach to \
                        the result after the run: images as image content, text as text, other \
                        files as base64 blobs."
    })
}

fn timeout_schema(max_s: f64) -> Value {
    json!({"type": "number", "exclusiveMinimum": 0, "maximum": max_s,
           "description": format!("Wall-clock limit of this call in seconds (default and maximum {max_s}).")})
}

fn where_(scope: IsolationScope) -> &'static str {
    match scope {
        IsolationScope::Conversation => {
            "in this session's network-isolated airlock sandbox, like a notebook: Python \
             variables, imports and functions persist from one call to the next, as do files in \
             /work; the value of a last expression is returned, and matplotlib figures come back \
             as images (the program starts in /work)"
        }
        IsolationScope::Call => {
            "in a fresh, network-isolated airlock sandbox (nothing persists between calls; the \
             program starts in /work)"
        }
    }
}

/// Every tool, with a policy refusal (if any) at the head of its description.
pub fn list(upstreams: &UpstreamTools, sandboxes: &Sandboxes, max_s: f64) -> Vec<Tool> {
    let scope = sandboxes.scope();
    let code = json!({
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "The Python 3 program."},
            "outputs": outputs_schema(),
            "timeout_s": timeout_schema(max_s),
        },
        "required": ["code"],
        "additionalProperties": false,
    });
    let exec = json!({
        "type": "object",
        "properties": {
            "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                     "description": "The command and its arguments (a bare argv[0] is looked up in /usr/local/bin, /usr/bin, /bin, ...)."},
            "env": {"type": "object", "additionalProperties": {"type": "string"},
                    "maxProperties": MAX_ENV_VARS,
                    "description": "The command's whole environment (empty by default), e.g. {\"PATH\": \"/usr/bin:/bin\", \"OPENSSL_CONF\": \"/dev/null\"}."},
            "outputs": outputs_schema(),
            "timeout_s": timeout_schema(max_s),
        },
        "required": ["argv"],
        "additionalProperties": false,
    });
    let w = where_(scope);
    let mut tools = vec![
        (
            "execute",
            stubs::execute_description(upstreams, w),
            code.clone(),
        ),
        (
            "run_python",
            format!(
                "Run a Python 3 program {w} with no tools, and return its status, stdout and \
                 stderr."
            ),
            code,
        ),
        (
            "exec",
            format!("Run a command {w} and return its status, stdout and stderr."),
            exec,
        ),
    ];
    if scope == IsolationScope::Conversation {
        tools.extend(file_tools());
        if sandboxes.processes() {
            tools.extend(process_tools::tools());
        }
    }
    tools
        .into_iter()
        .map(|(name, desc, s)| {
            let desc = match sandboxes.admit(&needs(name, false, !upstreams.is_empty())) {
                Ok(()) => desc,
                Err(why) => format!("[Unavailable on this server: {why}] {desc}"),
            };
            Tool::new(name, desc, schema(s))
        })
        .collect()
}

fn file_tools() -> Vec<(&'static str, String, Value)> {
    let path = json!({"type": "string", "description": "A path relative to /work (no `..`, no symlinks)."});
    vec![
        (
            "write_file",
            "Create or replace a file in /work of this session's sandbox (parent directories \
             are made). `content` is text, or base64 with `encoding: \"base64\"` for binary."
                .to_owned(),
            json!({
                "type": "object",
                "properties": {
                    "path": path,
                    "content": {"type": "string"},
                    "encoding": {"type": "string", "enum": ["text", "base64"], "default": "text"},
                },
                "required": ["path", "content"],
                "additionalProperties": false,
            }),
        ),
        (
            "read_file",
            "Read a file from /work of this session's sandbox: text comes back as text, a PNG, \
             JPEG, GIF or WebP image as image content, anything else as a base64 blob resource."
                .to_owned(),
            json!({
                "type": "object",
                "properties": {
                    "path": path,
                    "max_bytes": {"type": "integer", "minimum": 1,
                                  "description": "Refuse (never truncate) a larger file."},
                },
                "required": ["path"],
                "additionalProperties": false,
            }),
        ),
        (
            "list_files",
            "List a directory of this session's sandbox (default /work), one level: names, \
             directories with a trailing /, file sizes."
                .to_owned(),
            json!({
                "type": "object",
                "properties": {"path": {"type": "string", "description": "A directory relative to /work (default: /work itself)."}},
                "additionalProperties": false,
            }),
        ),
    ]
}
