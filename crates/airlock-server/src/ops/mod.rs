//! Watching the server: Prometheus metrics (live gauges read from the registry at scrape
//! time, policy events, per-run figures) and the readiness `/readyz` reports.
pub mod health;
pub mod metrics;
mod metrics_live;
pub mod metrics_observer;
