//! One orchestrator connection: JSON-RPC over a [`transport`](crate::wire::transport) seam.
//!
//! One run at a time: a second `execute` while one is in flight gets `busy` and the first is
//! unaffected. The run is its own task, so the session keeps reading while it executes and
//! routes the orchestrator's `call_tool` answers to it (a tool call in flight never
//! deadlocks). A vanished peer, a fatal framing error or a server shutdown cancels the run;
//! the session then waits for the run (so for the executor to be reaped) and still tries to
//! send its terminal response.
use std::sync::Arc;

use airlock_protocol::{ErrorCode, ErrorObject, Id, Message, Request, Response};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use tracing::Instrument;

use crate::cancel::CancelToken;
use crate::server::Shared;
use crate::telemetry::audit::{AuditRecord, RunFacts};
pub use crate::tenancy::conn_info::ConnInfo;
use crate::wire::dispatch;
use crate::wire::in_flight::{InFlight, MAX_IN_FLIGHT};
use crate::wire::params::{self, ParamsError};
use crate::wire::remote_tools::{Pending, RemoteTools};
use crate::wire::reply;
use crate::wire::run::Conn;
use crate::wire::transport::{CloseKind, Inbound, Outbound};
use airlock_broker::result::RunResult;
use airlock_broker::run::{Cancel, RunSpec};
use airlock_local::RunRequest;

use crate::wire::execute_sandbox::OneRun;

enum RunOutcome {
    Started(Box<RunResult>),
    NotStarted(ErrorObject),
}

struct Current {
    request_id: Id,
    run_id: String,
    task: JoinHandle<RunOutcome>,
    /// The request's trace span, ended once the response is sent.
    span: tracing::Span,
}

struct Session {
    shared: Arc<Shared>,
    info: Arc<ConnInfo>,
    outbound: mpsc::Sender<Outbound>,
    pending: Pending,
    conn_gone: CancelToken,
    /// The background processes this connection hears.
    attached: crate::wire::attached::Attached,
    current: Option<Current>,
    /// The session methods' tasks (each sends its own response), reaped as they end.
    tasks: JoinSet<()>,
    /// The session methods whose answers are not yet queued (`crate::wire::in_flight`).
    in_flight: InFlight,
}

/// Serve one connection until the peer is gone (or the server shuts down) and no run is left.
pub(crate) async fn serve(
    shared: Arc<Shared>,
    info: ConnInfo,
    mut inbound: mpsc::Receiver<Inbound>,
    outbound: mpsc::Sender<Outbound>,
) {
    let span =
        tracing::info_span!("conn", id = %info.id, peer = %info.peer, transport = info.transport);
    async move {
        tracing::info!("connection opened");
        let mut s = Session {
            shared,
            info: Arc::new(info),
            outbound,
            pending: Pending::default(),
            conn_gone: CancelToken::new(),
            attached: crate::wire::attached::Attached::default(),
            current: None,
            tasks: JoinSet::new(),
            in_flight: InFlight::default(),
        };
        let mut close: Option<CloseKind> = None;
        let mut reading = true;
        loop {
            if close.is_some() && s.current.is_none() && s.tasks.is_empty() {
                break;
            }
            let shutdown = s.shared.shutdown.clone();
            tokio::select! {
                joined = async {
                    match s.current.as_mut() {
                        Some(c) => (&mut c.task).await,
                        None => std::future::pending().await,
                    }
                }, if s.current.is_some() => {
                    s.finish(joined).await;
                }
                Some(done) = s.tasks.join_next(), if !s.tasks.is_empty() => reaped(done),
                ev = inbound.recv(), if reading => match ev {
                    None => {
                        tracing::info!("peer closed the connection");
                        reading = false;
                        s.conn_gone.cancel();
                        close.get_or_insert(CloseKind::Normal);
                    }
                    Some(Inbound::Message(m)) => {
                        // A request waits for its tenant's turn; answers to the server's own
                        // requests (tool results) never do.
                        let answer = matches!(m, Message::Response(_));
                        if let (Some(r), false) = (&s.shared.config.request_rates, answer) {
                            r.admit(&s.info.tenant).await;
                        }
                        s.handle(m).await;
                    }
                    Some(Inbound::Invalid(e)) => {
                        tracing::warn!(code = e.code, error = %e.message, "undecodable message");
                        s.send(Message::error(None, e)).await;
                    }
                    Some(Inbound::TooLarge { len, fatal }) => {
                        tracing::warn!(len, "message over the cap");
                        let msg = format!(
                            "message of {len} bytes exceeds the {} byte cap (a program must fit \
                             in one message)", airlock_protocol::DEFAULT_MAX_MESSAGE_BYTES);
                        s.send(reply::error(None, ErrorCode::ProgramTooLarge, msg)).await;
                        if fatal {
                            reading = false;
                            s.conn_gone.cancel();
                            close = Some(CloseKind::TooBig);
                        }
                    }
                    Some(Inbound::Fatal(e)) => {
                        tracing::warn!(error = %e.message, "framing broken; closing");
                        s.send(Message::error(None, e)).await;
                        reading = false;
                        s.conn_gone.cancel();
                        close = Some(CloseKind::Protocol);
                    }
                },
                () = shutdown.cancelled(), if close.is_none() => {
                    tracing::info!("shutting down the connection");
                    close = Some(CloseKind::GoingAway);
                }
            }
        }
        s.send(Outbound::Close(close.unwrap_or(CloseKind::Normal)))
            .await;
        tracing::info!("connection closed");
    }
    .instrument(span)
    .await
}

impl Session {
    async fn send(&self, out: impl Into<Outbound>) {
        let out = out.into();
        if let Outbound::Message(m) = &out {
            self.shared.config.metrics.answered(m);
        }
        // A failed send means the writer is gone with the peer; nothing else can be done.
        let _ = self.outbound.send(out).await;
    }

    async fn finish(&mut self, joined: Result<RunOutcome, tokio::task::JoinError>) {
        let Some(current) = self.current.take() else {
            return;
        };
        let msg = match joined {
            Ok(RunOutcome::Started(result)) => {
                reply::run_result(current.request_id, &current.run_id, *result)
            }
            Ok(RunOutcome::NotStarted(e)) => Message::error(current.request_id, e),
            Err(e) => {
                tracing::error!(run_id = %current.run_id, error = %e, "run task failed");
                reply::error(
                    Some(current.request_id),
                    ErrorCode::InternalError,
                    "the run task failed",
                )
            }
        };
        crate::telemetry::request_span::record_answer(&current.span, &msg);
        self.send(msg).await;
    }

    async fn handle(&mut self, mut m: Message) {
        // The client's trace context comes off the params before any method parses them.
        let parent = match &mut m {
            Message::Request(req) => crate::telemetry::trace_context::take(&mut req.params),
            _ => None,
        };
        match m {
            Message::Request(req) if req.method == airlock_protocol::method::EXECUTE => {
                let span = crate::telemetry::request_span::request(&req.method, &self.info, parent);
                if let Err(refused) = self.execute(req, &span) {
                    crate::telemetry::request_span::record_answer(&span, &refused);
                    self.send(refused).await;
                }
            }
            Message::Request(req) if req.method == airlock_protocol::method::RUN_CANCEL => {
                // Always served, taking no slot: answered here, at once.
                let span = crate::telemetry::request_span::request(&req.method, &self.info, parent);
                let params = req.params.unwrap_or(serde_json::Value::Null);
                let msg = dispatch::run_cancel(&self.shared, &self.info.tenant, req.id, params);
                crate::telemetry::request_span::record_answer(&span, &msg);
                self.send(msg).await;
            }
            Message::Request(req) if dispatch::is_session_method(&req.method) => {
                // At most MAX_IN_FLIGHT session methods per connection wait on their answers
                // (a client pipelining requests without reading answers holds a bounded part
                // of the server); one more is refused at once.
                let Some(slot) = self.in_flight.take() else {
                    let msg = format!(
                        "{MAX_IN_FLIGHT} requests are in flight on this connection; wait for \
                         an answer"
                    );
                    let refused = reply::error(Some(req.id), ErrorCode::OverCapacity, msg);
                    return self.send(refused).await;
                };
                // Tasks that answered are reaped here too, not only when the loop's turn
                // comes: a client's steady stream of requests never piles them up.
                while let Some(done) = self.tasks.try_join_next() {
                    reaped(done);
                }
                let conn = Conn {
                    shared: self.shared.clone(),
                    info: self.info.clone(),
                    outbound: self.outbound.clone(),
                    pending: self.pending.clone(),
                    conn_gone: self.conn_gone.clone(),
                    attached: self.attached.clone(),
                    span: crate::telemetry::request_span::request(&req.method, &self.info, parent),
                    slot,
                };
                dispatch::dispatch(&conn, req, &mut self.tasks);
            }
            Message::Request(req) => {
                let shown: String = req
                    .method
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(64)
                    .collect();
                let msg = format!("the broker serves no method {shown:?}");
                self.send(reply::error(Some(req.id), ErrorCode::MethodNotFound, msg))
                    .await;
            }
            Message::Notification(n) => {
                tracing::debug!(method = %n.method.chars().take(64).collect::<String>(), "notification ignored");
            }
            Message::Response(resp) => self.answer(resp),
        }
    }

    fn answer(&self, resp: Response) {
        match resp.id {
            Some(Id::String(id)) => {
                if !self.pending.deliver(&id, resp.outcome) {
                    tracing::debug!(id = %id.chars().take(64).collect::<String>(), "answer to no pending call (late or unknown)");
                }
            }
            Some(Id::Number(n)) => {
                tracing::debug!(id = n, "answer to no pending call (broker ids are strings)")
            }
            None => {
                let why = resp
                    .outcome
                    .err()
                    .map(|e| e.message.chars().take(256).collect::<String>());
                tracing::warn!(error = ?why, "orchestrator reported an error about an unknown message");
            }
        }
    }

    /// Starts an `execute` run, or answers why not (the refusal, to be sent).
    fn execute(&mut self, req: Request, trace: &tracing::Span) -> Result<(), Message> {
        let id = req.id;
        if self.shared.shutdown.is_cancelled() {
            let msg = "the broker is shutting down; the run was not started";
            return Err(reply::error(Some(id), ErrorCode::Shutdown, msg));
        }
        if let Some(e) = crate::server::drain::refusal(&self.shared, &req.method) {
            return Err(Message::error(id, e));
        }
        if let Some(c) = &self.current {
            let msg = format!(
                "run {} is still in flight on this connection; one run at a time",
                c.run_id
            );
            return Err(reply::error(Some(id), ErrorCode::Busy, msg));
        }
        let p = match params::parse(req.params) {
            Ok(p) => p,
            Err(ParamsError::Invalid(m)) => {
                return Err(reply::error(Some(id), ErrorCode::InvalidParams, m));
            }
            Err(ParamsError::TooLarge(m)) => {
                return Err(reply::error(Some(id), ErrorCode::ProgramTooLarge, m));
            }
        };
        let config = &self.shared.config;
        let limits = match config.ceilings.resolve(&config.defaults, &p.limits) {
            Ok(l) => l,
            Err(refusal) => {
                return Err(reply::error(
                    Some(id),
                    ErrorCode::InvalidParams,
                    refusal.to_string(),
                ));
            }
        };
        let run_id = self.shared.mint_run_id();
        let (workload, kind) = p.program.into_workload(config.interpreter.clone());
        let uses_tools = p.tools.as_ref().is_none_or(|t| !t.is_empty());
        if let Some(admit) = &config.admission {
            if let Err(why) = (admit.0)(&workload, uses_tools) {
                return Err(reply::error(Some(id), ErrorCode::SandboxRefused, why));
            }
        }
        let tools = RemoteTools::new(
            run_id.clone(),
            self.outbound.clone(),
            self.pending.clone(),
            config.tool_timeout,
            p.tools,
        );
        let call = ExecuteCall {
            workload,
            limits,
            env: p.env,
            uses_tools,
        };
        trace.record("airlock.run_id", run_id.as_str());
        let span = tracing::info_span!("run", run_id = %run_id);
        // `run.cancel {run_id}` reaches an `execute` run too.
        let cancel = CancelToken::new();
        if let Some(sbs) = &self.shared.config.sandboxes {
            sbs.run_started(&self.info.tenant, &run_id, cancel.clone());
        }
        let job = Job {
            shared: self.shared.clone(),
            info: self.info.clone(),
            run_id: run_id.clone(),
            kind,
            conn_gone: self.conn_gone.clone(),
            cancel,
            trace: trace.clone(),
        };
        let task = tokio::spawn(job.run(call, tools).instrument(span));
        self.current = Some(Current {
            request_id: id,
            run_id,
            task,
            span: trace.clone(),
        });
        Ok(())
    }
}

/// A session method's task, ended: a panic (a bug; its request was still answered) is logged.
fn reaped(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        tracing::error!(error = %e, "a session method task failed");
    }
}

impl From<Message> for Outbound {
    fn from(m: Message) -> Self {
        Outbound::Message(m)
    }
}

struct Job {
    shared: Arc<Shared>,
    info: Arc<ConnInfo>,
    run_id: String,
    kind: &'static str,
    conn_gone: CancelToken,
    cancel: CancelToken,
    /// The request's trace span: the parent of its tool calls' spans.
    trace: tracing::Span,
}

impl Job {
    /// Ends the run (or its wait for a slot) when the server shuts down, the connection goes,
    /// or `run.cancel` names it.
    fn cancel(&self) -> Cancel {
        let shutdown = self.shared.shutdown.clone();
        let conn_gone = self.conn_gone.clone();
        let asked = self.cancel.clone();
        Box::pin(async move {
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = conn_gone.cancelled() => {}
                () = asked.cancelled() => {}
            }
        })
    }

    /// The run, through the runner: in a call-scoped sandbox the router made for it (when the
    /// server holds sandboxes), else with a root of its own.
    async fn run_in_sandbox(
        &self,
        call: ExecuteCall,
        tools: &RemoteTools,
    ) -> Result<RunResult, ErrorObject> {
        let config = &self.shared.config;
        let tools = crate::telemetry::traced_tools::TracedTools::new(
            tools,
            self.trace.clone(),
            &self.run_id,
        );
        let tools = &tools;
        let Some(sbs) = &config.sandboxes else {
            let spec = RunSpec {
                workload: call.workload,
                limits: call.limits,
                sandbox: None,
                image: None,
                cwd: None,
                env: call.env,
                executor: config.executor.clone(),
                output: None,
                restricted: None,
            };
            let job = airlock_broker::Job {
                spec,
                tools,
                cancel: self.cancel(),
                sandbox: &self.run_id,
                kernel: None,
            };
            return config
                .runner
                .run(job)
                .await
                .map_err(|refusal| ErrorObject::new(ErrorCode::OverCapacity, refusal.to_string()));
        };
        let needs = crate::wire::execute_sandbox::needs(&call.workload, call.uses_tools);
        let one = OneRun::acquire(sbs, &self.run_id, needs).await?;
        let mut req = RunRequest::new(call.workload, call.limits.timeout, call.env);
        req.limits = Some(call.limits);
        req.tools = Some(tools);
        req.cancel = Some(self.cancel());
        req.last = true;
        let result = one.sandbox.run_request(req).await;
        one.end(sbs).await;
        result.map_err(|e| crate::wire::files_api::file_error(&e))
    }
}

/// Forgets a run's cancel token however its job ends.
struct Registered(Arc<Shared>, String);

impl Drop for Registered {
    fn drop(&mut self) {
        self.0.run_ended(&self.1);
    }
}

/// What an `execute` asked for.
struct ExecuteCall {
    workload: airlock_broker::Workload,
    limits: airlock_broker::Limits,
    env: Vec<(String, String)>,
    uses_tools: bool,
}

impl Job {
    async fn run(self, call: ExecuteCall, tools: RemoteTools) -> RunOutcome {
        let _registered = Registered(self.shared.clone(), self.run_id.clone());
        let limits = call.limits.clone();
        tracing::info!(
            workload = self.kind,
            timeout_s = limits.timeout.as_secs_f64(),
            memory_mb = limits.memory_bytes / (1024 * 1024),
            "run asked"
        );
        let result = match self.run_in_sandbox(call, &tools).await {
            Ok(r) => r,
            Err(e) => return RunOutcome::NotStarted(e),
        };
        // A run cancelled while it waited for a slot never started: no record, as before it.
        if result.cancelled_before_start() {
            return RunOutcome::NotStarted(ErrorObject::new(
                ErrorCode::Shutdown,
                "the run was cancelled (connection closed or server shutting down) before it \
                 started",
            ));
        }
        let queued_ms = result.queued_ms;
        tracing::info!(
            status = result.status.as_str(),
            wall_time_ms = result.wall_time_ms,
            peak_rss_bytes = result.peak_rss_bytes,
            tool_calls = result.tool_calls,
            "run ended"
        );
        let calls = tools.take_calls();
        self.shared.config.metrics.run_ended(&result, &calls);
        if let Some(sink) = &self.shared.config.audit {
            let facts = RunFacts {
                run_id: &self.run_id,
                connection: &self.info.id,
                peer: &self.info.peer,
                tenant: &self.info.tenant,
                transport: self.info.transport,
                workload: self.kind,
                limits: &limits,
                queued_ms,
            };
            sink.write(&AuditRecord::new(&facts, calls, &result));
        }
        RunOutcome::Started(Box::new(result))
    }
}
