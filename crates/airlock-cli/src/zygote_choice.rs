//! Whether a long-lived command (`serve`, `mcp`) forks its runs from a zygote: by default when
//! the zygote starts, never with `--exec-per-run`, and `--zygote` makes a zygote that cannot
//! start fatal instead of a logged fall-back to exec-per-run.
use std::path::PathBuf;
use std::sync::Arc;

use airlock_broker::{Zygote, ZygoteConfig};
use anyhow::Context;

/// What the flags asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZygoteChoice {
    /// The zygote if it starts, else exec per run (logged).
    Default,
    /// The zygote, or refuse to start.
    Required,
    /// Exec the interpreter for every run.
    ExecPerRun,
}

impl ZygoteChoice {
    /// From `--zygote` and `--exec-per-run` (clap keeps them exclusive).
    #[must_use]
    pub fn from_flags(zygote: bool, exec_per_run: bool) -> Self {
        match (zygote, exec_per_run) {
            (_, true) => ZygoteChoice::ExecPerRun,
            (true, false) => ZygoteChoice::Required,
            (false, false) => ZygoteChoice::Default,
        }
    }

    /// Start the zygote this choice asks for (inside the runtime).
    pub async fn start(
        self,
        executor: PathBuf,
        interpreter: Option<PathBuf>,
    ) -> anyhow::Result<Option<Arc<Zygote>>> {
        if self == ZygoteChoice::ExecPerRun {
            return Ok(None);
        }
        let mut zc = ZygoteConfig::new(executor);
        zc.interpreter = interpreter;
        match Zygote::start(zc).await {
            Ok(z) => Ok(Some(Arc::new(z))),
            Err(e) if self == ZygoteChoice::Required => Err(e).context("--zygote"),
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "the zygote did not start; every run is exec'd (--exec-per-run silences \
                     this, --zygote makes it fatal)"
                );
                Ok(None)
            }
        }
    }
}
