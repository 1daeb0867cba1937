//! Where a request ends and whom it names, decided once, before any upstream contact, so that
//! the proxy and the origin server can never disagree about either: at most one `Host` (and a
//! well-formed one), no `Transfer-Encoding` at all, at most one `Content-Length` of digits
//! only. The body is then exactly that many bytes; nothing after it is ever forwarded.
use crate::rules::{split_host_port, Host};

/// Most digits a `Content-Length` may have (fits a `u64` with room).
const MAX_LENGTH_DIGITS: usize = 18;

fn named<'a>(headers: &'a [(String, String)], name: &'a str) -> impl Iterator<Item = &'a str> {
    headers
        .iter()
        .filter(move |(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// At most one `Host`, and if it is not empty it reads as `host[:port]` (RFC 9112 §3.2: a
/// request with several, or an invalid one, is answered 400). Its value is never forwarded:
/// the origin hears the authority that was vetted (see [`crate::head::Request::origin_head`]).
pub fn check_host(headers: &[(String, String)]) -> Result<(), String> {
    let hosts: Vec<&str> = named(headers, "host").collect();
    match hosts[..] {
        [] | [""] => Ok(()),
        [one] => split_host_port(one)
            .ok()
            .and_then(|(h, _)| Host::parse(h).ok())
            .map(|_| ())
            .ok_or_else(|| "the Host header is not host[:port]".to_string()),
        _ => Err("more than one Host header".into()),
    }
}

/// The length of the body after the head: the one `Content-Length`, or 0. Transfer codings
/// (chunked included) are refused rather than decoded: the proxy must know where the one
/// request it forwards ends, and so must the origin, identically.
pub fn body_length(headers: &[(String, String)]) -> Result<u64, String> {
    let has_te = named(headers, "transfer-encoding").next().is_some();
    let lengths: Vec<&str> = named(headers, "content-length").collect();
    match (has_te, &lengths[..]) {
        (true, []) => Err("Transfer-Encoding request bodies are not forwarded \
                          (send a Content-Length)"
            .into()),
        (true, _) => Err("both Content-Length and Transfer-Encoding".into()),
        (false, []) => Ok(0),
        (false, [one]) => parse_length(one),
        (false, _) => Err("more than one Content-Length header".into()),
    }
}

fn parse_length(v: &str) -> Result<u64, String> {
    let bad = || format!("bad Content-Length {:?}", v.get(..32).unwrap_or(v));
    if v.is_empty() || v.len() > MAX_LENGTH_DIGITS || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    v.parse().map_err(|_| bad())
}
