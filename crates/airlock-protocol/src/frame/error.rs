//! The typed errors of framing and their mapping to wire error codes.

use crate::decode::DecodeError;
use crate::error_code::ErrorCode;

/// Which part of a frame a truncation interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FramePart {
    /// EOF after some header bytes, before `\r\n\r\n`.
    Header,
    /// EOF after the header, before `Content-Length` body bytes arrived.
    Body,
}

/// Why a frame could not be read or written.
///
/// A clean EOF between frames is not an error: readers return `Ok(None)`. Header errors are
/// raised before any body byte is read. See [`FrameError::is_recoverable`] for which errors
/// leave the stream usable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The underlying reader or writer failed.
    #[error("frame i/o failed: {0}")]
    Io(#[from] std::io::Error),
    /// The stream ended inside a frame (distinct from a clean EOF between frames).
    #[error("stream ended inside the frame {part:?} after {received} bytes")]
    Truncated {
        /// The part of the frame that was cut.
        part: FramePart,
        /// Bytes of that part received before EOF.
        received: usize,
    },
    /// No `\r\n\r\n` within the allowed header section.
    #[error("header section exceeds {max} bytes")]
    HeaderTooLong {
        /// The cap, [`FrameLimits::max_header_bytes`](super::FrameLimits).
        max: usize,
    },
    /// A header line without a colon, with an empty or invalid name, or with bytes outside
    /// printable ASCII and tab (including a bare CR or LF).
    #[error("malformed header line {line}")]
    MalformedHeader {
        /// 1-based line number in the header section.
        line: usize,
    },
    /// The header section has no `Content-Length`.
    #[error("missing content-length header")]
    MissingContentLength,
    /// `Content-Length` appears more than once (even with equal values).
    #[error("duplicate content-length header")]
    DuplicateContentLength,
    /// `Content-Length` is not a plain decimal number (sign, hex, inner spaces, empty).
    #[error("invalid content-length value {value:?}")]
    InvalidContentLength {
        /// The offending value, truncated to 64 characters.
        value: String,
    },
    /// The body exceeds the cap: on read, the declared `Content-Length` (saturated at
    /// `u64::MAX`); on write, the body's actual length.
    #[error("frame body of {len} bytes exceeds the {max} byte cap")]
    BodyTooLarge {
        /// Declared or actual body length.
        len: u64,
        /// The cap, [`FrameLimits::max_body`](super::FrameLimits).
        max: usize,
    },
    /// A complete frame whose body is not an acceptable message.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A message could not be serialized.
    #[error("message serialization failed: {0}")]
    Encode(#[source] serde_json::Error),
    /// A previous framing error desynchronized the stream; the reader refuses to go on.
    #[error("frame reader is unusable after an earlier framing error")]
    Poisoned,
}

impl FrameError {
    /// The code to report to the peer for this error.
    ///
    /// Framing errors (header, truncation, over-cap, poisoned) map to `ProtocolViolation`,
    /// body errors to `ParseError` / `InvalidRequest` (see [`DecodeError::error_code`]), local
    /// failures to `InternalError`. A broker that knows more (an over-cap `execute` is
    /// `ProgramTooLarge`, EOF from an executor is `ExecutorCrashed`) reports that instead.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            FrameError::Io(_) | FrameError::Encode(_) => ErrorCode::InternalError,
            FrameError::Truncated { .. }
            | FrameError::HeaderTooLong { .. }
            | FrameError::MalformedHeader { .. }
            | FrameError::MissingContentLength
            | FrameError::DuplicateContentLength
            | FrameError::InvalidContentLength { .. }
            | FrameError::BodyTooLarge { .. }
            | FrameError::Poisoned => ErrorCode::ProtocolViolation,
            FrameError::Decode(e) => e.error_code(),
        }
    }

    /// True for EOF inside a frame ([`FrameError::Truncated`]); a clean EOF is `Ok(None)`.
    pub fn is_truncated(&self) -> bool {
        matches!(self, FrameError::Truncated { .. })
    }

    /// Whether the stream is still in sync and may be read (or written) again.
    ///
    /// True for body errors (the frame was consumed whole), for [`FrameError::BodyTooLarge`]
    /// (a reader skips the declared body, without buffering it, on the next call; a writer
    /// wrote nothing), for serialization failures, and for I/O errors of kind `WouldBlock`,
    /// `TimedOut` or `Interrupted` (no byte was consumed). Everything else poisons a reader.
    pub fn is_recoverable(&self) -> bool {
        match self {
            FrameError::Io(e) => matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock
                    | std::io::ErrorKind::TimedOut
                    | std::io::ErrorKind::Interrupted
            ),
            FrameError::Decode(_) | FrameError::BodyTooLarge { .. } | FrameError::Encode(_) => true,
            FrameError::Truncated { .. }
            | FrameError::HeaderTooLong { .. }
            | FrameError::MalformedHeader { .. }
            | FrameError::MissingContentLength
            | FrameError::DuplicateContentLength
            | FrameError::InvalidContentLength { .. }
            | FrameError::Poisoned => false,
        }
    }
}
