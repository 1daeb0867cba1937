//! Method names used on the wire (see the method table in `docs/protocol.md`).
//!
//! Only names live here; the shapes of `params` and `result` are documented in
//! `docs/protocol.md` and owned by the crates that implement them.

/// Request, broker -> executor and orchestrator -> broker: run one program.
/// `params: {"code": "<source>"}`; result `{"stdout", "stderr", "status"}`.
pub const EXECUTE: &str = "execute";

/// Request, executor -> broker and broker -> orchestrator: call a host tool mid-run.
/// `params: {"tool": "<name>", "args": {...}}`; result is the tool's JSON answer.
pub const CALL_TOOL: &str = "call_tool";

/// Notification, executor -> broker: the executor is set up and waits for `execute`.
pub const READY: &str = "ready";
