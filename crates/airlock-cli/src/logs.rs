//! The logs of `airlock serve` and `airlock mcp` on stderr: which lines, and in colour or not.
//!
//! The filter is, first that applies: `--log-level LEVEL` (one level for everything), then
//! `RUST_LOG` (tracing's directives, per target), then the command's default (`info` for
//! `serve`, `warn` for `mcp`). An explicit flag beats the ambient environment, so a program
//! that spawns the server (the SDK passes `--log-level warn`) gets what it asked for even
//! under a `RUST_LOG` meant for something else. ANSI colour only when stderr is a terminal: a
//! host program reading the server's stderr gets plain text.
use std::io::IsTerminal;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

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

/// The filter: `level` if given, else `RUST_LOG` if it parses, else `default`.
fn filter(level: Option<LogLevel>, default: LogLevel) -> EnvFilter {
    match level {
        Some(l) => EnvFilter::new(l.directive()),
        None => EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new(default.directive())),
    }
}

/// Installs the stderr subscriber (once; a second call is a no-op).
pub fn init(format: LogFormat, level: Option<LogLevel>, default: LogLevel) {
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter(level, default));
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
