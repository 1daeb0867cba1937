//! The one error every registry request answers with: a kind a face maps to its own code
//! (the `wire` room's `errors` for JSON-RPC), a message for a person, and, where a client must tell
//! failures apart without reading the message, a machine-readable reason and the figures
//! behind it.
use std::fmt;

/// What kind of failure, in the registry's own terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The request itself is wrong (a bad id, a count out of range).
    InvalidParams,
    /// Nothing the caller may address goes by that name.
    NotFound,
    /// Policy, the sandbox's spec or the server's configuration refuses it.
    Refused,
    /// A bound is reached (sandboxes, budget, a tenant's quota); it may succeed later.
    OverCapacity,
    /// The sandbox is claimed by a run or a capture now.
    Busy,
    /// The server failed where it should not have.
    Internal,
}

/// A figure behind a failure (`data.need_mb`, `data.host`, ...).
#[derive(Debug, Clone, PartialEq)]
pub enum Fact {
    /// A count or a size.
    Number(u64),
    /// A name.
    Text(String),
}

/// Why a registry request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct ServerError {
    /// The kind.
    pub kind: ErrorKind,
    /// For a person.
    pub message: String,
    /// For a program (`SandboxKeySpecMismatch`, `SnapshotTampered`, ...), when it needs one.
    pub reason: Option<String>,
    /// The figures behind it, by name.
    pub facts: Vec<(&'static str, Fact)>,
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl ServerError {
    /// A `kind` failure said by `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ServerError {
            kind,
            message: message.into(),
            reason: None,
            facts: Vec::new(),
        }
    }

    /// The same, with its machine-readable reason.
    #[must_use]
    pub fn because(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// The same, with one more figure.
    #[must_use]
    pub fn with(mut self, name: &'static str, fact: Fact) -> Self {
        self.facts.push((name, fact));
        self
    }

    /// Refused by policy, the spec or the configuration.
    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Refused, message)
    }

    /// The server failed.
    pub fn internal(message: impl fmt::Display) -> Self {
        Self::new(ErrorKind::Internal, message.to_string())
    }

    /// The request is wrong.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidParams, message)
    }

    /// Nothing by that name.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// A bound is reached.
    pub fn over_capacity(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::OverCapacity, message)
    }

    /// Claimed by something else now.
    pub fn busy(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Busy, message)
    }
}
