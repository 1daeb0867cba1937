//! Operating the server: Prometheus metrics (live gauges, policy events), health and
//! readiness, and draining before a shutdown. Reads the registry; no wire depends on how.
pub mod drain;
pub mod health;
pub mod metrics;
mod metrics_live;
pub mod metrics_observer;
