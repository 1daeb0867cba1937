//! Structured refusals a model can act on: a closed code, a sentence, and whether to retry.

use serde_json::{json, Value};

/// Why a host-tool call was not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DenialCode {
    /// No tool of that name is registered.
    UnknownTool,
    /// The run's host-tool-call cap is exhausted (refusals count).
    CallCapExhausted,
    /// The arguments do not satisfy the tool's schema.
    InvalidArguments,
    /// The tool acts as the user and the host minted no user authority.
    IdentityUnavailable,
    /// The tool's answer is over a response cap.
    ResponseTooLarge,
    /// The tool body failed.
    ToolFailed,
}

impl DenialCode {
    /// The wire spelling.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            DenialCode::UnknownTool => "unknown_tool",
            DenialCode::CallCapExhausted => "call_cap_exhausted",
            DenialCode::InvalidArguments => "invalid_arguments",
            DenialCode::IdentityUnavailable => "identity_unavailable",
            DenialCode::ResponseTooLarge => "response_too_large",
            DenialCode::ToolFailed => "tool_failed",
        }
    }

    /// The observer kind.
    #[must_use]
    pub const fn kind(self) -> &'static str {
        match self {
            DenialCode::UnknownTool => "HostToolUnknown",
            DenialCode::CallCapExhausted => "HostToolCallCapExhausted",
            DenialCode::InvalidArguments => "HostToolInvalidArguments",
            DenialCode::IdentityUnavailable => "HostToolIdentityUnavailable",
            DenialCode::ResponseTooLarge => "HostToolResponseTooLarge",
            DenialCode::ToolFailed => "HostToolFailed",
        }
    }
}

/// A refusal, as the guest receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The closed code to branch on.
    pub code: DenialCode,
    /// A sentence for the model (guest-influenced parts are sanitized and bounded).
    pub reason: String,
    /// Whether the same call may succeed if retried (after fixing the arguments, say).
    pub retryable: bool,
}

impl Denial {
    pub(crate) fn new(code: DenialCode, reason: impl Into<String>, retryable: bool) -> Denial {
        Denial {
            code,
            reason: reason.into(),
            retryable,
        }
    }

    /// `{"code": ..., "reason": ..., "retryable": ...}`.
    #[must_use]
    pub fn to_json(&self) -> Value {
        json!({ "code": self.code.as_str(), "reason": self.reason, "retryable": self.retryable })
    }
}

/// A guest-chosen string made safe to echo: printable characters only, at most `max` of them.
#[must_use]
pub(crate) fn sanitize(s: &str, max: usize) -> String {
    s.chars().filter(|c| !c.is_control()).take(max).collect()
}
