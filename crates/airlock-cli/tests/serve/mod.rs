//! Tests of `airlock serve` through the real binary.
pub mod support;

mod admission;
mod budget;
mod conformance_stdio;
mod conformance_ws;
mod drain;
mod faults;
mod health;
mod kernel;
mod lifetimes;
mod logs;
mod ops_redteam;
mod ports;
mod processes;
mod restricted;
mod rich;
mod session_faults;
mod session_limits;
mod sessions;
mod snapshot_quota;
mod snapshots;
mod tenants;
mod tenants_redteam;
mod timeout_code;
mod write_answer;
mod zygote;
mod zygote_sessions;
