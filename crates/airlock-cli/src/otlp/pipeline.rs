//! The export pipeline: request spans (target `airlock_server::telemetry::request_span::TARGET`, and
//! nothing else) → the `tracing-opentelemetry` layer → a batch processor on its own thread
//! with a bounded queue (a full queue drops spans and the SDK logs it; a run never waits for
//! the collector) → OTLP/HTTP protobuf to `URL/v1/traces`. Flushed by [`Exporting::shutdown`].
use std::time::Duration;

use anyhow::{bail, Context as _};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::{Layer, Registry};

use super::http_post::HttpPost;
use super::logged_exporter::LoggedExporter;

/// Bound on one export (connect, write, read each): a slow collector costs the exporter's
/// thread this long per batch, never a run.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(3);
/// Spans waiting for export at most; more are dropped (and counted by the SDK).
const MAX_QUEUED_SPANS: usize = 4096;

/// The running exporter.
#[derive(Debug)]
pub struct Exporting {
    provider: SdkTracerProvider,
}

/// A layer for the stderr subscriber's registry.
pub type TraceLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// Starts exporting to `endpoint` (an `http://` URL; the spans go to `endpoint/v1/traces`).
pub fn start(endpoint: &str) -> anyhow::Result<(Exporting, TraceLayer)> {
    if !endpoint.starts_with("http://") {
        bail!("--otlp-endpoint must be an http:// URL (OTLP/HTTP protobuf; TLS is not spoken), got {endpoint:?}");
    }
    let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(HttpPost {
            timeout: EXPORT_TIMEOUT,
        })
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .context("building the OTLP exporter")?;
    let batch = BatchConfigBuilder::default()
        .with_max_queue_size(MAX_QUEUED_SPANS)
        .build();
    let processor = BatchSpanProcessor::builder(LoggedExporter::new(exporter))
        .with_batch_config(batch)
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(Resource::builder().with_service_name("airlock").build())
        .build();
    let tracer = provider.tracer("airlock");
    let only_requests = Targets::new().with_target(
        airlock_server::telemetry::request_span::TARGET,
        tracing::Level::TRACE,
    );
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_filter(only_requests)
        .boxed();
    Ok((Exporting { provider }, layer))
}

impl Exporting {
    /// Exports what is queued (bounded by the exporter's timeouts) and stops.
    pub fn shutdown(self) {
        match self.provider.shutdown() {
            Ok(()) => tracing::info!("trace export flushed"),
            Err(e) => tracing::warn!(error = %e, "trace export did not flush"),
        }
    }
}
