//! The typed core every wire serves: live sandboxes (made through the router, held by id,
//! reclaimed when idle, disposed), their lives, paused records and resumes, snapshots and
//! their owners, the memory budget and tenants' quotas, and exposed ports. Requests and
//! answers are Rust types; a face (the JSON-RPC `wire` room, MCP, the E2B gateway) parses its own
//! messages into them and maps their errors to its own codes.
pub mod budget;
mod budget_admit;
pub mod budget_host;
mod budget_snapshots;
pub mod error;
pub mod expose;
pub mod life;
pub mod pause;
pub mod port_dial;
pub(crate) mod reclaim;
pub mod request;
pub(crate) mod resume_gate;
pub mod sandboxes;
pub mod snapshot_owners;
mod snapshot_reservations;
