//! Typed errors of the egress crate.

/// A rule that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    /// A host rule (`HOST[:PORT]`, `*.SUFFIX[:PORT]`) is malformed.
    #[error("bad host rule: {0}")]
    Host(String),
    /// An address range is malformed.
    #[error("bad address range: {0}")]
    Cidr(String),
}
