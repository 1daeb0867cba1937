//! An exporter that says when exports fail: the first failure at once, then at most one line
//! a minute with the count of spans lost so far — a collector that is down for a day costs
//! the log a line a minute, not one per batch.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;

/// Least time between two lines about failed exports.
const QUIET: Duration = Duration::from_secs(60);

/// `E`, with its failures logged and counted.
#[derive(Debug)]
pub struct LoggedExporter<E> {
    inner: E,
    spans_lost: AtomicU64,
    last_line: Mutex<Option<Instant>>,
}

impl<E> LoggedExporter<E> {
    /// Wraps `inner`.
    pub fn new(inner: E) -> Self {
        Self {
            inner,
            spans_lost: AtomicU64::new(0),
            last_line: Mutex::new(None),
        }
    }

    fn failed(&self, spans: usize, error: &dyn std::fmt::Display) {
        let lost = self.spans_lost.fetch_add(spans as u64, Ordering::Relaxed) + spans as u64;
        let Ok(mut last) = self.last_line.lock() else {
            return;
        };
        if last.is_some_and(|t| t.elapsed() < QUIET) {
            return;
        }
        *last = Some(Instant::now());
        tracing::warn!(spans_lost = lost, error = %error, "OTLP export failed; its spans are lost");
    }
}

impl<E: SpanExporter> SpanExporter for LoggedExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        if let Err(e) = &result {
            self.failed(spans, e);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
