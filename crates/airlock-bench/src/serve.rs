//! `airlock serve`'s rows: `execute`, and `sandbox.run_code` in a live (not stateful) sandbox,
//! each `print(1)` timed from the request written to the response read, through a real
//! `airlock serve --stdio` child.
//!
//! Why the real server rather than `airlock_local::LocalSandbox::run_request` in process: the
//! figure these rows exist for is what an orchestrator gets from `airlock serve` as it ships,
//! and the server is where that is decided — which runner its flags build (the zygote by
//! default, `--exec-per-run`), that `execute` is a call-scoped sandbox made and disposed
//! through the router and its policy for every run, the session's run bookkeeping, the audit
//! record. Rebuilding that assembly here would measure the bench's copy of it, and would stop
//! measuring the server the day the two drift apart. What the process boundary adds is one
//! Content-Length frame each way over a pipe (tens of µs against a run's milliseconds), which
//! an orchestrator pays too. Each result's `via` is checked, so a row never reports a run the
//! server served another way than the row says.
use std::io::Read;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use airlock_protocol::{write_frame, FrameReader};
use serde_json::{json, Value};

/// Runs made and discarded first (the server's interpreter probe, the zygote's first forks).
const WARM_UP: usize = 5;

/// A running `airlock serve --stdio`, killed and reaped on drop.
pub(crate) struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    reader: FrameReader<ChildStdout>,
    stderr: std::fs::File,
    next: i64,
}

impl Server {
    pub(crate) fn start(cli: &Path, flags: &[&str]) -> Result<Server, String> {
        let stderr = tempfile::tempfile().map_err(|e| e.to_string())?;
        let mut child = Command::new(cli)
            .args(["serve", "--stdio"])
            .args(flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr.try_clone().map_err(|e| e.to_string())?)
            .env("RUST_LOG", "warn")
            .spawn()
            .map_err(|e| format!("starting airlock serve: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("airlock serve has no pipes".into());
        };
        Ok(Server {
            child,
            stdin: Some(stdin),
            reader: FrameReader::new(stdout),
            stderr,
            next: 1,
        })
    }

    /// What the server said on stderr (for an error message).
    fn said(&mut self) -> String {
        use std::io::Seek;
        let mut text = String::new();
        let _ = self.stderr.rewind();
        let _ = (&self.stderr).take(4096).read_to_string(&mut text);
        text.trim().to_owned()
    }

    /// One request and its result (notifications in between are skipped; this bench's
    /// programs call no tools).
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.send(method, params)?;
        let (got, answer) = self.answer()?;
        if got != id {
            return Err(format!("a response to another request ({got})"));
        }
        answer.map_err(|e| format!("{method}: {e}"))
    }

    /// Write one request; its id.
    fn send(&mut self, method: &str, params: Value) -> Result<i64, String> {
        let id = self.next;
        self.next += 1;
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let stdin = self.stdin.as_mut().ok_or("the server's stdin is closed")?;
        write_frame(stdin, req.to_string().as_bytes()).map_err(|e| e.to_string())?;
        Ok(id)
    }

    /// The next response (notifications skipped): its id, and its result or error.
    fn answer(&mut self) -> Result<(i64, Result<Value, Value>), String> {
        loop {
            let body = match self.reader.read_frame() {
                Ok(Some(b)) => b,
                Ok(None) => return Err(format!("airlock serve ended: {}", self.said())),
                Err(e) => return Err(e.to_string()),
            };
            let msg: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
            if msg.get("method").is_some() {
                continue;
            }
            let id = msg["id"]
                .as_i64()
                .ok_or_else(|| format!("no id in {msg}"))?;
            return Ok(match msg.get("error") {
                Some(e) => (id, Err(e.clone())),
                None => (id, Ok(msg["result"].clone())),
            });
        }
    }

    /// Close its stdin (it ends) and reap it, bounded.
    pub(crate) fn stop(mut self) {
        self.stdin = None;
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A run's result checked: completed, `1\n` out, served `via`; its `queued_ms` must be there.
fn check(r: &Value, via: &str) -> Result<(), String> {
    if r["status"] != "completed" || r["stdout"] != "1\n" {
        return Err(format!("the run ended {}: {}", r["status"], r["error"]));
    }
    if r["via"] != via {
        return Err(format!("served via {} where {via} was measured", r["via"]));
    }
    if !r["queued_ms"].is_number() {
        return Err(format!("no queued_ms in {r}"));
    }
    Ok(())
}

/// `runs` timed calls of `method` with `params` (after [`WARM_UP`] untimed ones); ms each.
fn timed(
    server: &mut Server,
    method: &str,
    params: &Value,
    via: &str,
    runs: usize,
) -> Result<Vec<f64>, String> {
    let mut out = Vec::with_capacity(runs);
    for i in 0..WARM_UP + runs {
        let t0 = Instant::now();
        let r = server.call(method, params.clone())?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        check(&r, via)?;
        if i >= WARM_UP {
            out.push(ms);
        }
    }
    Ok(out)
}

/// `execute` of `print(1)` on `airlock serve --stdio FLAGS`, its runs served `via`; ms.
pub fn execute(cli: &Path, flags: &[&str], via: &str, runs: usize) -> Result<Vec<f64>, String> {
    let mut server = Server::start(cli, flags)?;
    let params = json!({"code": "print(1)"});
    let r = timed(&mut server, "execute", &params, via, runs);
    server.stop();
    r
}

/// `sandbox.run_code` of `print(1)` in one live, not stateful sandbox of `airlock serve
/// --stdio FLAGS`, its runs served `via`; ms.
pub fn session_run(cli: &Path, flags: &[&str], via: &str, runs: usize) -> Result<Vec<f64>, String> {
    let mut server = Server::start(cli, flags)?;
    let r = (|| {
        let made = server.call(
            "sandbox.create",
            json!({"spec": {"requires": ["run_code"], "stateful": false}}),
        )?;
        let sid = made["sandbox_id"].clone();
        if !sid.is_string() {
            return Err(format!("sandbox.create said {made}"));
        }
        if made["stateful"] == true {
            return Err("the sandbox is stateful".into());
        }
        let params = json!({"sandbox_id": sid, "code": "print(1)"});
        let samples = timed(&mut server, "sandbox.run_code", &params, via, runs)?;
        server.call("sandbox.dispose", json!({"sandbox_id": sid}))?;
        Ok(samples)
    })();
    server.stop();
    r
}

/// `sandboxes` live sandboxes on one connection of `airlock serve --stdio
/// --max-concurrent-runs slots`, each running `print(1)` `runs` times, every sandbox's next run
/// sent the moment its last is answered (so `sandboxes` runs are always in flight): each run's
/// request-to-result time, ms, queueing for a slot included. None may be refused.
pub fn pipelined(
    cli: &Path,
    sandboxes: usize,
    runs: usize,
    slots: usize,
) -> Result<Vec<f64>, String> {
    let slots = slots.to_string();
    let flags = ["--max-concurrent-runs", &slots, "--max-sandboxes", "64"];
    let mut server = Server::start(cli, &flags)?;
    let r = pipelined_on(&mut server, sandboxes, runs);
    server.stop();
    r
}

fn pipelined_on(server: &mut Server, sandboxes: usize, runs: usize) -> Result<Vec<f64>, String> {
    let spec = json!({"spec": {"requires": ["run_code"], "stateful": false}});
    let mut ids = Vec::with_capacity(sandboxes);
    for _ in 0..sandboxes {
        let made = server.call("sandbox.create", spec.clone())?;
        ids.push(made["sandbox_id"].clone());
    }
    for sid in &ids {
        for _ in 0..WARM_UP {
            check(&server.call("sandbox.run_code", run_params(sid))?, "zygote")?;
        }
    }
    // In flight: request id -> (sandbox index, sent at, runs left after it).
    let mut flying = std::collections::HashMap::new();
    for (i, sid) in ids.iter().enumerate() {
        let id = server.send("sandbox.run_code", run_params(sid))?;
        flying.insert(id, (i, Instant::now(), runs - 1));
    }
    let mut out = Vec::with_capacity(sandboxes * runs);
    while !flying.is_empty() {
        let (id, answer) = server.answer()?;
        let (i, sent, left) = flying.remove(&id).ok_or("an answer to no request")?;
        out.push(sent.elapsed().as_secs_f64() * 1e3);
        check(
            &answer.map_err(|e| format!("sandbox.run_code: {e}"))?,
            "zygote",
        )?;
        if left > 0 {
            let next = server.send("sandbox.run_code", run_params(&ids[i]))?;
            flying.insert(next, (i, Instant::now(), left - 1));
        }
    }
    for sid in ids {
        server.call("sandbox.dispose", json!({"sandbox_id": sid}))?;
    }
    Ok(out)
}

fn run_params(sid: &Value) -> Value {
    json!({"sandbox_id": sid, "code": "print(1)"})
}
