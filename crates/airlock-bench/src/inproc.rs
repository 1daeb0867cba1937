//! The in-process tier (pydantic-monty, smolagents' LocalPythonExecutor), measured by a Python
//! helper (`inproc.py`) that the interpreter runs with site-packages enabled.
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// The helper's source.
const HELPER: &str = include_str!("inproc.py");
/// The helper prints one short JSON line; this bounds what is read from it.
const READ_CAP: u64 = 1 << 20;
const READ_CAP_BYTES: usize = 1 << 20;

fn spawn(python: &Path, mode: &str, system: &str, n: usize) -> Result<std::process::Child, String> {
    Command::new(python)
        .args(["-I", "-c", HELPER, mode, system, &n.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())
}

pub(crate) fn parse(line: &str) -> Result<Vec<f64>, String> {
    let v: serde_json::Value =
        serde_json::from_str(line.trim()).map_err(|_| format!("helper said {line:?}"))?;
    if let Some(e) = v["error"].as_str() {
        return Err(e.to_string());
    }
    serde_json::from_value(v["samples"].clone()).map_err(|e| e.to_string())
}

/// Run one measurement; the helper's samples.
pub fn measure(python: &Path, mode: &str, system: &str, n: usize) -> Result<Vec<f64>, String> {
    let child = spawn(python, mode, system, n)?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let text =
        String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(READ_CAP_BYTES)]).into_owned();
    parse(text.lines().last().unwrap_or(""))
}

/// `workers` helpers each doing `total / workers` runs at once; runs per second.
pub fn throughput(
    python: &Path,
    system: &str,
    total: usize,
    workers: usize,
) -> Result<f64, String> {
    let per = total.div_ceil(workers);
    let mut children = Vec::new();
    for _ in 0..workers {
        let mut c = spawn(python, "throughput", system, per)?;
        let mut line = String::new();
        if let Some(out) = c.stdout.as_mut() {
            let _ = BufReader::new(out.take(READ_CAP)).read_line(&mut line);
        }
        if line.trim() != "ready" {
            let _ = c.kill();
            let _ = c.wait();
            return parse(&line).and(Err("helper did not start".into()));
        }
        children.push(c);
    }
    for c in &mut children {
        if let Some(stdin) = c.stdin.as_mut() {
            let _ = stdin.write_all(b"go\n");
            let _ = stdin.flush();
        }
    }
    let mut slowest: f64 = 0.0;
    for c in children {
        let out = c.wait_with_output().map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let secs = parse(text.lines().last().unwrap_or(""))?;
        slowest = slowest.max(secs.first().copied().unwrap_or(f64::INFINITY));
    }
    Ok((per * workers) as f64 / slowest)
}
