//! `airlock bench`: one table, measured in one run on this machine, of airlock (cold and warm)
//! against the sandboxes a user would pick instead. Work in progress: the scenarios follow.
pub mod stats;
pub mod table;

use std::path::PathBuf;

/// What to measure and how to print it.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Samples per latency scenario.
    pub runs: usize,
    /// Print JSON instead of the markdown table.
    pub json: bool,
    /// The binary whose `__executor` subcommand is the stage.
    pub executor: PathBuf,
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Writing the table failed.
    #[error("output: {0}")]
    Io(#[from] std::io::Error),
}

/// Measure and print.
pub fn run_and_print(_opts: &Options) -> Result<(), BenchError> {
    Ok(())
}
