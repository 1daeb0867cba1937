//! The allowlist egress suite.
mod allowlist;
mod bypass;
mod closed;
pub mod server;
