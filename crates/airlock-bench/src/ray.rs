//! The Ray batch rows: `airlock_ray.run_many` on a local Ray instance against the same
//! programs as plain `python3 -c` subprocesses in Ray tasks, measured by `ray_bench.py`.
use std::path::Path;
use std::process::{Command, Stdio};

/// The helper's source.
const HELPER: &str = include_str!("ray_bench.py");
/// The helper prints one short JSON line; this bounds what is read of its output.
const READ_CAP: usize = 1 << 20;

/// Programs per second: (airlock, floor).
pub fn measure(python: &Path, cli: &Path, programs: usize) -> Result<(f64, f64), String> {
    let mut cmd = Command::new(python);
    cmd.args(["-c", HELPER])
        .arg(cli)
        .arg(programs.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // The SDK from this checkout when the bench runs in it (the wheel's otherwise).
    let src = Path::new("clients/python/src");
    if src.join("airlock_ray").is_dir() {
        if let Ok(abs) = src.canonicalize() {
            cmd.env("PYTHONPATH", abs);
        }
    }
    let out = cmd.output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(READ_CAP)]).into_owned();
    let line = text.lines().last().unwrap_or("");
    let v: serde_json::Value =
        serde_json::from_str(line.trim()).map_err(|_| format!("helper said {line:?}"))?;
    if let Some(e) = v["error"].as_str() {
        return Err(e.to_string());
    }
    match (v["airlock"].as_f64(), v["floor"].as_f64()) {
        (Some(a), Some(f)) => Ok((a, f)),
        _ => Err(format!("helper said {line:?}")),
    }
}
