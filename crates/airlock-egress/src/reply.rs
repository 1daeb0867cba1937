//! The proxy's own answers: short plain-text HTTP responses a model can act on.
use crate::decision::DenyReason;
use crate::rules::Rules;

/// The line that tells a model not to look for another way out.
pub const NO_OTHER_ROUTE: &str =
    "This sandbox has no other network route; retrying another way will not work.";

/// A complete HTTP/1.1 response with a text body, closing the connection.
pub fn text(status: u16, phrase: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\nX-Airlock-Egress: denied\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The 403 (or 400 for a malformed request) for a denied request.
pub fn denied(target: &str, why: &DenyReason, rules: &Rules) -> Vec<u8> {
    let body = format!(
        "airlock egress proxy: request to {target} denied: {}. {NO_OTHER_ROUTE} \
         Hosts this sandbox may reach: {}.\n",
        why.message(),
        rules.allow_summary()
    );
    match why {
        DenyReason::BadRequest(_) => text(400, "Bad Request", &body),
        _ => text(403, "Forbidden", &body),
    }
}

/// The 502 for an allowed host that could not be reached.
pub fn unreachable(target: &str, detail: &str) -> Vec<u8> {
    let body = format!(
        "airlock egress proxy: request to {target} was allowed, but the host could not be \
         reached ({detail}). The allowlist permits it; the host itself did not answer.\n"
    );
    text(502, "Bad Gateway", &body)
}

/// The 503 when the run already has as many proxied connections as it may.
pub fn busy(max: usize) -> Vec<u8> {
    let body = format!(
        "airlock egress proxy: too many concurrent connections (at most {max} per run); close \
         one and retry.\n"
    );
    text(503, "Service Unavailable", &body)
}
