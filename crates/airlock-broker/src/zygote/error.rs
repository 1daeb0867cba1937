//! Why a zygote could not start.
use std::path::PathBuf;

use super::library::LIBRARY;

/// Why a zygote could not start.
#[derive(Debug, thiserror::Error)]
pub enum ZygoteError {
    /// The interpreter could not be found or used.
    #[error("zygote interpreter: {0}")]
    Interpreter(String),
    /// The library is not where it was looked for.
    #[error(
        "{} not found beside {}: it ships with the binary (reinstall airlock, or `cargo build \
         -p airlock-zygote` in a source tree), or run exec-per-run without --zygote",
        LIBRARY,
        .0.display()
    )]
    Library(PathBuf),
    /// The zygote process failed to start or to load the library.
    #[error("the zygote did not start: {0}")]
    Start(String),
}
