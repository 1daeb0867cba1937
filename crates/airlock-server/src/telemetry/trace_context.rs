//! The client's W3C trace context on the wire: a request's params may carry
//! `_meta: {"traceparent": ..., "tracestate": ...}` (the MCP convention). [`take`] removes the
//! member in one place, before any params struct (many `deny_unknown_fields`) sees it, and
//! reads it into a remote parent for the request's span.
//!
//! Whatever the client sends here is untrusted and optional: a missing, malformed, oversized
//! or all-zero `traceparent` is ignored (the request gets a fresh trace), never an error, and
//! a bad `tracestate` is dropped on its own. Nothing longer than the bounds below is parsed.
use std::str::FromStr;

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry::Context;
use serde_json::Value;

/// The params member that carries it.
pub const META: &str = "_meta";
/// Longest `traceparent` read. Version 00 is exactly 55 characters; a later version may append
/// fields, which are ignored — 256 leaves them room and bounds the work.
pub const MAX_TRACEPARENT: usize = 256;
/// Longest `tracestate` read: the 512 characters W3C asks every vendor to propagate. A longer
/// one is dropped whole (cutting it could split a list member).
pub const MAX_TRACESTATE: usize = 512;

/// Removes `_meta` from `params` (when they are an object) and returns the remote parent it
/// names, if it names a valid one.
pub fn take(params: &mut Option<Value>) -> Option<Context> {
    let meta = match params.as_mut() {
        Some(Value::Object(m)) => m.remove(META)?,
        _ => return None,
    };
    let parent = meta.get("traceparent").and_then(Value::as_str)?;
    let state = meta.get("tracestate").and_then(Value::as_str);
    remote_parent(parent, state)
}

/// The remote span context a `traceparent` (and `tracestate`) names, if it is well formed.
pub fn remote_parent(traceparent: &str, tracestate: Option<&str>) -> Option<Context> {
    let (trace_id, span_id, flags) = parse_traceparent(traceparent)?;
    let state = tracestate
        .filter(|s| s.len() <= MAX_TRACESTATE)
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or_default();
    let cx = SpanContext::new(trace_id, span_id, flags, true, state);
    Some(Context::new().with_remote_span_context(cx))
}

/// `version-traceid-parentid-flags`, lowercase hex, by the W3C Trace Context rules: version
/// `ff` is invalid, version 00 has nothing after the flags, a later version may have more
/// after a `-`; an all-zero trace or parent id is invalid.
fn parse_traceparent(s: &str) -> Option<(TraceId, SpanId, TraceFlags)> {
    if s.len() > MAX_TRACEPARENT || s.len() < 55 || !s.is_ascii() {
        return None;
    }
    let (head, rest) = s.split_at(55);
    let mut parts = head.split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let lengths = [(version, 2), (trace, 32), (parent, 16), (flags, 2)];
    if lengths
        .iter()
        .any(|(p, n)| p.len() != *n || !is_lower_hex(p))
    {
        return None;
    }
    let version_ok = match version {
        "ff" => false,
        "00" => rest.is_empty(),
        _ => rest.is_empty() || rest.starts_with('-'),
    };
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(parent).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let valid = version_ok && trace_id != TraceId::INVALID && span_id != SpanId::INVALID;
    valid.then_some((trace_id, span_id, TraceFlags::new(flags & 1)))
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn span_of(cx: &Context) -> SpanContext {
        cx.span().span_context().clone()
    }

    #[test]
    fn a_well_formed_traceparent_is_a_remote_sampled_parent_and_meta_is_taken_off() {
        let mut params = Some(json!({"sandbox_id": "sb-1", "_meta": {
            "traceparent": GOOD, "tracestate": "vendor=abc,other=x"}}));
        let cx = take(&mut params).expect("a parent");
        assert_eq!(params, Some(json!({"sandbox_id": "sb-1"})));
        let sc = span_of(&cx);
        assert_eq!(
            sc.trace_id(),
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()
        );
        assert_eq!(sc.span_id(), SpanId::from_hex("00f067aa0ba902b7").unwrap());
        assert!(sc.is_remote() && sc.is_sampled());
        assert_eq!(sc.trace_state().get("vendor"), Some("abc"));
    }

    #[test]
    fn malformed_traceparents_are_ignored_and_meta_is_still_taken_off() {
        let zeros_trace = "00-00000000000000000000000000000000-00f067aa0ba902b7-01";
        let zeros_span = "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01";
        let long = format!("{GOOD}{}", "-x".repeat(MAX_TRACEPARENT));
        let bad = [
            "",
            "garbage",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7é01",
            zeros_trace,
            zeros_span,
            long.as_str(),
        ];
        for tp in bad {
            let mut params = Some(json!({"a": 1, "_meta": {"traceparent": tp}}));
            assert!(take(&mut params).is_none(), "{tp:?} was accepted");
            assert_eq!(params, Some(json!({"a": 1})));
        }
        for meta in [
            json!(null),
            json!(7),
            json!({"traceparent": 5}),
            json!([GOOD]),
        ] {
            let mut params = Some(json!({"_meta": meta}));
            assert!(take(&mut params).is_none());
            assert_eq!(params, Some(json!({})));
        }
        assert!(take(&mut Some(json!([1, 2]))).is_none());
        assert!(take(&mut None).is_none());
    }

    #[test]
    fn a_later_version_may_carry_more_and_an_oversized_tracestate_is_dropped_alone() {
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-what-comes";
        let sc = span_of(&remote_parent(later, None).expect("a later version parses"));
        assert!(!sc.is_sampled());
        let big = format!("k={}", "v".repeat(MAX_TRACESTATE));
        let sc = span_of(&remote_parent(GOOD, Some(&big)).expect("the parent stays"));
        assert_eq!(sc.trace_state().header(), "");
        let sc = span_of(&remote_parent(GOOD, Some("not a=valid,,state!")).expect("stays"));
        assert_eq!(sc.trace_state().header(), "");
    }
}
