//! A run from its spec to its one result: prepare it, launch a fresh stage, supervise it.
use std::time::Instant;

use futures_util::future::BoxFuture;

use super::spec::{Cancel, RunSpec};
use super::{prepare, supervise, verdict};
use crate::result::RunResult;
use crate::tools::{NoTools, ToolHandler};

/// Run to the end. Always returns exactly one result, after every process of the run is gone.
pub async fn run(spec: RunSpec, tools: &dyn ToolHandler) -> RunResult {
    run_cancellable(spec, tools, Box::pin(std::future::pending())).await
}

/// [`run`], ended early (status `cancelled`) when `cancel` resolves.
pub async fn run_cancellable(spec: RunSpec, tools: &dyn ToolHandler, cancel: Cancel) -> RunResult {
    let started = Instant::now();
    let prepared = match prepare::prepare(&spec, run_probe).await {
        Ok(p) => p,
        Err(refusal) => return verdict::before_spawn(refusal, started),
    };
    supervise::supervise(prepared, &spec.limits, tools, cancel, started).await
}

/// [`run`] without tools, as a function value: how preparing a run on an image runs the probe
/// that finds the image's interpreter (see `RunProbe` in `interpreter_image.rs`).
pub(crate) fn run_probe(spec: RunSpec) -> BoxFuture<'static, RunResult> {
    Box::pin(async move { run(spec, &NoTools).await })
}
