//! The closed table of error codes airlock puts in [`ErrorObject::code`](crate::ErrorObject).
//!
//! The five standard JSON-RPC 2.0 codes plus airlock's application codes in the reserved
//! server band -32000..=-32099. The numbers are a wire contract: other crates and the Python
//! client code against them, so a number never changes meaning. Meanings, senders and
//! retryability are documented in `docs/protocol.md`.

use std::fmt;
use std::ops::RangeInclusive;

/// The band JSON-RPC 2.0 reserves for implementation-defined server errors.
pub const APPLICATION_CODE_RANGE: RangeInclusive<i64> = -32099..=-32000;

/// A known error code. Convert with [`ErrorCode::code`] / [`ErrorCode::from_code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// -32700: the body is not valid UTF-8 JSON.
    ParseError,
    /// -32600: valid JSON that is not an acceptable JSON-RPC message (or a batch).
    InvalidRequest,
    /// -32601: the method is not served by the receiver.
    MethodNotFound,
    /// -32602: the method exists but the params are wrong.
    InvalidParams,
    /// -32603: an unexpected failure inside the receiver.
    InternalError,
    /// -32001: a host tool ran and reported failure.
    ToolError,
    /// -32002: the run exceeded its wall-clock timeout and was killed.
    Timeout,
    /// -32003: the run exceeded its memory ceiling and was killed.
    MemoryLimit,
    /// -32004: the run's output exceeded the output cap.
    OutputLimit,
    /// -32005: the peer broke the framing or protocol rules.
    ProtocolViolation,
    /// -32006: a run is already in flight on this connection.
    Busy,
    /// -32007: the sandbox could not be set up with every required layer; nothing ran.
    SandboxRefused,
    /// -32008: the program does not fit in one message.
    ProgramTooLarge,
    /// -32009: the run made more tool calls than allowed.
    ToolCallLimit,
    /// -32010: the executor died without a terminal response (signal, seccomp kill, EOF).
    ExecutorCrashed,
    /// -32011: the caller is not authenticated or not allowed on this transport.
    Unauthorized,
    /// -32012: the broker is shutting down; the run was stopped or not started.
    Shutdown,
    /// -32013: the program called a tool that is not registered.
    UnknownTool,
    /// -32014: the tool exists but policy denies this call.
    ToolDenied,
    /// -32015: the program itself failed (raised, or exited non-zero); the sandbox held.
    ProgramError,
    /// -32016: no such sandbox, run or file (never created, disposed, idled out, or gone).
    NotFound,
    /// -32017: a file operation was refused (a link or special file in the way, a path not
    /// confined to the work dir, over a transfer cap); nothing was changed.
    FileRefused,
    /// -32018: over a server ceiling (live sandboxes, concurrent runs); retry later.
    OverCapacity,
}

impl ErrorCode {
    /// Every code in the table, standard codes first, then application codes by number.
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::ParseError,
        ErrorCode::InvalidRequest,
        ErrorCode::MethodNotFound,
        ErrorCode::InvalidParams,
        ErrorCode::InternalError,
        ErrorCode::ToolError,
        ErrorCode::Timeout,
        ErrorCode::MemoryLimit,
        ErrorCode::OutputLimit,
        ErrorCode::ProtocolViolation,
        ErrorCode::Busy,
        ErrorCode::SandboxRefused,
        ErrorCode::ProgramTooLarge,
        ErrorCode::ToolCallLimit,
        ErrorCode::ExecutorCrashed,
        ErrorCode::Unauthorized,
        ErrorCode::Shutdown,
        ErrorCode::UnknownTool,
        ErrorCode::ToolDenied,
        ErrorCode::ProgramError,
        ErrorCode::NotFound,
        ErrorCode::FileRefused,
        ErrorCode::OverCapacity,
    ];

    /// The wire number.
    pub const fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
            ErrorCode::ToolError => -32001,
            ErrorCode::Timeout => -32002,
            ErrorCode::MemoryLimit => -32003,
            ErrorCode::OutputLimit => -32004,
            ErrorCode::ProtocolViolation => -32005,
            ErrorCode::Busy => -32006,
            ErrorCode::SandboxRefused => -32007,
            ErrorCode::ProgramTooLarge => -32008,
            ErrorCode::ToolCallLimit => -32009,
            ErrorCode::ExecutorCrashed => -32010,
            ErrorCode::Unauthorized => -32011,
            ErrorCode::Shutdown => -32012,
            ErrorCode::UnknownTool => -32013,
            ErrorCode::ToolDenied => -32014,
            ErrorCode::ProgramError => -32015,
            ErrorCode::NotFound => -32016,
            ErrorCode::FileRefused => -32017,
            ErrorCode::OverCapacity => -32018,
        }
    }

    /// The table entry for a wire number, or `None` for a number airlock does not define.
    pub fn from_code(code: i64) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| c.code() == code)
    }

    /// The stable snake_case name (used in logs, the CLI's `--json` output and the docs).
    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::ParseError => "parse_error",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::MethodNotFound => "method_not_found",
            ErrorCode::InvalidParams => "invalid_params",
            ErrorCode::InternalError => "internal_error",
            ErrorCode::ToolError => "tool_error",
            ErrorCode::Timeout => "timeout",
            ErrorCode::MemoryLimit => "memory_limit",
            ErrorCode::OutputLimit => "output_limit",
            ErrorCode::ProtocolViolation => "protocol_violation",
            ErrorCode::Busy => "busy",
            ErrorCode::SandboxRefused => "sandbox_refused",
            ErrorCode::ProgramTooLarge => "program_too_large",
            ErrorCode::ToolCallLimit => "tool_call_limit",
            ErrorCode::ExecutorCrashed => "executor_crashed",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Shutdown => "shutdown",
            ErrorCode::UnknownTool => "unknown_tool",
            ErrorCode::ToolDenied => "tool_denied",
            ErrorCode::ProgramError => "program_error",
            ErrorCode::NotFound => "not_found",
            ErrorCode::FileRefused => "file_refused",
            ErrorCode::OverCapacity => "over_capacity",
        }
    }

    /// The table entry for a name from [`ErrorCode::name`].
    pub fn from_name(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| c.name() == name)
    }

    /// Whether the code is one of airlock's own (in [`APPLICATION_CODE_RANGE`]).
    pub fn is_application(self) -> bool {
        APPLICATION_CODE_RANGE.contains(&self.code())
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}
