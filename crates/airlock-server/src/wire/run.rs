//! `sandbox.run_code` and `sandbox.exec`: one run in a live sandbox, a fresh executor over its
//! persistent filesystem, with optional streaming and cancellation (`run.cancel`).
//!
//! One run at a time per sandbox (`busy`); runs in different sandboxes proceed concurrently
//! (over the server's run slots they queue, fairly: see `airlock_broker::runner`). Streaming is a tap on the captured output: chunks within
//! the output cap are sent as `output` notifications, in order, before the run's terminal
//! response; a client that does not read them loses chunks (counted in `output_dropped_bytes`),
//! never stalls the broker.
use std::sync::Arc;

use airlock_broker::output::{DroppedBytes, OutputChunk, OutputTap};
use airlock_broker::run::Cancel;
use airlock_broker::{NoTools, ToolHandler};
use airlock_local::RunRequest;
use airlock_policy::Capability;
use airlock_protocol::{ErrorCode, ErrorObject, Id, Message};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::cancel::CancelToken;
use crate::registry::sandboxes::Held;
use crate::server::Shared;
use crate::telemetry::audit::{AuditRecord, RunFacts};
use crate::tenancy::conn_info::ConnInfo;
use crate::wire::params::{self, ParamsError, Program};
use crate::wire::remote_tools::{Pending, RemoteTools};
use crate::wire::reply;
use crate::wire::transport::Outbound;

/// Output chunks held for a slow listener before they are dropped.
const TAP_CHUNKS: usize = 64;
/// How long a notification may wait for a stalled connection before streaming gives up.
const STALL: std::time::Duration = std::time::Duration::from_secs(2);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRun {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: String,
    code: Option<String>,
    argv: Option<Vec<String>>,
    timeout_s: Option<f64>,
    #[serde(default)]
    env: serde_json::Map<String, Value>,
    #[serde(default)]
    stream: bool,
    cwd: Option<String>,
    tools: Option<Vec<String>>,
    #[serde(default)]
    output_encoding: OutputEncoding,
}

/// How the result carries the captured streams: text (invalid UTF-8 replaced) or the exact
/// bytes as base64.
#[derive(Deserialize, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum OutputEncoding {
    #[default]
    Text,
    Base64,
}

/// Everything a method needs from its connection.
#[derive(Clone)]
pub(crate) struct Conn {
    /// Server state.
    pub(crate) shared: Arc<Shared>,
    /// Who asked.
    pub info: Arc<ConnInfo>,
    /// Where responses and notifications go.
    pub outbound: mpsc::Sender<Outbound>,
    /// Tool calls awaiting the orchestrator's answer.
    pub pending: Pending,
    /// Cancelled when the connection is gone.
    pub conn_gone: CancelToken,
    /// The background processes this connection hears.
    pub attached: crate::wire::attached::Attached,
    /// The request's trace span (`crate::telemetry::request_span`).
    pub span: tracing::Span,
    /// The request's place under the connection's in-flight cap, given back by
    /// [`Conn::answer`].
    pub(crate) slot: crate::wire::in_flight::Slot,
}

impl Conn {
    /// Queues the request's one answer for the peer, giving its in-flight slot back first: a
    /// place in the outbound queue is reserved (waiting while the peer reads nothing, so the
    /// cap still bounds it), the slot released, and only then is the answer visible to the
    /// writer, so the peer's next request, sent the moment it reads this answer, finds the
    /// slot free.
    pub(crate) async fn answer(&self, msg: Message) {
        self.shared.config.metrics.answered(&msg);
        crate::telemetry::request_span::record_answer(&self.span, &msg);
        let place = self.outbound.reserve().await;
        self.slot.release();
        // No place: the writer is gone with the peer; nothing else can be done.
        if let Ok(place) = place {
            place.send(Outbound::Message(msg));
        }
    }
}

/// A parsed run request.
pub(crate) struct RunCall {
    program: Program,
    timeout_s: Option<f64>,
    env: Vec<(String, String)>,
    stream: bool,
    cwd: Option<String>,
    tools: Option<std::collections::BTreeSet<String>>,
    encoding: OutputEncoding,
}

impl RunCall {
    /// The limits the call asks for (only its timeout), resolved against the ceilings later.
    pub(crate) fn requested_limits(&self) -> crate::ceilings::RequestedLimits {
        crate::ceilings::RequestedLimits {
            timeout_s: self.timeout_s,
            ..Default::default()
        }
    }
}

/// A params error as the wire answers it.
pub(crate) fn params_error(e: ParamsError) -> ErrorObject {
    match e {
        ParamsError::Invalid(m) => ErrorObject::new(ErrorCode::InvalidParams, m),
        ParamsError::TooLarge(m) => ErrorObject::new(ErrorCode::ProgramTooLarge, m),
    }
}

/// Parse `sandbox.run_code` / `sandbox.exec` params (the program and env by `execute`'s rules).
pub fn parse(method: &str, v: Value) -> Result<RunCall, ErrorObject> {
    let raw: RawRun = serde_json::from_value(v)
        .map_err(|e| ErrorObject::new(ErrorCode::InvalidParams, format!("{method} params: {e}")))?;
    let is_exec = method == airlock_protocol::method::SANDBOX_EXEC;
    if is_exec != raw.argv.is_some() || raw.code.is_some() == raw.argv.is_some() {
        let want = if is_exec { "`argv`" } else { "`code`" };
        return Err(ErrorObject::new(
            ErrorCode::InvalidParams,
            format!("{method} takes {want}"),
        ));
    }
    let execute = json!({ "code": raw.code, "argv": raw.argv, "env": raw.env, "tools": raw.tools });
    let execute = match execute {
        Value::Object(mut m) => {
            m.retain(|_, v| !v.is_null());
            Value::Object(m)
        }
        other => other,
    };
    let p = params::parse(Some(execute)).map_err(params_error)?;
    Ok(RunCall {
        program: p.program,
        timeout_s: raw.timeout_s,
        env: p.env,
        stream: raw.stream,
        cwd: raw.cwd,
        tools: p.tools,
        encoding: raw.output_encoding,
    })
}

/// Sends output chunks as `output` notifications; a UTF-8 sequence cut between chunks is
/// carried to the next chunk of its stream (and sent as it is when the run ends). Every byte
/// the tap gave it is streamed or counted in `dropped`: a listener that takes nothing for
/// [`STALL`] gets no more chunks, and what was taken for it is counted then.
async fn forward(
    run_id: String,
    sandbox_id: String,
    mut rx: mpsc::Receiver<OutputChunk>,
    out: mpsc::Sender<Outbound>,
    dropped: DroppedBytes,
) {
    use airlock_broker::output::Stream;
    let notify = |stream: Stream, bytes: &[u8]| {
        let params = json!({
            "run_id": run_id,
            "sandbox_id": sandbox_id,
            "stream": stream.as_str(),
            "data": String::from_utf8_lossy(bytes),
        });
        Outbound::Message(Message::notification(
            airlock_protocol::method::OUTPUT,
            Some(params),
        ))
    };
    let mut carry: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    let stalled = 'chunks: {
        while let Some(c) = rx.recv().await {
            let slot = usize::from(c.stream == Stream::Stderr);
            let mut bytes = std::mem::take(&mut carry[slot]);
            bytes.extend_from_slice(&c.data);
            let valid = match std::str::from_utf8(&bytes) {
                Ok(_) => bytes.len(),
                Err(e) if e.error_len().is_none() => e.valid_up_to(),
                Err(_) => bytes.len(),
            };
            carry[slot] = bytes.split_off(valid);
            if !bytes.is_empty() && !send(&out, notify(c.stream, &bytes)).await {
                dropped.add(bytes.len() as u64);
                break 'chunks true;
            }
        }
        false
    };
    if stalled {
        // What was taken for the listener and not sent: the carries, the chunks queued.
        let carried: usize = carry.iter().map(Vec::len).sum();
        dropped.add(carried as u64);
        rx.close();
        while let Some(c) = rx.recv().await {
            dropped.add(c.data.len() as u64);
        }
        return;
    }
    for (stream, slot) in [(Stream::Stdout, 0), (Stream::Stderr, 1)] {
        let bytes = std::mem::take(&mut carry[slot]);
        if !bytes.is_empty() && !send(&out, notify(stream, &bytes)).await {
            dropped.add(bytes.len() as u64);
        }
    }
}

/// Queue `msg` for the listener, waiting at most [`STALL`]; false if it took nothing.
async fn send(out: &mpsc::Sender<Outbound>, msg: Outbound) -> bool {
    out.send_timeout(msg, STALL).await.is_ok()
}

/// Run `call` in `held` and send its one terminal response for `request_id`.
pub async fn run(
    conn: Conn,
    held: Arc<Held>,
    request_id: Id,
    run_id: String,
    call: RunCall,
    token: CancelToken,
    quota: Option<crate::registry::budget::RunTicket>,
) {
    // Released however the run ends (a panicking task included), so the sandbox never stays
    // busy; released before the response goes out, so the client's next run is never `busy`
    // (nor over its tenant's run quota).
    let claim = Claim {
        held: Arc::clone(&held),
        conn: conn.clone(),
        run_id: run_id.clone(),
    };
    let msg = match run_inner(&conn, &held, &request_id, &run_id, call, token).await {
        Ok(m) => m,
        Err(e) => Message::error(request_id, e),
    };
    drop(claim);
    drop(quota);
    conn.answer(msg).await;
}

/// A sandbox's claim for one run, released on drop.
struct Claim {
    held: Arc<Held>,
    conn: Conn,
    run_id: String,
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.held.release();
        self.conn.shared.run_ended(&self.run_id);
    }
}

async fn run_inner(
    conn: &Conn,
    held: &Arc<Held>,
    request_id: &Id,
    run_id: &str,
    mut call: RunCall,
    token: CancelToken,
) -> Result<Message, ErrorObject> {
    let config = &conn.shared.config;
    let requested = call.requested_limits();
    let limits = config
        .ceilings
        .resolve(&held.limits, &requested)
        .map_err(|r| ErrorObject::new(ErrorCode::InvalidParams, r.to_string()))?;
    let argv = match &call.program {
        Program::Argv(a) => Some(a.as_slice()),
        Program::Code(_) => None,
    };
    let env = params::with_sandbox_env(&held.env, std::mem::take(&mut call.env), argv)
        .map_err(params_error)?;
    let (workload, kind) = call.program.into_workload(config.interpreter.clone());
    let shutdown = conn.shared.shutdown.clone();
    let conn_gone = conn.conn_gone.clone();
    let cancel: Cancel = Box::pin(async move {
        tokio::select! {
            () = token.cancelled() => {}
            () = shutdown.cancelled() => {}
            () = conn_gone.cancelled() => {}
        }
    });
    let remote = Arc::new(
        RemoteTools::new(
            run_id.to_owned(),
            conn.outbound.clone(),
            conn.pending.clone(),
            config.tool_timeout,
            call.tools,
        )
        .in_sandbox(&held.id),
    );
    // Only a spec that asked for host tools and declared them gets any, each call through
    // the registry's door (schema, call cap, response caps, sanitized denials); otherwise
    // every call is `unknown_tool` and the orchestrator never sees one.
    let door = held
        .spec
        .requires()
        .contains(&Capability::HostTools)
        .then(|| {
            let observers = config
                .sandboxes
                .as_ref()
                .map(|s| s.observers().clone())
                .unwrap_or_default();
            crate::wire::tools::door(&held.tools, &remote, &held.key, &observers)
        })
        .flatten();
    let tools: &dyn ToolHandler = match &door {
        Some(d) => d.as_ref(),
        None => &NoTools,
    };
    let tools = crate::telemetry::traced_tools::TracedTools::new(tools, conn.span.clone(), run_id);
    let (tap, forwarder) = if call.stream {
        let (tap, rx) = OutputTap::new(TAP_CHUNKS);
        let f = tokio::spawn(forward(
            run_id.to_owned(),
            held.id.clone(),
            rx,
            conn.outbound.clone(),
            tap.dropped_counter(),
        ));
        (Some(tap), Some(f))
    } else {
        (None, None)
    };
    let dropped = tap.as_ref().map(OutputTap::dropped_counter);
    let mut req = RunRequest::new(workload, limits.timeout, env);
    req.limits = Some(limits.clone());
    req.working_directory = call.cwd.as_deref();
    req.tools = Some(&tools);
    req.cancel = Some(cancel);
    req.output = tap;
    // The runner queues the run for a slot (fair per sandbox, then FIFO, within its own
    // deadline); the slot goes back as soon as every process of the run is gone, not once a
    // listener that stopped reading has taken the last notifications — that could be never.
    let result = held.sandbox.run_request(req).await;
    // Whatever was streamed goes out before the response, but a stalled listener never holds
    // the sandbox: the forwarder gives up on a connection that takes nothing for STALL.
    if let Some(f) = forwarder {
        let _ = f.await;
    }
    let result = result.map_err(|e| crate::wire::files_api::file_error(&e))?;
    let queued_ms = result.queued_ms;
    let calls = remote.take_calls();
    config.metrics.run_ended(&result, &calls);
    if let Some(sink) = config
        .audit
        .as_ref()
        .filter(|_| !result.cancelled_before_start())
    {
        let facts = RunFacts {
            run_id,
            connection: &conn.info.id,
            peer: &conn.info.peer,
            tenant: &conn.info.tenant,
            transport: conn.info.transport,
            workload: kind,
            limits: &limits,
            queued_ms,
        };
        sink.write(&AuditRecord::new(&facts, calls, &result));
    }
    let mut result = result;
    if call.encoding == OutputEncoding::Base64 {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        result.stdout = b64.encode(&result.stdout_raw);
        result.stderr = b64.encode(&result.stderr_raw);
    }
    let mut msg = reply::run_result(request_id.clone(), run_id, result);
    if let Message::Response(r) = &mut msg {
        if let Ok(Value::Object(m)) = r.outcome.as_mut() {
            if call.encoding == OutputEncoding::Base64 {
                m.insert("output_encoding".into(), json!("base64"));
            }
            m.insert("sandbox_id".into(), json!(held.id));
            if let Some(d) = &dropped {
                m.insert("output_dropped_bytes".into(), json!(d.get()));
            }
        }
    }
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_broker::output::Stream;

    fn chunk(data: &[u8]) -> OutputChunk {
        OutputChunk {
            stream: Stream::Stdout,
            data: data.to_vec(),
        }
    }

    fn streamed(out: &mut mpsc::Receiver<Outbound>) -> Vec<String> {
        let mut texts = Vec::new();
        while let Ok(Outbound::Message(Message::Notification(n))) = out.try_recv() {
            let data = n.params.as_ref().map(|p| p["data"].clone());
            texts.push(
                data.and_then(|d| d.as_str().map(str::to_owned))
                    .unwrap_or_default(),
            );
        }
        texts
    }

    /// A listener that stops taking chunks: every byte the tap handed over is streamed or
    /// counted as dropped, the chunks still queued for it when it stalled included (they were
    /// lost uncounted: 128 KiB of a 10 MiB stream under load).
    #[tokio::test]
    async fn a_stalled_listener_is_counted_every_byte_it_never_got() {
        let (tx, rx) = mpsc::channel(64);
        let (out_tx, mut out) = mpsc::channel(1);
        let (tap, _unused) = OutputTap::new(1);
        let dropped = tap.dropped_counter();
        let total = 40 * 1000;
        for _ in 0..40 {
            tx.try_send(chunk(&[b'x'; 1000])).unwrap();
        }
        drop(tx);
        forward("r".into(), "s".into(), rx, out_tx, dropped.clone()).await;
        let sent: usize = streamed(&mut out).iter().map(String::len).sum();
        assert_eq!(sent, 1000, "one chunk fits the listener's queue");
        assert_eq!(sent as u64 + dropped.get(), total);
    }

    /// A run's last bytes, cut inside a UTF-8 sequence, still reach a listener that reads.
    #[tokio::test]
    async fn a_trailing_cut_sequence_is_sent_when_the_run_ends() {
        let (tx, rx) = mpsc::channel(8);
        let (out_tx, mut out) = mpsc::channel(8);
        let (tap, _unused) = OutputTap::new(1);
        tx.try_send(chunk(b"ok \xe2\x82")).unwrap();
        drop(tx);
        forward("r".into(), "s".into(), rx, out_tx, tap.dropped_counter()).await;
        assert_eq!(streamed(&mut out), ["ok ", "\u{fffd}"]);
        assert_eq!(tap.dropped(), 0);
    }
}
