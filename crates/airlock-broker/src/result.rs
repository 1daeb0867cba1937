//! The one terminal result of a run.
use airlock_protocol::ErrorCode;
use serde::Serialize;

/// The exit code of a run that timed out, on every front end (the CLI's own exit status, the
/// wire's, MCP's and the SDK's `exit_code`): 124, as `timeout(1)` exits.
pub const TIMEOUT_EXIT_CODE: i32 = 124;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The program ran to the end and exited 0.
    Completed,
    /// The program raised, or exited non-zero.
    Error,
    /// The wall-clock budget ran out; the run was killed.
    Timeout,
    /// The memory ceiling was hit (watchdog, cgroup OOM, or the address-space backstop).
    MemoryLimit,
    /// The run wrote more into its work dir than its disk limits allow.
    DiskLimit,
    /// The executor died by a signal it was not sent by the broker (seccomp kill, crash).
    Killed,
    /// The executor broke the wire protocol (bad frame, oversized, out-of-order message).
    ProtocolError,
    /// A sandbox layer could not be applied or proven; no code ran.
    Refused,
    /// The run was cancelled by its caller (orchestrator gone, server shutting down).
    Cancelled,
}

impl RunStatus {
    /// The wire status string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Error => "error",
            Self::Timeout => "timeout",
            Self::MemoryLimit => "memory_limit",
            Self::DiskLimit => "disk_limit",
            Self::Killed => "killed",
            Self::ProtocolError => "protocol_error",
            Self::Refused => "refused",
            Self::Cancelled => "cancelled",
        }
    }
}

/// How a run's process came to be (see `crate::runner`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// `airlock __executor` spawned, then the interpreter or command exec'd (or no process at
    /// all: a run refused before one existed).
    #[default]
    Exec,
    /// Forked from the zygote's pre-initialised interpreter.
    Zygote,
    /// A pre-started executor of the warm pool.
    Pool,
    /// A cell of a stateful sandbox's long-lived kernel.
    Kernel,
}

impl Via {
    /// The wire name (`exec`, `zygote`, `pool`, `kernel`), as the result serialises it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Exec => "exec",
            Via::Zygote => "zygote",
            Via::Pool => "pool",
            Via::Kernel => "kernel",
        }
    }
}

/// An error attached to a non-completed result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunError {
    /// An application error code from the protocol table.
    pub code: i64,
    /// What happened, for a person or a model.
    pub message: String,
    /// When the program raised: the exception, as a notebook reports it.
    #[serde(flatten)]
    pub exception: Option<Exception>,
}

impl RunError {
    /// An error with no exception.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RunError {
            code,
            message: message.into(),
            exception: None,
        }
    }
}

/// An exception the program raised (the guest's report, bounded by the broker).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Exception {
    /// Its class name (`ZeroDivisionError`).
    pub name: String,
    /// Its text (`str(exc)`).
    pub value: String,
    /// The traceback's lines as Python's `traceback.format` makes them (each ends with a
    /// newline; some span several lines): joined, they are the traceback printed to stderr.
    pub traceback: Vec<String>,
}

/// Everything the caller learns about a finished run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    /// How it ended.
    pub status: RunStatus,
    /// Captured stdout (head, up to the cap).
    pub stdout: String,
    /// Captured stderr (head, up to the cap).
    pub stderr: String,
    /// Exit code when the process exited normally; [`TIMEOUT_EXIT_CODE`] for every timeout,
    /// whatever the killed process exited with.
    pub exit_code: Option<i32>,
    /// Signal number when it was killed.
    pub signal: Option<i32>,
    /// Set for every status but `completed`.
    pub error: Option<RunError>,
    /// True when stdout was cut at the cap.
    pub stdout_truncated: bool,
    /// True when stderr was cut at the cap.
    pub stderr_truncated: bool,
    /// Total bytes the program wrote to stdout.
    pub stdout_bytes: u64,
    /// Total bytes the program wrote to stderr.
    pub stderr_bytes: u64,
    /// Wall time from spawn to teardown, in milliseconds.
    pub wall_time_ms: f64,
    /// Highest resident memory seen for the whole run tree, in bytes.
    pub peak_rss_bytes: u64,
    /// Tool calls the program made (refused ones included).
    pub tool_calls: u32,
    /// Which mechanisms enforced the memory and process limits on this run.
    pub enforcement: Vec<&'static str>,
    /// True when a pre-started (warm) executor served the run: still fresh, never reused.
    pub warm: bool,
    /// How the run's process came to be.
    pub via: Via,
    /// How long the run waited for a run slot before it started, in milliseconds (counted in
    /// its timeout).
    pub queued_ms: f64,
    /// Every allow/deny of the egress proxy (allowlist egress), in order, at most
    /// `airlock_egress::MAX_DECISIONS`.
    pub egress: Vec<airlock_egress::Decision>,
    /// A stateful sandbox's cell: the value of its trailing expression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<CellValue>,
    /// A stateful sandbox's cell: rich output (`display()`, matplotlib figures), in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub display: Vec<DisplayItem>,
    /// Rich output items not returned (over the per-cell caps, or too large for one message).
    #[serde(skip_serializing_if = "is_zero")]
    pub display_dropped: u32,
    /// A stateful sandbox's cell: the kernel ended with this call (killed past its interrupt,
    /// out of memory, crashed), so every variable, import and object is gone; the next call
    /// starts a fresh kernel. Files in the sandbox are kept.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub kernel_restarted: bool,
    /// The exact bytes kept of stdout (`stdout` is them as text, invalid UTF-8 replaced); not
    /// serialized: a caller that wants them sends them itself (the server's `output_encoding`).
    #[serde(skip)]
    pub stdout_raw: Vec<u8>,
    /// The exact bytes kept of stderr.
    #[serde(skip)]
    pub stderr_raw: Vec<u8>,
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if signature"
)]
fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The value of a cell's trailing expression, as a notebook shows it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct CellValue {
    /// Its `repr()` (at most 64 KiB).
    pub repr: String,
    /// The value itself when it is plain JSON data (at most 256 KiB encoded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<serde_json::Value>,
    /// Its rich representations but text/plain (which is `repr`): media type → base64.
    #[serde(default, skip_serializing_if = "Bundle::is_empty")]
    pub bundle: Bundle,
}

/// Representations of one object: media type → its bytes, base64 (standard alphabet, padded).
pub type Bundle = std::collections::BTreeMap<String, String>;

/// One rich output of a cell: an object's richest representation (`mime`, `data`) and its
/// others (`bundle`), as a notebook's `display_data`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DisplayItem {
    /// One of `crate::kernel::display::MIME_TYPES`, the richest the object has.
    pub mime: String,
    /// The bytes, base64 (standard alphabet, padded).
    pub data: String,
    /// The object's other representations.
    #[serde(skip_serializing_if = "Bundle::is_empty")]
    pub bundle: Bundle,
}

impl RunResult {
    /// Whether the run was cancelled before any process of it existed (while it waited for a
    /// run slot): nothing ran, so there is nothing to record.
    #[must_use]
    pub fn cancelled_before_start(&self) -> bool {
        self.status == RunStatus::Cancelled && self.enforcement.is_empty()
    }

    /// The result of a run refused (or rejected as invalid) before any process existed:
    /// `refused` for [`ErrorCode::SandboxRefused`], `error` for anything else.
    pub fn not_started(code: ErrorCode, message: impl Into<String>) -> Self {
        let status = match code {
            ErrorCode::SandboxRefused => RunStatus::Refused,
            _ => RunStatus::Error,
        };
        RunResult {
            status,
            stdout: String::new(),
            stderr: String::new(),
            exit_code: None,
            signal: None,
            error: Some(RunError::new(code.code(), message)),
            stdout_truncated: false,
            stderr_truncated: false,
            stdout_bytes: 0,
            stderr_bytes: 0,
            wall_time_ms: 0.0,
            peak_rss_bytes: 0,
            tool_calls: 0,
            enforcement: Vec::new(),
            warm: false,
            via: Via::Exec,
            queued_ms: 0.0,
            egress: Vec::new(),
            value: None,
            display: Vec::new(),
            display_dropped: 0,
            kernel_restarted: false,
            stdout_raw: Vec::new(),
            stderr_raw: Vec::new(),
        }
    }
}
