//! The session methods (`sandbox.*`, `files.*`, `scope.dispose`, `run.cancel`): each request
//! becomes its own task that sends exactly one response, so a long file transfer or run never
//! holds up the connection's other requests.
//!
//! Every method that names a sandbox is checked on every call: the sandbox must be live, and
//! the method's capability must be in the spec it was created with.
use std::sync::Arc;

use airlock_protocol::method as m;
use airlock_protocol::{ErrorCode, ErrorObject, Id, Message, Request};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::task::JoinSet;

use crate::registry::pause::Remake;
use crate::registry::sandboxes::{no_sandbox, Held, Sandboxes};
use crate::tenancy::tenant::Tenant;
use crate::wire::answers;
use crate::wire::files_api;
use crate::wire::run::{self, Conn};
use crate::wire::snapshot_api::Remade;
use crate::wire::spec;

/// The session methods (everything but `execute`), besides the process methods
/// (`crate::wire::process_methods`).
pub const SESSION_METHODS: [&str; 27] = [
    m::SANDBOX_CREATE,
    m::SANDBOX_CONNECT,
    m::SANDBOX_RUN_CODE,
    m::SANDBOX_EXEC,
    m::SANDBOX_DISPOSE,
    m::SCOPE_DISPOSE,
    m::RUN_CANCEL,
    m::FILES_WRITE,
    m::FILES_READ,
    m::FILES_LIST,
    m::FILES_STAT,
    m::FILES_REMOVE,
    m::FILES_MAKE_DIR,
    m::FILES_RENAME,
    m::FILES_WRITE_MANY,
    m::OUTPUTS_COLLECT,
    m::SANDBOX_EXPOSE,
    m::SANDBOX_UNEXPOSE,
    m::SANDBOX_LIST,
    m::SANDBOX_SET_TIMEOUT,
    m::SANDBOX_SET_LIFETIME,
    m::SANDBOX_SNAPSHOT,
    m::SANDBOX_PAUSE,
    m::SANDBOX_RESUME,
    m::SANDBOX_FORK,
    m::SNAPSHOT_LIST,
    m::SNAPSHOT_REMOVE,
];

/// Whether `method` is one of the session methods.
#[must_use]
pub fn is_session_method(method: &str) -> bool {
    SESSION_METHODS.contains(&method) || crate::wire::process_methods::is_process_method(method)
}

fn invalid(msg: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::InvalidParams, msg)
}

/// The answer to request `id`.
fn message(id: Id, outcome: Result<Value, ErrorObject>) -> Message {
    match outcome {
        Ok(v) => Message::success(id, v),
        Err(e) => Message::error(id, e),
    }
}

async fn respond(conn: &Conn, id: Id, outcome: Result<Value, ErrorObject>) {
    conn.answer(message(id, outcome)).await;
}

/// A session method on a server that holds no sandboxes.
fn not_served(method: &str) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::MethodNotFound,
        format!("{method} is not served: this server holds no sandboxes"),
    )
}

/// The `sandbox_id` member every sandbox method carries.
pub(crate) fn sandbox_id(params: &Value) -> Result<String, ErrorObject> {
    params
        .get("sandbox_id")
        .and_then(Value::as_str)
        .map(|s| s.chars().take(128).collect())
        .ok_or_else(|| invalid("params must be an object with a string `sandbox_id`"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScopeParams {
    scope: String,
    thread_id: String,
}

/// `sandbox.connect` and `sandbox.dispose` take the id and nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdOnly {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CancelParams {
    run_id: Option<String>,
    sandbox_id: Option<String>,
}

/// Serve one session request; its response is sent by a task spawned into `tasks`. A task of
/// the request's that panics (a bug) still answers it, `internal_error`: a client waiting on
/// the request is never left without a response.
pub fn dispatch(conn: &Conn, req: Request, tasks: &mut JoinSet<()>) {
    let conn = conn.clone();
    let span = conn.span.clone();
    let task = async move {
        let id = req.id.clone();
        let mut inner = JoinSet::new();
        serve(&conn, req, &mut inner);
        answer_panics(&conn, &id, &mut inner).await;
    };
    tasks.spawn(tracing::Instrument::instrument(task, span));
}

/// Waits for a request's tasks; one that panicked (a bug) is answered `internal_error`.
async fn answer_panics(conn: &Conn, id: &Id, inner: &mut JoinSet<()>) {
    while let Some(done) = inner.join_next().await {
        if let Err(e) = done {
            tracing::error!(error = %e, "a session method task failed");
            let e = ErrorObject::new(ErrorCode::InternalError, "the request's task failed");
            respond(conn, id.clone(), Err(e)).await;
        }
    }
}

fn serve(conn: &Conn, req: Request, tasks: &mut JoinSet<()>) {
    let conn = conn.clone();
    let Request { id, method, params } = req;
    let params = params.unwrap_or(Value::Null);
    let Some(sbs) = conn.shared.config.sandboxes.clone() else {
        let e = not_served(&method);
        tasks.spawn(async move { respond(&conn, id, Err(e)).await });
        return;
    };
    if conn.shared.shutdown.is_cancelled() {
        let e = ErrorObject::new(ErrorCode::Shutdown, "the broker is shutting down");
        tasks.spawn(async move { respond(&conn, id, Err(e)).await });
        return;
    }
    if let Some(e) = crate::server::drain::refusal(&conn.shared, &method) {
        tasks.spawn(async move { respond(&conn, id, Err(e)).await });
        return;
    }
    match method.as_str() {
        m::SANDBOX_CREATE => {
            tasks.spawn(async move {
                let r = if params.get("from_snapshot").is_some() {
                    crate::wire::snapshot_api::create_from(&conn, &sbs, params).await
                } else {
                    create(&conn, &sbs, params).await
                };
                respond(&conn, id, r).await;
            });
        }
        m::SNAPSHOT_LIST => {
            let r = crate::wire::snapshot_api::list(&sbs, &conn.info.tenant, params);
            tasks.spawn(async move { respond(&conn, id, r).await });
        }
        m::SNAPSHOT_REMOVE => {
            let r = crate::wire::snapshot_api::remove(&sbs, &conn.info.tenant, params);
            tasks.spawn(async move { respond(&conn, id, r).await });
        }
        m::SANDBOX_PAUSE => {
            tasks.spawn(async move {
                let r = match only_sandbox_id(&method, params) {
                    Ok(sid) if !sbs.owns(&conn.info.tenant, &sid) => Err(no_sandbox(&sid).into()),
                    // A client's pause reserves its place in its tenant's max_snapshots
                    // until its paused record is written (or it failed); the server's own
                    // (idle reclaim, the drain) never loses a sandbox to it.
                    Ok(sid) => match sbs.reserve_snapshot(&conn.info.tenant) {
                        Err(r) => Err(r.to_error().into()),
                        Ok(quota) => sbs
                            .pause_within(&sid, Some(quota))
                            .await
                            .map(|c| answers::paused(&c))
                            .map_err(Into::into),
                    },
                    Err(e) => Err(e),
                };
                respond(&conn, id, r).await;
            });
        }
        m::SANDBOX_RESUME => {
            tasks.spawn(async move {
                let r = match only_sandbox_id(&method, params) {
                    Ok(sid) if !sbs.owns(&conn.info.tenant, &sid) => Err(no_sandbox(&sid).into()),
                    Ok(sid) => sbs
                        .resume(&sid, &Remade(&conn))
                        .await
                        .map(|h| answers::describe(&h, sbs.isolation()))
                        .map_err(Into::into),
                    Err(e) => Err(e),
                };
                respond(&conn, id, r).await;
            });
        }
        m::SCOPE_DISPOSE => {
            tasks.spawn(async move {
                let r = match parse_scope(params) {
                    Ok(p) => Ok(answers::scope_disposed(
                        &sbs.dispose_scope(&conn.info.tenant, &p.scope, &p.thread_id)
                            .await,
                    )),
                    Err(e) => Err(e),
                };
                respond(&conn, id, r).await;
            });
        }
        m::SANDBOX_LIST => {
            let visible = crate::wire::sandbox_list::visible_to(&conn);
            let r = crate::wire::sandbox_list::parse_list(params)
                .map(|()| crate::wire::sandbox_list::list(&sbs, &visible));
            tasks.spawn(async move { respond(&conn, id, r).await });
        }
        _ => on_sandbox(conn, &sbs, id, method, params, tasks),
    }
}

/// `run.cancel`'s answer, made at once: the session sends it itself (so a client flooding
/// cancels without reading answers is held back by the connection's outbound queue, like any
/// answer the session sends) and it never waits behind the in-flight cap.
pub(crate) fn run_cancel(
    shared: &crate::server::Shared,
    tenant: &Tenant,
    id: Id,
    params: Value,
) -> Message {
    let outcome = match &shared.config.sandboxes {
        Some(sbs) => parse_cancel(params).and_then(|p| cancel(sbs, tenant, p)),
        None => Err(not_served(m::RUN_CANCEL)),
    };
    message(id, outcome)
}

/// `scope.dispose` params; the keyless scope is reserved.
pub(crate) fn parse_scope(params: Value) -> Result<ScopeParams, ErrorObject> {
    match serde_json::from_value::<ScopeParams>(params) {
        Ok(p) if p.scope == spec::KEYLESS_SCOPE => Err(invalid(format!(
            "scope {:?} is reserved (dispose a keyless sandbox by its id)",
            p.scope
        ))),
        Ok(p) => Ok(p),
        Err(e) => Err(invalid(format!("scope.dispose params: {e}"))),
    }
}

/// `run.cancel` params.
pub(crate) fn parse_cancel(params: Value) -> Result<CancelParams, ErrorObject> {
    serde_json::from_value::<CancelParams>(params)
        .map_err(|e| invalid(format!("run.cancel params: {e}")))
}

/// `run.cancel` by `run_id`, or by `sandbox_id` (its run in flight: one per sandbox, so a
/// client need not have seen the run's id).
fn cancel(sbs: &Sandboxes, tenant: &Tenant, p: CancelParams) -> Result<Value, ErrorObject> {
    let run_id = match (p.run_id, p.sandbox_id) {
        (Some(r), None) => r,
        (None, Some(s)) => sbs.get_for(tenant, &s)?.running().ok_or_else(|| {
            ErrorObject::new(
                ErrorCode::NotFound,
                format!("sandbox {s} has no run in flight"),
            )
        })?,
        _ => return Err(invalid("run.cancel takes `run_id` or `sandbox_id`")),
    };
    sbs.cancel_run(tenant, &run_id)?;
    Ok(json!({ "run_id": run_id }))
}

async fn create(conn: &Conn, sbs: &Sandboxes, params: Value) -> Result<Value, ErrorObject> {
    // A key whose sandbox is paused: it is resumed, then the create finds it live under its
    // key (the spec is compared as for any live sandbox).
    let tenant = &conn.info.tenant;
    let key = params.get("key").filter(|k| !k.is_null());
    if let Some(sid) = key.and_then(|k| sbs.paused_by(tenant, |raw| raw.0.get("key") == Some(k))) {
        sbs.resume(&sid, &Remade(conn)).await?;
    }
    let p = spec::parse_create(Some(params), sbs.host_policy())
        .and_then(|p| p.for_tenant(tenant))
        .map_err(invalid)?;
    let limits = Remade(conn).limits(&p)?;
    let held = sbs.create(p, limits).await?;
    Ok(answers::describe(&held, sbs.isolation()))
}

/// A method on one live sandbox: looked up, touched and capability-checked before it runs.
fn on_sandbox(
    conn: Conn,
    sbs: &Arc<Sandboxes>,
    id: Id,
    method: String,
    params: Value,
    tasks: &mut JoinSet<()>,
) {
    let held = if crate::wire::process_methods::is_process_method(&method) {
        crate::wire::process_api::sandbox_of(&params)
            .ok_or_else(|| invalid("params must carry `sandbox_id` or a `process_id`"))
    } else {
        sandbox_id(&params)
    };
    let sid = match held {
        Ok(sid) => sid,
        Err(e) => {
            tasks.spawn(async move { respond(&conn, id, Err(e)).await });
            return;
        }
    };
    // Recorded once the id names the tenant's sandbox: a client-chosen string that names
    // none (any length, up to the message cap) never reaches the exported span.
    let held = match sbs.get_for(&conn.info.tenant, &sid) {
        Ok(h) => h,
        Err(_) if sbs.owns(&conn.info.tenant, &sid) => {
            crate::telemetry::request_span::record_sandbox(&conn.span, &sid);
            on_paused(conn, sbs, id, method, params, sid, tasks);
            return;
        }
        Err(e) => {
            tasks.spawn(async move { respond(&conn, id, Err(e.into())).await });
            return;
        }
    };
    crate::telemetry::request_span::record_sandbox(&conn.span, &held.id);
    if let Some(e) = spec::needs(&method).and_then(|cap| held.allows(cap).err()) {
        tasks.spawn(async move { respond(&conn, id, Err(e.into())).await });
        return;
    }
    // Only a call the sandbox serves postpones its idle reclaim.
    held.touch();
    let sbs = Arc::clone(sbs);
    match method.as_str() {
        m::SANDBOX_RUN_CODE | m::SANDBOX_EXEC => start_run(conn, &held, id, &method, params, tasks),
        _ => {
            tasks.spawn(async move {
                let r = match method.as_str() {
                    m::SANDBOX_CONNECT => id_only(&method, params).map(|()| {
                        crate::wire::process_api::attach_all(&conn, &held);
                        answers::describe(&held, sbs.isolation())
                    }),
                    m::SANDBOX_DISPOSE => dispose(&sbs, &method, params, &held.id).await,
                    m::SANDBOX_SNAPSHOT => match id_only(&method, params) {
                        Ok(()) => sbs
                            .snapshot(&held)
                            .await
                            .map(|c| answers::captured(&c))
                            .map_err(Into::into),
                        Err(e) => Err(e),
                    },
                    m::SANDBOX_FORK => {
                        crate::wire::snapshot_api::fork(&conn, &sbs, &held, params).await
                    }
                    m::SANDBOX_SET_TIMEOUT => crate::wire::sandbox_list::set_timeout(&held, params)
                        .map(|()| answers::describe(&held, sbs.isolation())),
                    m::SANDBOX_SET_LIFETIME => {
                        crate::wire::sandbox_list::set_lifetime(&held, params)
                            .map(|()| answers::describe(&held, sbs.isolation()))
                    }
                    m::FILES_WRITE => {
                        files_api::write(&held, params, &conn.shared.config.metrics).await
                    }
                    m::FILES_READ => {
                        files_api::read(&held, params, &conn.shared.config.metrics).await
                    }
                    m::FILES_LIST => files_api::list(&held, params).await,
                    m::FILES_STAT => files_api::stat(&held, params).await,
                    m::FILES_REMOVE => files_api::remove(&held, params).await,
                    m::FILES_MAKE_DIR => crate::wire::dir_api::make_dir(&held, params).await,
                    m::FILES_RENAME => crate::wire::dir_api::rename(&held, params).await,
                    m::FILES_WRITE_MANY => {
                        let metrics = &conn.shared.config.metrics;
                        crate::wire::dir_api::write_many(&held, params, metrics).await
                    }
                    m::OUTPUTS_COLLECT => {
                        crate::wire::outputs_api::collect(&held, params, sbs.observers()).await
                    }
                    m if crate::wire::process_methods::is_process_method(m) => {
                        crate::wire::process_api::serve(&conn, &held, m, params).await
                    }
                    m::SANDBOX_EXPOSE => {
                        let listen = conn.shared.listen.get().copied();
                        crate::wire::expose_api::expose(listen, &sbs, &held, params)
                    }
                    m::SANDBOX_UNEXPOSE => crate::wire::expose_api::unexpose(&sbs, &held, params),
                    _ => Err(ErrorObject::new(
                        ErrorCode::MethodNotFound,
                        "unknown method",
                    )),
                };
                respond(&conn, id, r).await;
            });
        }
    }
}

/// A call on a paused sandbox: `sandbox.dispose` forgets it; anything else resumes it first
/// and then runs as on a live one.
fn on_paused(
    conn: Conn,
    sbs: &Arc<Sandboxes>,
    id: Id,
    method: String,
    params: Value,
    sid: String,
    tasks: &mut JoinSet<()>,
) {
    let sbs = Arc::clone(sbs);
    tasks.spawn(async move {
        if method == m::SANDBOX_DISPOSE {
            let r = dispose(&sbs, &method, params, &sid).await;
            return respond(&conn, id, r).await;
        }
        // A resume makes a sandbox: nothing new while draining.
        if crate::server::drain::is_draining(&conn.shared) {
            return respond(&conn, id, Err(crate::server::drain::draining_error())).await;
        }
        if let Err(e) = sbs.resume(&sid, &Remade(&conn)).await {
            return respond(&conn, id, Err(e.into())).await;
        }
        let mut inner = JoinSet::new();
        on_sandbox(conn.clone(), &sbs, id.clone(), method, params, &mut inner);
        answer_panics(&conn, &id, &mut inner).await;
    });
}

/// The `sandbox_id` of params that carry nothing else.
fn only_sandbox_id(method: &str, params: Value) -> Result<String, ErrorObject> {
    let sid = sandbox_id(&params)?;
    id_only(method, params)?;
    Ok(sid)
}

/// Refuses members other than `sandbox_id` (unknown members are `invalid_params`).
/// `sandbox.dispose` of `sid`, live or paused.
async fn dispose(
    sbs: &Sandboxes,
    method: &str,
    params: Value,
    sid: &str,
) -> Result<Value, ErrorObject> {
    id_only(method, params)?;
    Ok(answers::disposed(&sbs.dispose(sid).await?))
}

pub(crate) fn id_only(method: &str, params: Value) -> Result<(), ErrorObject> {
    serde_json::from_value::<IdOnly>(params)
        .map(|_| ())
        .map_err(|e| invalid(format!("{method} params: {e}")))
}

fn start_run(
    conn: Conn,
    held: &Arc<Held>,
    id: Id,
    method: &str,
    params: Value,
    tasks: &mut JoinSet<()>,
) {
    let call = match run::parse(method, params) {
        Ok(c) => c,
        Err(e) => {
            tasks.spawn(async move { respond(&conn, id, Err(e)).await });
            return;
        }
    };
    // The tenant's concurrent-run quota: refused at once, never queued (`crate::registry::budget`).
    let ticket = match conn
        .shared
        .config
        .sandboxes
        .as_ref()
        .map(|s| s.budget().begin_run(&held.tenant))
    {
        Some(Err(r)) => {
            tasks.spawn(async move { respond(&conn, id, Err(r.to_error().into())).await });
            return;
        }
        Some(Ok(t)) => Some(t),
        None => None,
    };
    let run_id = conn.shared.mint_run_id();
    if let Err(e) = held.claim(&run_id) {
        tasks.spawn(async move { respond(&conn, id, Err(e.into())).await });
        return;
    }
    // Registered before the task starts, so `run.cancel` reaches the run from this moment.
    let token = crate::cancel::CancelToken::new();
    if let Some(s) = &conn.shared.config.sandboxes {
        s.run_started(&conn.info.tenant, &run_id, token.clone());
    }
    let held = Arc::clone(held);
    conn.span.record("airlock.run_id", run_id.as_str());
    let span = tracing::info_span!("run", run_id = %run_id, sandbox = %held.id);
    let run = run::run(conn, held, id, run_id, call, token, ticket);
    tasks.spawn(tracing::Instrument::instrument(run, span));
}
