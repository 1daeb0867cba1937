//! The operator endpoints: `GET /healthz`, `GET /readyz` and `GET /metrics`, one request per
//! connection, answered by the listener itself (the main one, routed by
//! [`crate::net::port_proxy::route`], and `--metrics-listen`'s).
//!
//! The request head is read bounded ([`MAX_HEAD`]) and parsed with the egress proxy's strict
//! grammar; the caller runs all of it under a pending-connection budget and its deadline, so
//! these requests hold no authorized connection slot and a slow one holds nothing longer than
//! a slow upgrade does. The health answers are fixed short bodies that say nothing but the
//! status (no version, count, tenant or reason). `/metrics` needs the server's bearer token on
//! the main listener ([`Door::Token`]: otherwise 401, as the upgrade refuses; on a server with
//! a tenants file 403 even then, since it names every tenant's sandboxes) and none on the
//! metrics listener ([`Door::Open`], which operators restrict by network).
//!
//! Not on hyper's server (issue 39, measured with hyper 1.13.0): a request here is read by the
//! same strict grammar as an exposed port's (`airlock_egress::head`, one listener, one grammar;
//! hyper's takes a bare LF the grammar refuses). Hyper also answers an HTTP/1.0 request
//! with an `HTTP/1.0` status line, which
//! `serve::ops_redteam::operator_routes_answer_one_request_per_connection_and_leak_nothing`
//! does not count as an answer, and writes `WWW-Authenticate` as `www-authenticate` or
//! `Www-Authenticate` (its map of a header's case is private), which
//! `serve::health::health_answers_fixed_bodies_and_metrics_needs_the_token_on_the_main_listener`
//! pins; every other assertion of `serve::health` and that red-team test passed on it.
use airlock_egress::head::{frame, read_head, HeadError};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::net::prefixed::Prefixed;
use crate::server::Shared;
use crate::tenancy::auth::Auth;

/// Largest request head read (a probe's or a scraper's head is a few hundred bytes).
pub const MAX_HEAD: usize = 8 * 1024;

/// Who may read `/metrics` on this listener.
#[derive(Debug, Clone, Copy)]
pub enum Door<'a> {
    /// Only a request with the server's bearer token (the main listener).
    Token(&'a Auth),
    /// Anyone who reaches the listener (`--metrics-listen`).
    Open,
}

/// One complete response, closing the connection.
struct Reply {
    status: &'static str,
    content_type: &'static str,
    extra: &'static str,
    body: String,
}

impl Reply {
    fn text(status: &'static str, body: &str) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            extra: "",
            body: format!("{body}\n"),
        }
    }

    fn bytes(&self, head_only: bool) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\
             Cache-Control: no-store\r\n\r\n",
            self.status,
            self.content_type,
            self.body.len(),
            self.extra
        )
        .into_bytes();
        if !head_only {
            out.extend_from_slice(self.body.as_bytes());
        }
        out
    }
}

/// The 401 of a `/metrics` request without the token: the upgrade's refusal, word for word.
fn unauthorized() -> Reply {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": airlock_protocol::ErrorCode::Unauthorized.code(),
                  "message": "unauthorized: missing or wrong bearer token"}
    });
    Reply {
        status: "401 Unauthorized",
        content_type: "application/json",
        extra: "WWW-Authenticate: Bearer\r\n",
        body: body.to_string(),
    }
}

/// The path of a target (its query dropped).
fn path_of(target: &str) -> &str {
    target.split('?').next().unwrap_or(target)
}

/// Whether exactly one `Authorization` header carries the server's token.
fn authorized(headers: &[(String, String)], auth: &Auth) -> bool {
    let mut values = headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("authorization"));
    match (values.next(), values.next()) {
        (Some((_, v)), None) => auth.allows(Some(v.as_bytes())),
        (None, None) => auth.allows(None),
        _ => false,
    }
}

/// The server's load now, for readiness.
fn load(shared: &Shared) -> crate::ops::health::Load {
    crate::ops::health::Load {
        draining: shared.draining.load(std::sync::atomic::Ordering::SeqCst),
        sandboxes: shared
            .config
            .sandboxes
            .as_ref()
            .map(|s| (s.len(), s.max_live())),
        connections: (
            shared.connections.available_permits(),
            shared.config.max_connections,
        ),
    }
}

/// The answer to one parsed request.
async fn answer(
    shared: &Shared,
    door: Door<'_>,
    path: &str,
    headers: &[(String, String)],
) -> Reply {
    match path {
        "/healthz" => Reply::text("200 OK", "ok"),
        "/readyz" => match shared.readiness.check(load(shared)).await {
            Ok(()) => Reply::text("200 OK", "ready"),
            Err(_) => Reply::text("503 Service Unavailable", "not ready"),
        },
        "/metrics" => {
            if let Door::Token(auth) = door {
                if !authorized(headers, auth) {
                    return unauthorized();
                }
                // Any tenant's token would read every tenant's sandboxes: the metrics of a
                // server with a tenants file are the metrics listener's only.
                if let Auth::Tenants(_) = auth {
                    return Reply::text("403 Forbidden", "use the metrics listener");
                }
            }
            Reply {
                status: "200 OK",
                content_type: crate::ops::metrics::CONTENT_TYPE,
                extra: "",
                body: shared.config.metrics.render(),
            }
        }
        _ => Reply::text("404 Not Found", "not found"),
    }
}

/// Read one request from `stream` (after the `sniffed` bytes already read from it), answer
/// it, and close. Bound it by the caller's deadline.
pub(crate) async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    sniffed: Vec<u8>,
    shared: &Shared,
    door: Door<'_>,
) {
    let head = read_head(&mut Prefixed::new(sniffed, &mut *stream), MAX_HEAD).await;
    let (reply, head_only) = match head {
        Err(HeadError::Closed) => return,
        Err(HeadError::TooLarge) => (
            Reply::text("431 Request Header Fields Too Large", "head too large"),
            false,
        ),
        Err(_) => (Reply::text("400 Bad Request", "bad request"), false),
        Ok((head, _)) => match frame(&head) {
            Err(_) => (Reply::text("400 Bad Request", "bad request"), false),
            Ok(f) if f.line.method == "GET" || f.line.method == "HEAD" => (
                answer(shared, door, path_of(f.line.target), &f.headers).await,
                f.line.method == "HEAD",
            ),
            Ok(_) => (
                Reply::text("405 Method Not Allowed", "method not allowed"),
                false,
            ),
        },
    };
    let _ = stream.write_all(&reply.bytes(head_only)).await;
    let _ = stream.shutdown().await;
}
