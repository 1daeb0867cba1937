//! The crate's error type: what can stop `airlock mcp` from starting or serving.
use thiserror::Error;

/// A failure of the MCP server or of an upstream connection.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum McpError {
    /// An `--upstream` value that cannot be used.
    #[error("invalid upstream {spec:?}: {reason}")]
    BadUpstreamSpec {
        /// The value as given.
        spec: String,
        /// Why it was refused.
        reason: String,
    },
    /// An upstream server could not be started.
    #[error("upstream {name}: cannot start {program:?}: {source}")]
    Spawn {
        /// The upstream's name.
        name: String,
        /// The program.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// An upstream did not complete a step (initialize, tools/list) in time or correctly.
    #[error("upstream {name}: {step} failed: {reason}")]
    Upstream {
        /// The upstream's name.
        name: String,
        /// The step: initialize, tools/list.
        step: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// The MCP session with the client failed.
    #[error("mcp session: {0}")]
    Session(String),
}

/// This crate's result alias.
pub type Result<T, E = McpError> = std::result::Result<T, E>;
