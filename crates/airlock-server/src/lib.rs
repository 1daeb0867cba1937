//! The broker as a server: orchestrators connect over WebSocket or stdio, send `execute`
//! requests, answer the `call_tool` requests the broker sends them mid-run, and get exactly
//! one terminal response per `execute`.
//!
//! Layout: [`transport`] is the seam between bytes and sessions; [`framed`] (Content-Length,
//! for stdio) and [`ws`] (WebSocket with bearer auth) are the two transports; [`session`] is
//! the per-connection JSON-RPC logic (one run at a time, busy otherwise); [`remote_tools`]
//! relays a run's tool calls to the orchestrator; [`ceilings`] and [`params`] turn an
//! `execute` into a bounded [`RunSpec`](airlock_broker::RunSpec); [`audit`] writes one record per run.
//! The wire format is documented in `docs/server.md`.
//!
//! **Architecture Invariant:** every `execute` that reaches a session gets exactly one
//! terminal response (a result for a run that started, an error for one refused before), and
//! a session never ends while its run is alive: a vanished peer or a shutdown cancels the run,
//! and the session waits for it (and so for the executor to be reaped).
pub mod admission;
pub mod cancel;
pub mod ceilings;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod json_doc;
pub mod net;
pub mod ops;
pub mod registry;
pub mod server;
pub mod state_dir;
pub mod telemetry;
pub mod tenancy;
pub mod wire;

pub use cancel::CancelToken;
pub use ceilings::{Ceilings, LimitRefusal, RequestedLimits};
pub use server::{Admission, AdmitFn, Server, ServerConfig};
pub use telemetry::audit::{AuditRecord, AuditSink};
pub use tenancy::auth::Auth;
