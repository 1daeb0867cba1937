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

/// Request, orchestrator -> broker: make (or get, for an equal spec under the same key) a
/// sandbox that persists across runs. `params: {"spec": {...}, "key"?: {...}}`.
pub const SANDBOX_CREATE: &str = "sandbox.create";
/// Request: re-attach to a live sandbox by id (after a dropped connection).
pub const SANDBOX_CONNECT: &str = "sandbox.connect";
/// Request: run Python in a sandbox. `params: {"sandbox_id", "code", "timeout_s"?, "env"?, "stream"?}`.
pub const SANDBOX_RUN_CODE: &str = "sandbox.run_code";
/// Request: run a command in a sandbox. `params: {"sandbox_id", "argv", ...}`.
pub const SANDBOX_EXEC: &str = "sandbox.exec";
/// Request: dispose of a sandbox (everything it wrote is freed).
pub const SANDBOX_DISPOSE: &str = "sandbox.dispose";
/// Request: the sandboxes the server holds for the caller. `params: {}`.
pub const SANDBOX_LIST: &str = "sandbox.list";
/// Request: change a sandbox's idle timeout. `params: {"sandbox_id", "idle_timeout_s"}`.
pub const SANDBOX_SET_TIMEOUT: &str = "sandbox.set_timeout";
/// Request: a held sandbox's lifetime, from now.
pub const SANDBOX_SET_LIFETIME: &str = "sandbox.set_lifetime";
/// Request: write a sandbox's files and kernel state to the snapshot store; it keeps running.
/// `params: {"sandbox_id"}` -> `{"snapshot_id", ...}`.
pub const SANDBOX_SNAPSHOT: &str = "sandbox.snapshot";
/// Request: snapshot, then free the sandbox's processes and memory; a later call resumes it.
pub const SANDBOX_PAUSE: &str = "sandbox.pause";
/// Request: bring a paused sandbox back under its id. `params: {"sandbox_id"}`.
pub const SANDBOX_RESUME: &str = "sandbox.resume";
/// Request: N new sandboxes, each a copy of a live one. `params: {"sandbox_id", "count"}`.
pub const SANDBOX_FORK: &str = "sandbox.fork";
/// Request: the snapshots in the store. `params: {}`.
pub const SNAPSHOT_LIST: &str = "snapshot.list";
/// Request: remove a snapshot from the store. `params: {"snapshot_id"}`.
pub const SNAPSHOT_REMOVE: &str = "snapshot.remove";
/// Request: dispose of every sandbox of a conversation.
pub const SCOPE_DISPOSE: &str = "scope.dispose";
/// Request: cancel a run in flight; it ends `cancelled` with its one terminal result.
pub const RUN_CANCEL: &str = "run.cancel";
/// Notification, broker -> orchestrator: output of a streaming run, in order.
pub const OUTPUT: &str = "output";
/// Requests: file operations beneath a sandbox's work dir.
pub const FILES_WRITE: &str = "files.write";
/// See [`FILES_WRITE`].
pub const FILES_READ: &str = "files.read";
/// See [`FILES_WRITE`].
pub const FILES_LIST: &str = "files.list";
/// See [`FILES_WRITE`].
pub const FILES_STAT: &str = "files.stat";
/// See [`FILES_WRITE`].
pub const FILES_REMOVE: &str = "files.remove";
/// See [`FILES_WRITE`]: a directory made (its parents too with `parents`).
pub const FILES_MAKE_DIR: &str = "files.make_dir";
/// See [`FILES_WRITE`]: an entry renamed.
pub const FILES_RENAME: &str = "files.rename";
/// See [`FILES_WRITE`]: several files written in one call.
pub const FILES_WRITE_MANY: &str = "files.write_many";
/// Request: collect a sandbox's declared outputs with their bytes.
pub const OUTPUTS_COLLECT: &str = "outputs.collect";
/// Start a background process in a sandbox.
pub const PROCESS_START: &str = "process.start";
/// A sandbox's processes.
pub const PROCESS_LIST: &str = "process.list";
/// Bytes to a process's stdin or terminal.
pub const PROCESS_INPUT: &str = "process.input";
/// Close a process's stdin.
pub const PROCESS_CLOSE_STDIN: &str = "process.close_stdin";
/// Resize a process's terminal.
pub const PROCESS_RESIZE: &str = "process.resize";
/// Signal a process's group.
pub const PROCESS_SIGNAL: &str = "process.signal";
/// Wait for a process to end.
pub const PROCESS_WAIT: &str = "process.wait";
/// A process's recent output (re-read after re-attaching).
pub const PROCESS_OUTPUT: &str = "process.output";
/// Notification: a process ended.
pub const PROCESS_EXITED: &str = "process.exited";
/// Request: serve a port of the sandbox's own loopback on the server's listener.
/// `params: {"sandbox_id", "port"}`; result `{"port", "url", "expires"}`.
pub const SANDBOX_EXPOSE: &str = "sandbox.expose";
/// Request: revoke an exposure (its URL stops working, its live connections close).
/// `params: {"sandbox_id", "port"}`; result `{"port"}`.
pub const SANDBOX_UNEXPOSE: &str = "sandbox.unexpose";
