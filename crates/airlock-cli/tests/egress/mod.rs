//! The allowlist egress suite.
mod allowlist;
mod bypass;
mod closed;
pub mod recorder;
pub mod server;
mod strict;
