//! What a pool's executors are prepared for.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::limits::Limits;
use crate::zygote::Zygote;

/// What the pool's executors are prepared for.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Executors kept ready.
    pub size: usize,
    /// The limits every pooled executor is started under; a run whose kernel-side limits differ
    /// runs cold (its timeout, grace and tool-call limits may differ freely).
    pub limits: Limits,
    /// The interpreter (`python3` on PATH when None); runs asking for another one run cold.
    pub interpreter: Option<PathBuf>,
    /// The `airlock` binary whose `__executor` subcommand is the stage.
    pub executor: PathBuf,
    /// How long one executor may take from spawn to verified attestation.
    pub startup_timeout: Duration,
    /// Where the executors come from: forked by this zygote (those it can fork), or spawned
    /// one by one (exec per executor) when None.
    pub zygote: Option<Arc<Zygote>>,
}

impl PoolConfig {
    /// A pool of `size` executors with default limits and `python3` from PATH.
    pub fn new(size: usize, executor: PathBuf) -> Self {
        Self {
            size,
            limits: Limits::default(),
            interpreter: None,
            executor,
            startup_timeout: Duration::from_secs(10),
            zygote: None,
        }
    }
}
