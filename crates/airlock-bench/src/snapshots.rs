//! Pause, resume and fork of a stateful sandbox holding about 100 MB of Python objects,
//! through a real `airlock serve --stdio --state-dir` (its store on this machine's disk),
//! beside the figures the VM products publish. Each round makes a fresh sandbox, fills it,
//! and times `sandbox.pause`, then a resuming `run_code` that reads the state back, then
//! `sandbox.fork` into [`BRANCHES`] and a first cell in each branch, whose kernel reports its
//! own memory (PSS, from its /proc) — the memory a branch adds.
use std::path::Path;
use std::time::Instant;

use serde_json::{json, Value};

use crate::serve::Server;

/// Branches per fork.
pub const BRANCHES: usize = 8;

/// The state: ~100 MB of small Python objects (a dict of 400k str, 40k 1-KiB bytes), and a
/// check value read back after resume and in each branch.
const FILL: &str = "d = {i: str(i) * 4 for i in range(400_000)}\n\
                    blobs = [bytes([i % 251]) * 1024 for i in range(40_000)]\n\
                    check = sum(len(v) for v in d.values()) + sum(b[0] for b in blobs)\n\
                    check";

/// The kernel's own memory, from inside: (RSS, PSS, the check value, USS) in bytes — USS
/// (its private pages) is what a branch adds to the host's memory.
const MEMORY: &str = "def _kb(field):\n\
    \x20   for line in open('/proc/self/smaps_rollup'):\n\
    \x20       if line.startswith(field + ':'):\n\
    \x20           return int(line.split()[1]) * 1024\n\
    (_kb('Rss'), _kb('Pss'), check, _kb('Private_Clean') + _kb('Private_Dirty'))";

/// What one round measured.
#[derive(Debug, Default)]
pub struct Round {
    /// `sandbox.pause`, ms.
    pub pause_ms: f64,
    /// The paused sandbox's kernel RSS, bytes.
    pub rss: f64,
    /// A resuming `run_code` that reads the state, ms.
    pub resume_ms: f64,
    /// `sandbox.fork` into [`BRANCHES`], then a first cell in each, ms per branch.
    pub fork_ms_per_branch: f64,
    /// Each branch's kernel PSS after its first cell, MiB.
    pub branch_pss_mib: Vec<f64>,
}

/// What one copy-on-write fork measured.
#[derive(Debug, Default)]
pub struct CowRound {
    /// `sandbox.fork` into [`BRANCHES`] (copy-on-write), then a first cell in each, ms per
    /// branch.
    pub fork_ms_per_branch: f64,
    /// Each branch's kernel USS (private pages) after its first cell, MiB.
    pub branch_uss_mib: Vec<f64>,
    /// Each branch's kernel PSS after its first cell, MiB.
    pub branch_pss_mib: Vec<f64>,
}

fn value_of(r: &Value) -> Result<Value, String> {
    if r["status"] != "completed" {
        return Err(format!("a cell ended {}: {}", r["status"], r["stderr"]));
    }
    let text = r["value"]["repr"].as_str().unwrap_or_default();
    serde_json::from_str(&text.replace('(', "[").replace(')', "]"))
        .map_err(|e| format!("{e}: {text}"))
}

fn cell(s: &mut Server, sid: &Value, code: &str) -> Result<Value, String> {
    let r = s.call("sandbox.run_code", json!({"sandbox_id": sid, "code": code}))?;
    value_of(&r)
}

/// `rounds` rounds on one server with its own state directory.
pub fn measure(cli: &Path, rounds: usize) -> Result<Vec<Round>, String> {
    on_a_server(cli, &[], rounds, round)
}

/// `rounds` of `each` on one server (its own state directory, `extra` flags).
fn on_a_server<R>(
    cli: &Path,
    extra: &[&str],
    rounds: usize,
    each: fn(&mut Server) -> Result<R, String>,
) -> Result<Vec<R>, String> {
    let state = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = state.path().join("state");
    let dir = dir.to_string_lossy().into_owned();
    let mut args = vec!["--state-dir", dir.as_str(), "--memory", "1024"];
    args.extend_from_slice(extra);
    let mut s = Server::start(cli, &args)?;
    let out = (0..rounds).map(|_| each(&mut s)).collect();
    s.stop();
    out
}

fn round(s: &mut Server) -> Result<Round, String> {
    let spec = json!({"spec": {"stateful": true, "requires": ["run_code", "snapshot"]}});
    let sid = s.call("sandbox.create", spec)?["sandbox_id"].clone();
    let check = cell(s, &sid, FILL)?;
    let before = cell(s, &sid, MEMORY)?;
    let t = Instant::now();
    s.call("sandbox.pause", json!({"sandbox_id": sid}))?;
    let pause_ms = ms(t);
    let t = Instant::now();
    let after = cell(s, &sid, "check")?;
    let resume_ms = ms(t);
    if after != check {
        return Err(format!("resumed with check {after}, paused with {check}"));
    }
    let t = Instant::now();
    let made = s.call(
        "sandbox.fork",
        json!({"sandbox_id": sid, "count": BRANCHES}),
    )?;
    let branches = made["sandbox_ids"].as_array().cloned().unwrap_or_default();
    let (pss, _) = branch_memory(s, &branches, &check)?;
    let fork_ms_per_branch = ms(t) / BRANCHES as f64;
    for b in branches.iter().chain(std::iter::once(&sid)) {
        s.call("sandbox.dispose", json!({"sandbox_id": b}))?;
    }
    Ok(Round {
        pause_ms,
        rss: before[0].as_f64().unwrap_or(0.0),
        resume_ms,
        fork_ms_per_branch,
        branch_pss_mib: pss,
    })
}

/// A first cell in each branch: (PSS, USS) of each, MiB; each must hold `check`.
fn branch_memory(
    s: &mut Server,
    branches: &[Value],
    check: &Value,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let mib = |v: &Value| v.as_f64().unwrap_or(0.0) / f64::from(1 << 20);
    let (mut pss, mut uss) = (Vec::new(), Vec::new());
    for b in branches {
        let m = cell(s, b, MEMORY)?;
        if &m[2] != check {
            return Err(format!("a branch holds check {}, not {check}", m[2]));
        }
        pss.push(mib(&m[1]));
        uss.push(mib(&m[3]));
    }
    Ok((pss, uss))
}

/// `rounds` copy-on-write forks on a server started with `--fork-copy-on-write`.
pub fn measure_cow(cli: &Path, rounds: usize) -> Result<Vec<CowRound>, String> {
    on_a_server(cli, &["--fork-copy-on-write"], rounds, cow_round)
}

fn cow_round(s: &mut Server) -> Result<CowRound, String> {
    let spec = json!({"spec": {"stateful": true, "requires": ["run_code", "snapshot"]}});
    let sid = s.call("sandbox.create", spec)?["sandbox_id"].clone();
    let check = cell(s, &sid, FILL)?;
    let t = Instant::now();
    let made = s.call(
        "sandbox.fork",
        json!({"sandbox_id": sid, "count": BRANCHES}),
    )?;
    if made["copy_on_write"] != true {
        return Err(format!("the fork was not copy-on-write: {made}"));
    }
    let branches = made["sandbox_ids"].as_array().cloned().unwrap_or_default();
    let (pss, uss) = branch_memory(s, &branches, &check)?;
    let fork_ms_per_branch = ms(t) / BRANCHES as f64;
    for b in branches.iter().chain(std::iter::once(&sid)) {
        s.call("sandbox.dispose", json!({"sandbox_id": b}))?;
    }
    Ok(CowRound {
        fork_ms_per_branch,
        branch_uss_mib: uss,
        branch_pss_mib: pss,
    })
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
