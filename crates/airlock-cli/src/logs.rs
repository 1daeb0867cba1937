//! The logs of `airlock serve` and `airlock mcp` on stderr: which lines, and in colour or not.
//!
//! The filter is, first that applies: `--log-level LEVEL` (one level for everything), then
//! `RUST_LOG` (tracing's directives, per target), then the command's default (`info` for
//! `serve`, `warn` for `mcp`). An explicit flag beats the ambient environment, so a program
//! that spawns the server (the SDK passes `--log-level warn`) gets what it asked for even
//! under a `RUST_LOG` meant for something else. ANSI colour only when stderr is a terminal: a
//! host program reading the server's stderr gets plain text.
//!
//! The request spans exported over OTLP (`airlock_server::telemetry::request_span::TARGET`) never reach
//! the stderr lines; the trace layer, when `--otlp-endpoint` asks for one, sees only them.
use std::io::IsTerminal;

use clap::ValueEnum;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// Log line format on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The least severe level written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    /// Everything.
    Trace,
    /// Debugging detail and above.
    Debug,
    /// Lifecycle lines (listening, connections, runs) and above.
    Info,
    /// Warnings and errors only.
    Warn,
    /// Errors only.
    Error,
}

impl LogLevel {
    fn directive(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

/// The filter: `level` if given, else `RUST_LOG` if it parses, else `default`; never the
/// request spans of the trace export.
fn filter(level: Option<LogLevel>, default: LogLevel) -> EnvFilter {
    let filter = match level {
        Some(l) => EnvFilter::new(l.directive()),
        None => EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new(default.directive())),
    };
    match format!("{}=off", airlock_server::telemetry::request_span::TARGET).parse() {
        Ok(no_request_spans) => filter.add_directive(no_request_spans),
        Err(_) => filter,
    }
}

/// Installs the stderr subscriber (once; a second call is a no-op).
pub fn init(format: LogFormat, level: Option<LogLevel>, default: LogLevel) {
    init_with(format, level, default, None);
}

/// Installs the stderr subscriber and, when given, the trace export's layer beside it.
pub fn init_with(
    format: LogFormat,
    level: Option<LogLevel>,
    default: LogLevel,
    traces: Option<Box<dyn Layer<Registry> + Send + Sync>>,
) {
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let lines = match format {
        LogFormat::Text => lines.boxed(),
        LogFormat::Json => lines.json().boxed(),
    };
    let mut layers = vec![lines.with_filter(filter(level, default)).boxed()];
    layers.extend(traces);
    let _ = tracing_subscriber::registry().with(layers).try_init();
}
