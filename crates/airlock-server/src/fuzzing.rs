//! Every session method's params through the functions a session runs on them, in the same
//! order, up to the point where a sandbox or a run would be touched: the entry point of the
//! `session_params` fuzz target (`fuzz/`); and a WebSocket connection's upgrade and reads, the
//! entry point of the `ws_handshake` target. Hidden from the docs; not an API.
use std::net::SocketAddr;

use airlock_broker::Limits;
use airlock_policy::{GuestRelPath, HostPolicy};
use airlock_protocol::{method as m, ErrorObject};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use crate::ceilings::Ceilings;
use crate::tenancy::auth::Auth;
use crate::wire::transport::Inbound;
use crate::wire::{dispatch, files_api, outputs_api, params, run, sandbox_list, spec};

/// Every session method, the process methods included.
pub static SESSION_METHODS: std::sync::LazyLock<Vec<&'static str>> =
    std::sync::LazyLock::new(|| {
        let mut all = crate::wire::dispatch::SESSION_METHODS.to_vec();
        all.extend(crate::wire::process_methods::PROCESS_METHODS);
        all
    });
pub use crate::wire::files_api::MAX_CHUNK;

/// What a method's params were accepted as: the facts the fuzz oracles check.
#[derive(Debug, Default)]
pub struct Accepted {
    /// Every guest path the params name.
    pub paths: Vec<GuestRelPath>,
    /// The decoded bytes of a `files.write`.
    pub write_bytes: Option<usize>,
    /// The length of a `files.read`.
    pub read_len: Option<u64>,
    /// The resolved limits of a run or a sandbox.
    pub limits: Option<Limits>,
}

fn msg(e: ErrorObject) -> String {
    e.message
}

/// Parse `params` as the session does for `method` (with the default ceilings and limits).
pub fn session_params(
    method: &str,
    params: Option<Value>,
    host: &HostPolicy,
) -> Result<Accepted, String> {
    let ceilings = Ceilings::default();
    let defaults = Limits::default();
    let resolve = |req| ceilings.resolve(&defaults, req).map_err(|r| r.to_string());
    let mut out = Accepted::default();
    if method == m::EXECUTE {
        let p = params::parse(params).map_err(|e| e.to_string())?;
        out.limits = Some(resolve(&p.limits)?);
        return Ok(out);
    }
    let params = params.unwrap_or(Value::Null);
    match method {
        m::SANDBOX_CREATE => {
            let p = spec::parse_create(Some(params), host)?;
            out.paths = p.outputs.declared.iter().map(|d| d.path.clone()).collect();
            out.limits = Some(resolve(&p.limits)?);
            return Ok(out);
        }
        m::SCOPE_DISPOSE => return dispatch::parse_scope(params).map(|_| out).map_err(msg),
        m::RUN_CANCEL => return dispatch::parse_cancel(params).map(|_| out).map_err(msg),
        m::SANDBOX_LIST => return sandbox_list::parse_list(params).map(|()| out).map_err(msg),
        m if crate::wire::process_methods::is_process_method(m) => {
            crate::wire::process_api::sandbox_of(&params)
                .ok_or_else(|| "params must carry `sandbox_id` or a `process_id`".to_string())?;
            return crate::wire::process_params::check(m, params)
                .map(|()| out)
                .map_err(msg);
        }
        _ => {}
    }
    dispatch::sandbox_id(&params).map_err(msg)?;
    match method {
        m::SANDBOX_CONNECT | m::SANDBOX_DISPOSE => {
            dispatch::id_only(method, params).map_err(msg)?
        }
        m::SANDBOX_SET_TIMEOUT => {
            sandbox_list::parse_set_timeout(params).map_err(msg)?;
        }
        m::SANDBOX_SET_LIFETIME => {
            sandbox_list::parse_set_lifetime(params).map_err(msg)?;
        }
        m::SANDBOX_RUN_CODE | m::SANDBOX_EXEC => {
            let call = run::parse(method, params).map_err(msg)?;
            out.limits = Some(resolve(&call.requested_limits())?);
        }
        m::FILES_WRITE => {
            let w = files_api::parse_write(params).map_err(msg)?;
            out.paths.push(w.rel);
            out.write_bytes = Some(w.data.len());
        }
        m::FILES_READ => {
            let r = files_api::parse_read(params).map_err(msg)?;
            out.paths.push(r.rel);
            out.read_len = Some(r.len);
        }
        m::FILES_LIST | m::FILES_STAT | m::FILES_REMOVE => {
            out.paths
                .extend(files_api::parse_path(method, params).map_err(msg)?);
        }
        m::FILES_MAKE_DIR => {
            let (rel, _) = crate::wire::dir_api::parse_make_dir(params).map_err(msg)?;
            out.paths.push(rel);
        }
        m::FILES_WRITE_MANY => {
            let files = crate::wire::dir_api::parse_write_many(params).map_err(msg)?;
            out.write_bytes = Some(files.iter().map(|(_, d)| d.len()).sum());
            out.paths.extend(files.into_iter().map(|(p, _)| p));
        }
        m::FILES_RENAME => {
            let (from, to) = crate::wire::dir_api::parse_rename(params).map_err(msg)?;
            out.paths.extend([from, to]);
        }
        m::SANDBOX_EXPOSE | m::SANDBOX_UNEXPOSE => {
            crate::wire::expose_api::parse(method, params).map_err(msg)?;
        }
        m::OUTPUTS_COLLECT => {
            let named = outputs_api::parse_collect(params).map_err(msg)?;
            let declared = outputs_api::declared(named.unwrap_or_default())?;
            out.paths = declared.into_iter().map(|d| d.path).collect();
        }
        _ => return Err(format!("{method} is not a session method")),
    }
    Ok(out)
}

/// A WebSocket connection on `stream` as `airlock serve --listen` serves it: the upgrade (the
/// token check, the frame caps), then everything the session would receive from it, read to
/// its end (at most `max_events`; the reader waits for room beyond that). Err: the upgrade
/// failed (what the server wrote back is in `stream`).
pub async fn ws_connection<S>(
    stream: S,
    auth: Auth,
    max_events: usize,
) -> Result<Vec<Inbound>, String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let peer = SocketAddr::from(([127, 0, 0, 1], 0));
    let (ws, _tenant) = crate::net::ws::handshake(stream, auth, peer)
        .await
        .map_err(|e| e.to_string())?;
    let (_sink, reads) = ws.split();
    let (tx, mut rx) = mpsc::channel(max_events.max(1));
    crate::net::ws::read_loop(reads, tx).await;
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }
    Ok(events)
}
