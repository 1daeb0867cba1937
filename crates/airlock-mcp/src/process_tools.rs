//! `start_process`, `process_output`, `stop_process` (served with `airlock mcp --processes`, in
//! conversation scope only): background processes in the session sandbox's machine
//! (`airlock_broker::machine`, see docs/server.md "Background processes and terminals").
//!
//! A process started here lives until it exits, is stopped, or the session ends (its sandbox
//! is disposed, and the kernel kills every process of the machine); the session's runs share
//! the machine's loopback, so an `exec` of `curl 127.0.0.1:8000` reaches a background server.
use std::sync::Arc;
use std::time::Duration;

use airlock_broker::machine::{Exit, Process};
use airlock_broker::GUEST_WORK_DIR;
use airlock_local::processes::ProcessParams;
use airlock_local::LocalSandbox;
use rmcp::model::{CallToolResult, JsonObject};
use serde_json::{json, Value};

use crate::{args, result};

/// The process tools.
pub const PROCESS_TOOLS: [&str; 3] = ["start_process", "process_output", "stop_process"];

/// Most seconds `process_output` waits for a process to end.
pub const MAX_WAIT_S: f64 = 60.0;

/// How long `stop_process` waits for the killed process to be reaped.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// The signal `stop_process` sends.
const SIGKILL: i32 = 9;

/// The shell a `command` runs in.
const SHELL: &str = "/bin/sh";

/// What `start_process` starts.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Start {
    pub(crate) argv: Vec<String>,
    pub(crate) cwd: Option<String>,
    pub(crate) env: Vec<(String, String)>,
}

/// `start_process` arguments: exactly one of `command` (run by `/bin/sh -c`) or `argv`, and
/// `cwd` (relative to /work, or absolute beneath it) and `env` (the whole environment).
pub(crate) fn parse_start(a: &JsonObject) -> Result<Start, String> {
    args::only_keys(a, &["command", "argv", "cwd", "env"])?;
    let argv = match (a.get("command"), a.get("argv")) {
        (Some(_), Some(_)) => return Err("give either `command` or `argv`, not both".to_owned()),
        (Some(_), None) => {
            let command = args::string(a, "command")?;
            if command.trim().is_empty() || command.contains('\0') {
                return Err("`command` must be a non-empty shell command".to_owned());
            }
            vec![SHELL.to_owned(), "-c".to_owned(), command]
        }
        (None, Some(_)) => args::argv(a)?,
        (None, None) => return Err("`command` or `argv` is required".to_owned()),
    };
    let env = args::env(a)?;
    args::fits(&argv, &env)?;
    let cwd = match args::opt_string(a, "cwd")?.as_deref() {
        None | Some("" | "." | "/work" | "/work/") => None,
        Some(p) => {
            let rel = match p.strip_prefix("/work/") {
                Some(r) => r,
                None if p.starts_with('/') => {
                    return Err(format!("`cwd` {p:?} is not beneath /work"))
                }
                None => p,
            };
            Some(format!(
                "{GUEST_WORK_DIR}/{}",
                args::parse_path(rel)?.as_str()
            ))
        }
    };
    Ok(Start { argv, cwd, env })
}

/// The id and the seconds to wait of `process_output`.
pub(crate) fn parse_output(a: &JsonObject) -> Result<(String, Duration), String> {
    args::only_keys(a, &["process_id", "wait_s"])?;
    let id = args::string(a, "process_id")?;
    let wait = match a.get("wait_s") {
        None | Some(Value::Null) => Duration::ZERO,
        Some(v) => match v.as_f64() {
            Some(s) if s.is_finite() && (0.0..=MAX_WAIT_S).contains(&s) => {
                Duration::from_secs_f64(s)
            }
            _ => {
                return Err(format!(
                    "`wait_s` must be a number of seconds in [0, {MAX_WAIT_S}]"
                ))
            }
        },
    };
    Ok((id, wait))
}

fn find(sb: &LocalSandbox, id: &str) -> Result<Arc<Process>, CallToolResult> {
    sb.process(id).ok_or_else(|| {
        let shown: String = id.chars().filter(|c| !c.is_control()).take(64).collect();
        result::file_error(format!(
            "no process {shown:?} in this session (start_process returns the id)"
        ))
    })
}

/// The state in words and as JSON members.
fn state(exit: Option<Exit>) -> (String, Value) {
    match exit {
        None => (
            "running".to_owned(),
            json!({"state": "running", "exit_code": null, "signal": null}),
        ),
        Some(e) => {
            let how = match (e.exit_code, e.signal) {
                (_, Some(s)) => format!("exited by signal {s}"),
                (Some(c), None) => format!("exited with code {c}"),
                (None, None) => "exited".to_owned(),
            };
            (
                how,
                json!({"state": "exited", "exit_code": e.exit_code, "signal": e.signal}),
            )
        }
    }
}

fn merge(mut base: Value, more: Value) -> Value {
    if let (Value::Object(b), Value::Object(m)) = (&mut base, more) {
        b.extend(m);
    }
    base
}

/// `start_process {command | argv, cwd?, env?}`: starts it in the session sandbox's machine.
pub async fn start(sb: &LocalSandbox, a: &JsonObject) -> CallToolResult {
    let s = match parse_start(a) {
        Ok(s) => s,
        Err(m) => return result::refusal(m),
    };
    let params = ProcessParams {
        argv: s.argv.clone(),
        working_directory: s.cwd,
        env: s.env,
        stdin: false,
        pty: None,
        timeout: None,
        limits: None,
    };
    let p = match sb.start_process(params).await {
        Ok(p) => p,
        Err(e) => return result::file_error(format!("the process did not start: {e}")),
    };
    result::file_result(
        format!(
            "started process {id}; it runs in the background (for dev servers, watchers) until \
             it exits, stop_process ends it, or this session ends. Read its output with \
             process_output {{\"process_id\": \"{id}\"}}; the code tools' runs reach its ports \
             on 127.0.0.1.",
            id = p.id
        ),
        Vec::new(),
        json!({"process_id": p.id, "argv": p.argv, "state": "running"}),
    )
}

fn stream(s: &mut String, name: &str, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let text = String::from_utf8_lossy(data);
    s.push_str(&format!("\n--- {name} ---\n{text}"));
    if !text.ends_with('\n') {
        s.push('\n');
    }
}

/// `process_output {process_id, wait_s?}`: waits up to `wait_s` for it to end, then its state
/// and its recent output (the last 256 KiB of stdout and stderr, decoded lossily).
pub async fn output(sb: &LocalSandbox, a: &JsonObject) -> CallToolResult {
    let (id, wait) = match parse_output(a) {
        Ok(x) => x,
        Err(m) => return result::refusal(m),
    };
    let p = match find(sb, &id) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let exit = if wait.is_zero() {
        p.exit()
    } else {
        p.wait(wait).await
    };
    let (how, st) = state(exit);
    let recent = p.output.recent();
    let mut text = format!("process {}: {how}", p.id);
    if recent.dropped > 0 {
        text.push_str(&format!(
            "\n[{} older bytes of output are no longer kept: the last 256 KiB follow]",
            recent.dropped
        ));
    }
    stream(&mut text, "stdout", &recent.stdout);
    stream(&mut text, "stderr", &recent.stderr);
    if recent.stdout.is_empty() && recent.stderr.is_empty() {
        text.push_str("\n(no output yet)");
    }
    let detail = merge(
        json!({
            "process_id": p.id,
            "argv": p.argv,
            "stdout": String::from_utf8_lossy(&recent.stdout),
            "stderr": String::from_utf8_lossy(&recent.stderr),
            "dropped_bytes": recent.dropped,
        }),
        st,
    );
    result::file_result(text, Vec::new(), detail)
}

/// `stop_process {process_id}`: SIGKILL to its process group, then waits (briefly) for it to
/// be reaped; says whether it was running.
pub async fn stop(sb: &LocalSandbox, a: &JsonObject) -> CallToolResult {
    if let Err(m) = args::only_keys(a, &["process_id"]) {
        return result::refusal(m);
    }
    let id = match args::string(a, "process_id") {
        Ok(id) => id,
        Err(m) => return result::refusal(m),
    };
    let p = match find(sb, &id) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let was_running = p.exit().is_none() && p.signal(SIGKILL);
    let exit = if was_running {
        p.wait(STOP_WAIT).await
    } else {
        p.exit()
    };
    let (how, st) = state(exit);
    let text = if was_running {
        format!(
            "process {} was running: SIGKILL sent to its process group; now {how}",
            p.id
        )
    } else {
        format!("process {} was not running ({how}): nothing to stop", p.id)
    };
    let detail = merge(json!({"process_id": p.id, "was_running": was_running}), st);
    result::file_result(text, Vec::new(), detail)
}

/// The three tools' descriptions and input schemas.
pub fn tools() -> Vec<(&'static str, String, Value)> {
    let id = json!({"type": "string", "description": "The id start_process returned."});
    vec![
        (
            "start_process",
            "Start a background process in this session's sandbox (a dev server, a watcher): \
             it keeps running after this call, until it exits, stop_process ends it, or the \
             session ends. Runs of the code tools share its loopback network, so `exec` or \
             `run_python` can reach a server it listens with on 127.0.0.1. Returns its id; \
             read its output with process_output. The sandbox has no other network."
                .to_owned(),
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string",
                                "description": "A shell command, run by /bin/sh -c (give this or `argv`)."},
                    "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                             "description": "The command and its arguments, no shell (give this or `command`)."},
                    "cwd": {"type": "string",
                            "description": "Its working directory, relative to /work (default /work)."},
                    "env": {"type": "object", "additionalProperties": {"type": "string"},
                            "maxProperties": args::MAX_ENV_VARS,
                            "description": "Its whole environment (empty by default)."},
                },
                "additionalProperties": false,
            }),
        ),
        (
            "process_output",
            format!(
                "The state of a background process (running, or exited with its code or \
                 signal) and its recent output (the last 256 KiB of stdout and stderr). \
                 `wait_s` (at most {MAX_WAIT_S}) waits that long for it to end first."
            ),
            json!({
                "type": "object",
                "properties": {
                    "process_id": id,
                    "wait_s": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_S, "default": 0,
                               "description": "Seconds to wait for the process to end before answering."},
                },
                "required": ["process_id"],
                "additionalProperties": false,
            }),
        ),
        (
            "stop_process",
            "Stop a background process: SIGKILL to its process group. Says whether it was \
             running."
                .to_owned(),
            json!({
                "type": "object",
                "properties": {"process_id": id},
                "required": ["process_id"],
                "additionalProperties": false,
            }),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> JsonObject {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn start_arguments() {
        let s = parse_start(&obj(json!({"command": "python3 -m http.server"}))).unwrap();
        assert_eq!(s.argv, ["/bin/sh", "-c", "python3 -m http.server"]);
        assert_eq!(s.cwd, None);
        let s = parse_start(&obj(json!({"argv": ["sleep", "9"], "cwd": "site"}))).unwrap();
        assert_eq!(s.argv, ["sleep", "9"]);
        assert_eq!(s.cwd.as_deref(), Some("/work/site"));
        let s = parse_start(&obj(json!({"argv": ["x"], "cwd": "/work/a/b"}))).unwrap();
        assert_eq!(s.cwd.as_deref(), Some("/work/a/b"));
        for bad in [
            json!({}),
            json!({"command": "x", "argv": ["x"]}),
            json!({"command": "  "}),
            json!({"argv": []}),
            json!({"argv": ["x"], "cwd": "/etc"}),
            json!({"argv": ["x"], "cwd": "../x"}),
            json!({"argv": ["x"], "stdin": true}),
        ] {
            assert!(parse_start(&obj(bad.clone())).is_err(), "{bad}");
        }
    }

    #[test]
    fn output_arguments() {
        let (id, w) = parse_output(&obj(json!({"process_id": "proc-1"}))).unwrap();
        assert_eq!((id.as_str(), w), ("proc-1", Duration::ZERO));
        let (_, w) = parse_output(&obj(json!({"process_id": "p", "wait_s": 1.5}))).unwrap();
        assert_eq!(w, Duration::from_millis(1500));
        for bad in [
            json!({"process_id": "p", "wait_s": 61}),
            json!({"process_id": "p", "wait_s": -1}),
            json!({"process_id": "p", "wait_s": "1"}),
            json!({"wait_s": 1}),
        ] {
            assert!(parse_output(&obj(bad.clone())).is_err(), "{bad}");
        }
    }
}
