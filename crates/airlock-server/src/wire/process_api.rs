//! The `process.*` methods: background processes and terminals of a sandbox with the
//! `processes` capability (`airlock_broker::machine`).
//!
//! A process's wire id is `<sandbox_id>.<local id>`, so a method that names only the process
//! finds (and capability-checks) its sandbox like any sandbox method. Its output reaches every
//! connection attached to it — the one that started it, and any that calls `sandbox.connect`
//! later — as `output` notifications (`process_id`, `stream`, base64 `data`), then one
//! `process.exited`; a connection that does not read loses notifications (never slows the
//! process) and can re-read the recent output with `process.output`.
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use airlock_broker::machine::{Exit, Process, ProcessEvent};
use airlock_local::processes::ProcessParams;
use airlock_protocol::method as m;
use airlock_protocol::{ErrorCode, ErrorObject, Message};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::registry::sandboxes::Held;
use crate::wire::process_params::{self, Action, OnCall, StartCall};
use crate::wire::run::Conn;
use crate::wire::transport::Outbound;

/// How long `process.input` waits for a process that does not read.
const INPUT_WAIT: Duration = Duration::from_secs(5);

/// The sandbox a process method addresses: its `sandbox_id`, or the one its `process_id` names.
#[must_use]
pub fn sandbox_of(params: &Value) -> Option<String> {
    if let Some(s) = params.get("sandbox_id").and_then(Value::as_str) {
        return Some(s.to_owned());
    }
    let pid = params.get("process_id").and_then(Value::as_str)?;
    pid.rsplit_once('.').map(|(sb, _)| sb.to_owned())
}

/// Serve one process method on `held` (live, touched, capability-checked).
pub(crate) async fn serve(
    conn: &Conn,
    held: &Arc<Held>,
    method: &str,
    params: Value,
) -> Result<Value, ErrorObject> {
    match method {
        m::PROCESS_START => start(conn, held, process_params::parse_start(params)?).await,
        m::PROCESS_LIST => {
            process_params::parse_list(params)?;
            let all = held.sandbox.process_list();
            Ok(json!({ "processes": all.iter().map(|p| describe(held, p)).collect::<Vec<_>>() }))
        }
        _ => on_process(held, process_params::parse_on(method, params)?).await,
    }
}

async fn start(conn: &Conn, held: &Arc<Held>, p: StartCall) -> Result<Value, ErrorObject> {
    let env = crate::wire::params::with_sandbox_env(&held.env, p.env, Some(&p.argv))
        .map_err(crate::wire::run::params_error)?;
    let params = ProcessParams {
        argv: p.argv,
        working_directory: p.cwd,
        env,
        stdin: p.stdin,
        pty: p.pty,
        timeout: p.timeout,
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

async fn on_process(held: &Arc<Held>, call: OnCall) -> Result<Value, ErrorObject> {
    let local = call
        .process_id
        .strip_prefix(held.id.as_str())
        .and_then(|r| r.strip_prefix('.'))
        .unwrap_or_default();
    let process = held.sandbox.process(local).ok_or_else(|| {
        ErrorObject::new(
            ErrorCode::NotFound,
            format!("sandbox {} has no process {:?}", held.id, call.process_id),
        )
    })?;
    let id = wire_id(held, &process);
    match call.action {
        Action::Input(data) => {
            process.input(&data, INPUT_WAIT).await.map_err(refused)?;
            Ok(json!({ "process_id": id, "bytes": data.len() }))
        }
        Action::CloseStdin => {
            process.close_stdin().await.map_err(refused)?;
            Ok(json!({ "process_id": id }))
        }
        Action::Resize(rows, cols) => {
            process.resize(rows, cols).map_err(refused)?;
            Ok(json!({ "process_id": id }))
        }
        Action::Signal(sig) => {
            let delivered = process.signal(sig);
            Ok(json!({ "process_id": id, "delivered": delivered }))
        }
        Action::Wait(t) => {
            let exit = process.wait(t).await;
            let mut v = describe(held, &process);
            if let (Value::Object(o), Some(e)) = (&mut v, exit) {
                o.insert("exit_code".into(), json!(e.exit_code));
                o.insert("signal".into(), json!(e.signal));
            }
            Ok(v)
        }
        Action::Output => {
            let r = process.output.recent();
            Ok(json!({
                "process_id": id,
                "stdout": B64.encode(&r.stdout),
                "stderr": B64.encode(&r.stderr),
                "dropped_bytes": r.dropped,
                "encoding": "base64",
            }))
        }
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
