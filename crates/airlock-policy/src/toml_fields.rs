//! Reading `policy.toml`'s tables: the error every bad key, type or value is, and the checked
//! readers (known keys, a table, an integer in range) that `policy_file` and `tenant_quota`
//! share.

use thiserror::Error;
use toml::{Table, Value};

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

pub(crate) fn known(
    table: &Table,
    prefix: &str,
    expected: &'static [&'static str],
) -> Result<(), PolicyFileError> {
    match table.keys().find(|k| !expected.contains(&k.as_str())) {
        Some(k) => Err(PolicyFileError::UnknownKey {
            key: format!("{prefix}{k}"),
            expected,
        }),
        None => Ok(()),
    }
}

pub(crate) fn as_table<'a>(key: &str, v: &'a Value) -> Result<&'a Table, PolicyFileError> {
    v.as_table().ok_or_else(|| PolicyFileError::WrongType {
        key: key.to_owned(),
        value: v.to_string(),
        expected: "a table",
    })
}

pub(crate) fn set_int(
    table: &Table,
    prefix: &str,
    name: &str,
    min: u64,
    max: u64,
    slot: &mut u64,
) -> Result<(), PolicyFileError> {
    let Some(v) = table.get(name) else {
        return Ok(());
    };
    let key = format!("{prefix}.{name}");
    let n = v.as_integer().ok_or_else(|| PolicyFileError::WrongType {
        key: key.clone(),
        value: v.to_string(),
        expected: "an integer",
    })?;
    match u64::try_from(n) {
        Ok(n) if (min..=max).contains(&n) => {
            *slot = n;
            Ok(())
        }
        _ => Err(PolicyFileError::InvalidValue {
            key,
            value: v.to_string(),
            reason: format!("must be between {min} and {max}"),
        }),
    }
}
