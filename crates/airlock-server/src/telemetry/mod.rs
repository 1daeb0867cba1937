//! What the server records: the audit log (one record per run, one per refusal), W3C trace
//! context, a request's span, and tool calls traced into both. Depends only on `tenancy`.
pub mod audit;
pub mod audit_events;
pub mod request_span;
pub mod trace_context;
pub mod traced_tools;
