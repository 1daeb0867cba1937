//! `airlock mcp` end to end: a real MCP client session over stdio (rmcp) against the real
//! binary, with small upstream MCP servers (`tests/mcp/upstream.py`) started by airlock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failed unwrap is a failed test, with its location"
)]

mod mcp;
