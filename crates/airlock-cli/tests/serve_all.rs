//! `airlock serve` end to end: protocol conformance of both transports (stdio and
//! WebSocket), auth, limits, shutdown and audit, and fault tests (executor killed mid-tool
//! call, client vanishing mid-run, malformed frames from either side), each asserting the
//! server keeps serving.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test support: a failed step is a failed test"
)]
mod serve;
