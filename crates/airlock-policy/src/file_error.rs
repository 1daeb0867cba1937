//! The error a `policy.toml` that cannot be used is: too large, not TOML, or a key, type or
//! value the format refuses (each naming the dotted key and the value), and the size cap.

use thiserror::Error;

/// Largest accepted policy file. A policy is a few hundred bytes; 64 KiB is generous and keeps
/// the parser's work bounded when the path points somewhere unexpected.
pub const MAX_POLICY_BYTES: usize = 64 * 1024;

/// A `policy.toml` that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PolicyFileError {
    /// The text is larger than [`MAX_POLICY_BYTES`].
    #[error("policy file is {len} bytes, above the {MAX_POLICY_BYTES}-byte cap")]
    TooLarge {
        /// Its size.
        len: usize,
    },
    /// The text is not TOML.
    #[error("policy file is not valid toml: {message}")]
    Syntax {
        /// The parser's message.
        message: String,
    },
    /// A key this format does not have.
    #[error("policy key `{key}` is not recognised (expected one of: {})", expected.join(", "))]
    UnknownKey {
        /// The dotted key.
        key: String,
        /// The keys accepted at that level.
        expected: &'static [&'static str],
    },
    /// A value of the wrong TOML type.
    #[error("policy key `{key}` = {value} must be {expected}")]
    WrongType {
        /// The dotted key.
        key: String,
        /// The value, as TOML.
        value: String,
        /// What it must be.
        expected: &'static str,
    },
    /// A value of the right type that is not acceptable.
    #[error("policy key `{key}` = {value} is invalid: {reason}")]
    InvalidValue {
        /// The dotted key.
        key: String,
        /// The value, as TOML.
        value: String,
        /// Why.
        reason: String,
    },
}
