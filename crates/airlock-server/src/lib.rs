//! `airlock serve`: orchestrators connect over WebSocket or stdio and make, use and dispose of
//! sandboxes (and run one-shot `execute`s), answering the tool calls a run makes of them.
//!
//! Layout, each room using only those below it: [`net`] (listeners, stdio framing, the
//! exposed-port proxy, the ops endpoints) → [`wire`] (the JSON-RPC face: sessions, dispatch,
//! each method's params and answers, runs) → [`server`] (configuration, shared state, the
//! drain) → [`ops`] (metrics, health) → [`registry`] (the typed core: sandboxes, pause and
//! fork, budget, exposures) → [`telemetry`] (audit, traces) → [`tenancy`] (tenants, tokens,
//! auth). The wire format is documented in `docs/server.md`.
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
