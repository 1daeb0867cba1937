//! Stateful sandboxes (sessions): `run_code` in a live sandbox's kernel, and a sandbox created
//! and its first cell run; the peer is a local Jupyter kernel (`jupyter.py`), same interpreter.
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use airlock_broker::{Kernel, Limits, RunStatus, SandboxFs};

use crate::airlock::{spec, Echo};

/// The Jupyter helper's source.
const JUPYTER: &str = include_str!("jupyter.py");

fn never() -> airlock_broker::run::Cancel {
    Box::pin(std::future::pending())
}

/// A fresh stateful sandbox: its filesystem and an idle kernel.
async fn create(executor: &Path, limits: &Limits) -> Result<(Arc<SandboxFs>, Kernel), String> {
    let s = spec(executor, "", limits.clone());
    let root = airlock_broker::run::root_for(&s)
        .await
        .map_err(|n| n.message)?;
    let fs = SandboxFs::create(executor, root)
        .await
        .map_err(|e| e.to_string())?;
    Ok((Arc::new(fs), Kernel::default()))
}

/// One `print(1)` cell; its request-to-result ms.
async fn cell(
    executor: &Path,
    limits: &Limits,
    fs: &Arc<SandboxFs>,
    kernel: &mut Kernel,
) -> Result<f64, String> {
    let mut s = spec(executor, "print(1)", limits.clone());
    s.sandbox = Some(Arc::clone(fs));
    let t0 = Instant::now();
    let r = kernel.run(s, &Echo, never()).await;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    if r.status != RunStatus::Completed || r.stdout != "1\n" {
        return Err(format!("cell ended {}: {:?}", r.status.as_str(), r.error));
    }
    Ok(ms)
}

/// `run_code` in a live stateful sandbox (its kernel started by warm-up cells); ms per cell.
pub async fn run_code(executor: &Path, runs: usize, limits: &Limits) -> Result<Vec<f64>, String> {
    let (fs, mut kernel) = create(executor, limits).await?;
    let mut out = Vec::new();
    let mut result = Ok(());
    for i in 0..runs + 5 {
        match cell(executor, limits, &fs, &mut kernel).await {
            Ok(ms) if i >= 5 => out.push(ms),
            Ok(_) => {}
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    kernel.shut_down().await;
    result.map(|()| out)
}

/// A stateful sandbox created (its root assembled) and its first cell run (the kernel
/// started); ms each, a new sandbox every time.
pub async fn create_and_first(
    executor: &Path,
    runs: usize,
    limits: &Limits,
) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for _ in 0..runs {
        let t0 = Instant::now();
        let (fs, mut kernel) = create(executor, limits).await?;
        let r = cell(executor, limits, &fs, &mut kernel).await;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        kernel.shut_down().await;
        r?;
        out.push(ms);
    }
    Ok(out)
}

/// The Jupyter kernel's samples for `mode` (`run` or `start`), ms.
pub fn jupyter(python: &Path, mode: &str, n: usize) -> Result<Vec<f64>, String> {
    let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
    let out = std::process::Command::new(python)
        .args(["-I", "-c", JUPYTER, mode, &n.to_string()])
        // Its connection files and runtime dir, not the user's.
        .env("JUPYTER_RUNTIME_DIR", scratch.path())
        .current_dir(scratch.path())
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(1 << 20)]).into_owned();
    crate::inproc::parse(text.lines().last().unwrap_or(""))
}
