//! The policy layer's events as metrics: a [`SandboxObserver`] that counts every egress
//! decision (allowed or denied) and hands each event on, unchanged, to the observer it wraps
//! (the audit log's, when there is one). The router and the local backend take one observer;
//! this is it.
use std::sync::Arc;

use airlock_router::{
    EgressDecided, HostToolCalled, OutputsCollected, SandboxAcquired, SandboxDisposed,
    SandboxObserver, StoreFileRead, ToolCallEnded,
};

use crate::ops::metrics::Metrics;

/// Counts into `metrics`, then forwards to `then`.
pub struct MetricsObserver {
    metrics: Arc<Metrics>,
    then: Option<Arc<dyn SandboxObserver>>,
}

impl std::fmt::Debug for MetricsObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsObserver")
            .field("then", &self.then.is_some())
            .finish()
    }
}

impl MetricsObserver {
    /// The observer for `metrics`, in front of `then`.
    #[must_use]
    pub fn new(metrics: Arc<Metrics>, then: Option<Arc<dyn SandboxObserver>>) -> Self {
        MetricsObserver { metrics, then }
    }
}

impl SandboxObserver for MetricsObserver {
    fn sandbox_acquired(&self, e: &SandboxAcquired) {
        if let Some(t) = &self.then {
            t.sandbox_acquired(e);
        }
    }

    fn sandbox_disposed(&self, e: &SandboxDisposed) {
        if let Some(t) = &self.then {
            t.sandbox_disposed(e);
        }
    }

    fn host_tool_called(&self, e: &HostToolCalled) {
        if let Some(t) = &self.then {
            t.host_tool_called(e);
        }
    }

    fn store_file_read(&self, e: &StoreFileRead) {
        if let Some(t) = &self.then {
            t.store_file_read(e);
        }
    }

    fn outputs_collected(&self, e: &OutputsCollected) {
        if let Some(t) = &self.then {
            t.outputs_collected(e);
        }
    }

    fn tool_call_ended(&self, e: &ToolCallEnded) {
        if let Some(t) = &self.then {
            t.tool_call_ended(e);
        }
    }

    fn egress_decided(&self, e: &EgressDecided) {
        self.metrics.egress_decided(e.allowed);
        if let Some(t) = &self.then {
            t.egress_decided(e);
        }
    }
}
