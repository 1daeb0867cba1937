//! The `process.*` methods: background processes and terminals of a sandbox with the
//! `processes` capability (`airlock_broker::machine`).
//!
//! A process's wire id is `<sandbox_id>.<local id>`, so a method that names only the process
//! finds (and capability-checks) its sandbox like any sandbox method. Its output reaches every
//! connection attached to it — the one that started it, and any that calls `sandbox.connect`
//! later — as `output` notifications (`process_id`, `stream`, base64 `data`), then one
//! `process.exited`; a connection that does not read loses notifications (never slows the
//! process) and can re-read the recent output with `process.output`.
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use airlock_broker::machine::{signal_number, Exit, Process, ProcessEvent};
use airlock_local::processes::ProcessParams;
use airlock_protocol::method as m;
use airlock_protocol::{ErrorCode, ErrorObject, Message};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::sandbox_run::Conn;
use crate::sandboxes::Held;
use crate::transport::Outbound;

/// The largest terminal a process may ask for.
const MAX_TERMINAL: u16 = 1000;
/// The most input one `process.input` carries (decoded).
const MAX_INPUT_BYTES: usize = 64 * 1024;
/// How long `process.input` waits for a process that does not read.
const INPUT_WAIT: Duration = Duration::from_secs(5);
/// The longest `process.wait`.
const MAX_WAIT_S: f64 = 300.0;

fn invalid(msg: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::InvalidParams, msg)
}

/// The sandbox a process method addresses: its `sandbox_id`, or the one its `process_id` names.
#[must_use]
pub fn sandbox_of(params: &Value) -> Option<String> {
    if let Some(s) = params.get("sandbox_id").and_then(Value::as_str) {
        return Some(s.to_owned());
    }
    let pid = params.get("process_id").and_then(Value::as_str)?;
    pid.rsplit_once('.').map(|(sb, _)| sb.to_owned())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartParams {
    sandbox_id: String,
    argv: Vec<String>,
    cwd: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    stdin: bool,
    pty: Option<TerminalSize>,
    timeout_s: Option<f64>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
struct TerminalSize {
    rows: u16,
    cols: u16,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OnProcess {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: Option<String>,
    process_id: String,
    data: Option<String>,
    rows: Option<u16>,
    cols: Option<u16>,
    signal: Option<Value>,
    timeout_s: Option<f64>,
}

fn parse<T: for<'de> Deserialize<'de>>(method: &str, params: Value) -> Result<T, ErrorObject> {
    serde_json::from_value(params).map_err(|e| invalid(format!("{method} params: {e}")))
}

/// Serve one process method on `held` (live, touched, capability-checked).
pub(crate) async fn serve(
    conn: &Conn,
    held: &Arc<Held>,
    method: &str,
    params: Value,
) -> Result<Value, ErrorObject> {
    match method {
        m::PROCESS_START => start(conn, held, parse(method, params)?).await,
        m::PROCESS_LIST => Ok(json!({
            "processes": held.sandbox.process_list().iter().map(|p| describe(held, p)).collect::<Vec<_>>()
        })),
        _ => on_process(conn, held, method, parse(method, params)?).await,
    }
}

async fn start(conn: &Conn, held: &Arc<Held>, p: StartParams) -> Result<Value, ErrorObject> {
    // argv and env by `execute`'s rules (bounded, valid names, fit the setup frame).
    let checked = crate::params::parse(Some(json!({ "argv": p.argv, "env": p.env })))
        .map_err(|e| invalid(format!("process.start: {e}")))?;
    let crate::params::Program::Argv(argv) = checked.program else {
        return Err(invalid("process.start takes `argv`"));
    };
    let env = checked.env;
    if let Some(t) = p.pty {
        if t.rows == 0 || t.cols == 0 || t.rows > MAX_TERMINAL || t.cols > MAX_TERMINAL {
            return Err(invalid(format!(
                "process.start: `pty` rows and cols must be 1 to {MAX_TERMINAL}"
            )));
        }
    }
    let timeout = match p.timeout_s {
        None => None,
        Some(t) if t.is_finite() && t > 0.0 && t <= 86_400.0 => Some(Duration::from_secs_f64(t)),
        Some(_) => return Err(invalid("process.start: `timeout_s` must be in (0, 86400]")),
    };
    let _ = p.sandbox_id;
    let params = ProcessParams {
        argv,
        working_directory: p.cwd,
        env,
        stdin: p.stdin,
        pty: p.pty.map(|t| (t.rows, t.cols)),
        timeout,
        limits: Some(held.limits.clone()),
    };
    let process = held
        .sandbox
        .start_process(params)
        .await
        .map_err(|e| ErrorObject::new(ErrorCode::SandboxRefused, e.to_string()))?;
    attach_from_start(conn, held, &process);
    Ok(json!({ "process_id": wire_id(held, &process) }))
}

async fn on_process(
    conn: &Conn,
    held: &Arc<Held>,
    method: &str,
    p: OnProcess,
) -> Result<Value, ErrorObject> {
    let local = p
        .process_id
        .strip_prefix(held.id.as_str())
        .and_then(|r| r.strip_prefix('.'))
        .unwrap_or_default();
    let process = held.sandbox.process(local).ok_or_else(|| {
        ErrorObject::new(
            ErrorCode::NotFound,
            format!("sandbox {} has no process {:?}", held.id, p.process_id),
        )
    })?;
    let id = wire_id(held, &process);
    let _ = conn;
    match method {
        m::PROCESS_INPUT => {
            let data = B64
                .decode(p.data.as_deref().unwrap_or_default())
                .map_err(|e| invalid(format!("process.input: `data` is not base64: {e}")))?;
            if data.len() > MAX_INPUT_BYTES {
                return Err(invalid(format!(
                    "process.input: at most {MAX_INPUT_BYTES} bytes per call"
                )));
            }
            process.input(&data, INPUT_WAIT).await.map_err(refused)?;
            Ok(json!({ "process_id": id, "bytes": data.len() }))
        }
        m::PROCESS_CLOSE_STDIN => {
            process.close_stdin().await.map_err(refused)?;
            Ok(json!({ "process_id": id }))
        }
        m::PROCESS_RESIZE => {
            let (Some(rows), Some(cols)) = (p.rows, p.cols) else {
                return Err(invalid("process.resize takes `rows` and `cols`"));
            };
            if rows == 0 || cols == 0 || rows > MAX_TERMINAL || cols > MAX_TERMINAL {
                return Err(invalid(format!(
                    "rows and cols must be 1 to {MAX_TERMINAL}"
                )));
            }
            process.resize(rows, cols).map_err(refused)?;
            Ok(json!({ "process_id": id }))
        }
        m::PROCESS_SIGNAL => {
            let sig = match &p.signal {
                Some(Value::String(s)) => signal_number(s),
                Some(Value::Number(n)) => n
                    .as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .filter(|n| airlock_broker::machine::SIGNALS.iter().any(|(_, s)| s == n)),
                _ => None,
            }
            .ok_or_else(|| {
                invalid(
                    "process.signal: `signal` must be one of SIGTERM, SIGINT, SIGHUP, SIGQUIT, \
                     SIGUSR1, SIGUSR2, SIGCONT, SIGKILL (name or number)",
                )
            })?;
            let delivered = process.signal(sig);
            Ok(json!({ "process_id": id, "delivered": delivered }))
        }
        m::PROCESS_WAIT => {
            let t = p.timeout_s.unwrap_or(MAX_WAIT_S);
            if !(t.is_finite() && (0.0..=MAX_WAIT_S).contains(&t)) {
                return Err(invalid(format!(
                    "process.wait: `timeout_s` must be in [0, {MAX_WAIT_S}]"
                )));
            }
            let exit = process.wait(Duration::from_secs_f64(t)).await;
            let mut v = describe(held, &process);
            if let (Value::Object(o), Some(e)) = (&mut v, exit) {
                o.insert("exit_code".into(), json!(e.exit_code));
                o.insert("signal".into(), json!(e.signal));
            }
            Ok(v)
        }
        m::PROCESS_OUTPUT => {
            let r = process.output.recent();
            Ok(json!({
                "process_id": id,
                "stdout": B64.encode(&r.stdout),
                "stderr": B64.encode(&r.stderr),
                "dropped_bytes": r.dropped,
                "encoding": "base64",
            }))
        }
        _ => Err(ErrorObject::new(
            ErrorCode::MethodNotFound,
            "unknown method",
        )),
    }
}

fn refused(msg: String) -> ErrorObject {
    ErrorObject::new(ErrorCode::SandboxRefused, msg)
}

fn wire_id(held: &Held, p: &Process) -> String {
    format!("{}.{}", held.id, p.id)
}

fn exit_value(e: Option<Exit>) -> (Value, Value, &'static str) {
    match e {
        None => (Value::Null, Value::Null, "running"),
        Some(e) => (json!(e.exit_code), json!(e.signal), "exited"),
    }
}

/// A process as `process.list` and `process.wait` describe it.
fn describe(held: &Held, p: &Process) -> Value {
    let (exit_code, signal, state) = exit_value(p.exit());
    let started = p
        .started_at
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    json!({
        "process_id": wire_id(held, p),
        "sandbox_id": held.id,
        "argv": p.argv,
        "pty": p.pty,
        "state": state,
        "exit_code": exit_code,
        "signal": signal,
        "started_at_ms": started,
    })
}

/// Forward `process`'s events to `conn` until it ends or the connection goes (once per
/// connection and process).
pub(crate) fn attach(conn: &Conn, held: &Held, process: &Arc<Process>) {
    forward(conn, held, process, false);
}

/// As [`attach`], for the connection that started `process`: it hears the output from the
/// process's first byte (a listener made after the start would miss what came before it,
/// and a process that ended at once would send nothing but its exit).
fn attach_from_start(conn: &Conn, held: &Held, process: &Arc<Process>) {
    forward(conn, held, process, true);
}

fn forward(conn: &Conn, held: &Held, process: &Arc<Process>, from_start: bool) {
    let id = wire_id(held, process);
    if !conn.attached.insert(&id) {
        return;
    }
    let mut rx = if from_start {
        process.output.listen_from_start()
    } else {
        process.output.listen()
    };
    let out = conn.outbound.clone();
    let gone = conn.conn_gone.clone();
    let sandbox_id = held.id.clone();
    let attached = conn.attached.clone();
    // The listener from the start holds the exit too; a later one hears only the exit now.
    let ended = if from_start { None } else { process.exit() };
    tokio::spawn(async move {
        // The end is never dropped (unlike output): it waits for room while the connection
        // lasts.
        if let Some(e) = ended {
            tokio::select! {
                () = gone.cancelled() => {}
                _ = out.send(Outbound::Message(exited(&id, &sandbox_id, e))) => {}
            }
            attached.remove(&id);
            return;
        }
        loop {
            let event = tokio::select! {
                () = gone.cancelled() => break,
                e = rx.recv() => e,
            };
            let msg = match event {
                Ok(ProcessEvent::Output { stream, data }) => Message::notification(
                    m::OUTPUT,
                    Some(json!({
                        "process_id": id, "sandbox_id": sandbox_id, "stream": stream.as_str(),
                        "data": B64.encode(&data), "encoding": "base64",
                    })),
                ),
                Ok(ProcessEvent::Exited(e)) => {
                    tokio::select! {
                        () = gone.cancelled() => {}
                        _ = out.send(Outbound::Message(exited(&id, &sandbox_id, e))) => {}
                    }
                    break;
                }
                // A listener that fell behind lost chunks; it goes on with what comes next.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            };
            // A connection that does not read loses notifications, never slows the process.
            let _ = out.try_send(Outbound::Message(msg));
        }
        attached.remove(&id);
    });
}

fn exited(id: &str, sandbox_id: &str, e: Exit) -> Message {
    Message::notification(
        m::PROCESS_EXITED,
        Some(json!({
            "process_id": id, "sandbox_id": sandbox_id,
            "exit_code": e.exit_code, "signal": e.signal,
        })),
    )
}

/// Attach `conn` to every live process of `held` (`sandbox.connect` re-attaches).
pub(crate) fn attach_all(conn: &Conn, held: &Held) {
    for p in held.sandbox.process_list() {
        if p.exit().is_none() {
            attach(conn, held, &p);
        }
    }
}
