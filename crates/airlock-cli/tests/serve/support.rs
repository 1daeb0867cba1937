//! Spawning a real `airlock serve` and talking to it: a WebSocket client (tokio-tungstenite),
//! a Content-Length stdio client, and the leak probes (descendant processes, fds, run dirs).
#![allow(dead_code, reason = "each test binary uses a different subset")]
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub const CAP: usize = 1024 * 1024;
/// No single response in these tests takes longer than this.
pub const PATIENCE: Duration = Duration::from_secs(60);

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_airlock")
}

/// `airlock token add TENANT --token-file FILE`: the secret it prints.
pub fn token_add(file: &std::path::Path, tenant: &str) -> String {
    let out = Command::new(binary())
        .args(["token", "add", tenant, "--token-file"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A running `airlock serve --listen 127.0.0.1:0`, killed (and reaped) on drop.
pub struct WsServer {
    pub child: Child,
    pub addr: String,
    /// The metrics listener's address (`--metrics-listen`).
    pub metrics: Option<String>,
    pub token: String,
    pub dir: tempfile::TempDir,
}

impl WsServer {
    pub fn start(extra: &[&str]) -> WsServer {
        Self::start_as(None, extra)
    }

    /// Like [`WsServer::start`], with the server running as `user` (through `setpriv`, which
    /// execs in place, so the child is the server itself) when given.
    pub fn start_as(user: Option<&str>, extra: &[&str]) -> WsServer {
        Self::start_wrapped(user, &[], extra)
    }

    /// Like [`WsServer::start_as`], with the binary started by `wrapper` (a program and its
    /// arguments that exec the rest of their command line) when it is not empty.
    pub fn start_wrapped(user: Option<&str>, wrapper: &[&str], extra: &[&str]) -> WsServer {
        let dir = tempfile::tempdir().unwrap();
        let token =
            format!("test-token-{}-{:?}", std::process::id(), Instant::now()).replace(' ', "");
        let token: String = token
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        std::fs::write(dir.path().join("token"), &token).unwrap();
        Self::start_in(user, wrapper, dir, token, extra)
    }

    /// A server whose `--token-file` is a tenants file made by `airlock token add` for each
    /// of `tenants` (as root, before the server starts); the tokens by tenant. `token` is the
    /// first tenant's.
    pub fn start_tenants(
        user: Option<&str>,
        tenants: &[&str],
        extra: &[&str],
    ) -> (WsServer, std::collections::BTreeMap<String, String>) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        let tokens: std::collections::BTreeMap<String, String> = tenants
            .iter()
            .map(|t| (t.to_string(), token_add(&file, t)))
            .collect();
        let first = tokens[tenants[0]].clone();
        (Self::start_in(user, &[], dir, first, extra), tokens)
    }

    /// Start the server on `dir` (which holds its `token` file), as `user` when given, through
    /// `wrapper` when it is not empty.
    fn start_in(
        user: Option<&str>,
        wrapper: &[&str],
        dir: tempfile::TempDir,
        token: String,
        extra: &[&str],
    ) -> WsServer {
        std::fs::create_dir(dir.path().join("tmp")).unwrap();
        let mut cmd = airlock_as(user, wrapper, dir.path());
        let mut child = cmd
            .args(["serve", "--listen", "127.0.0.1:0", "--token-file"])
            .arg(dir.path().join("token"))
            .arg("--audit")
            .arg(dir.path().join("audit.jsonl"))
            .args(extra)
            .env("RUST_LOG", "warn")
            .env("TMPDIR", dir.path().join("tmp"))
            .env_remove("AIRLOCK_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("stderr")).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut line).unwrap();
        // `--metrics-listen` adds a second line: its address.
        let mut metrics = None;
        if extra.contains(&"--metrics-listen") {
            let mut second = String::new();
            stdout.read_line(&mut second).unwrap();
            metrics = second
                .trim()
                .strip_prefix("metrics on http://")
                .map(str::to_owned);
        }
        let addr = line
            .trim()
            .strip_prefix("listening on ws://")
            .unwrap_or_else(|| panic!("{line:?}"))
            .to_string();
        WsServer {
            child,
            addr,
            metrics,
            token,
            dir,
        }
    }

    /// A connection with `token`.
    pub async fn connect_as(&self, token: &str) -> WsClient {
        self.connect_with(Some(&format!("Bearer {token}")))
            .await
            .unwrap()
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn url(&self) -> String {
        format!("ws://{}/", self.addr)
    }

    pub async fn connect(&self) -> WsClient {
        self.connect_with(Some(&format!("Bearer {}", self.token)))
            .await
            .unwrap()
    }

    pub async fn connect_with(
        &self,
        auth: Option<&str>,
    ) -> Result<WsClient, tokio_tungstenite::tungstenite::Error> {
        let mut req = self.url().into_client_request().unwrap();
        if let Some(a) = auth {
            req.headers_mut()
                .insert("authorization", a.parse().unwrap());
        }
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(64 << 20))
            .max_frame_size(Some(64 << 20));
        let (ws, _) =
            tokio_tungstenite::connect_async_with_config(req, Some(config), false).await?;
        Ok(WsClient::new(ws))
    }

    /// The audit file's run records (policy events, which carry an `event` member, left out).
    pub fn audit(&self) -> Vec<Value> {
        audit_lines(self.dir.path(), false)
    }

    /// The audit file's policy events.
    pub fn audit_events(&self) -> Vec<Value> {
        audit_lines(self.dir.path(), true)
    }

    /// The audit records once there are at least `n` (the record of a cancelled run is written
    /// after its executor is reaped), or whatever is there after `within`.
    pub fn audit_at_least(&self, n: usize, within: Duration) -> Vec<Value> {
        let until = std::time::Instant::now() + within;
        loop {
            let audit = self.audit();
            if audit.len() >= n || std::time::Instant::now() > until {
                return audit;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    pub fn run_dirs(&self) -> Vec<String> {
        run_dirs(&self.dir.path().join("tmp"))
    }

    /// SIGTERM, then wait (bounded) for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        signal(self.pid(), libc_sigterm());
        wait_bounded(&mut self.child, Duration::from_secs(30))
            .expect("server did not exit after SIGTERM")
    }
}

impl Drop for WsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The JSON lines of `dir/audit.jsonl`: policy events (`events`) or run records.
fn audit_lines(dir: &Path, events: bool) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("event").is_some() == events)
        .collect()
}

pub fn libc_sigterm() -> i32 {
    15
}

pub fn signal(pid: i32, sig: i32) {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{sig} {pid}");
}

pub fn wait_bounded(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

pub struct WsClient {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// The id the next [`WsClient::request`] uses.
    pub next_id: i64,
    /// Messages read while waiting for another id (see [`WsClient::wait_for`]).
    pub stash: Vec<Value>,
}

/// How a test answers a `call_tool`: Ok(result) or Err((code, message)).
pub type ToolFn<'a> = &'a (dyn Fn(&str, &Value) -> Result<Value, (i64, String)> + Sync);

pub fn echo_tools(name: &str, args: &Value) -> Result<Value, (i64, String)> {
    match name {
        "echo" => Ok(args.clone()),
        "add" => Ok(json!(
            args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)
        )),
        "fail" => Err((-32001, "it failed on purpose".into())),
        _ => Err((-32013, format!("no tool {name}"))),
    }
}

pub fn tool_answer(id: &Value, outcome: Result<Value, (i64, String)>) -> Value {
    match outcome {
        Ok(v) => json!({"jsonrpc": "2.0", "id": id, "result": v}),
        Err((code, message)) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        }
    }
}

impl WsClient {
    pub fn new(ws: WebSocketStream<MaybeTlsStream<TcpStream>>) -> WsClient {
        WsClient {
            ws,
            next_id: 1000,
            stash: Vec::new(),
        }
    }

    pub async fn send(&mut self, v: &Value) {
        self.ws.send(WsMessage::text(v.to_string())).await.unwrap();
    }

    pub async fn send_text(&mut self, t: String) {
        self.ws.send(WsMessage::text(t)).await.unwrap();
    }

    /// The next JSON-RPC message, or None when the server closed the connection.
    pub async fn recv(&mut self) -> Option<Value> {
        loop {
            let next = tokio::time::timeout(PATIENCE, self.ws.next())
                .await
                .expect("no message in time");
            match next {
                Some(Ok(WsMessage::Text(t))) => {
                    return Some(serde_json::from_str(t.as_str()).unwrap())
                }
                Some(Ok(WsMessage::Close(_))) | None | Some(Err(_)) => return None,
                Some(Ok(_)) => continue,
            }
        }
    }

    /// The close frame's code, reading past any messages first (which are returned).
    pub async fn recv_until_close(&mut self) -> (Vec<Value>, Option<u16>) {
        let mut got = Vec::new();
        loop {
            let next = tokio::time::timeout(PATIENCE, self.ws.next())
                .await
                .expect("no close in time");
            match next {
                Some(Ok(WsMessage::Text(t))) => got.push(serde_json::from_str(t.as_str()).unwrap()),
                Some(Ok(WsMessage::Close(f))) => return (got, f.map(|f| u16::from(f.code))),
                None | Some(Err(_)) => return (got, None),
                Some(Ok(_)) => continue,
            }
        }
    }

    pub async fn execute(&mut self, id: i64, params: Value, tools: ToolFn<'_>) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "execute", "params": params}))
            .await;
        self.finish(id, tools).await
    }

    /// Answer `call_tool`s until the response to `id` arrives; returns it.
    pub async fn finish(&mut self, id: i64, tools: ToolFn<'_>) -> Value {
        loop {
            let m = self
                .recv()
                .await
                .expect("connection closed before the terminal response");
            if m["method"] == "call_tool" {
                let answer = tools(
                    m["params"]["tool"].as_str().unwrap_or(""),
                    &m["params"]["args"],
                );
                self.send(&tool_answer(&m["id"], answer)).await;
            } else if m["id"] == json!(id) {
                return m;
            } else {
                panic!("unexpected message while waiting for {id}: {m}");
            }
        }
    }
}

/// `airlock serve --stdio` with a Content-Length client on its pipes.
pub struct StdioServer {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub stdout: BufReader<ChildStdout>,
    pub dir: tempfile::TempDir,
}

impl StdioServer {
    pub fn start(extra: &[&str]) -> StdioServer {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tmp")).unwrap();
        let mut child = Command::new(binary())
            .args(["serve", "--stdio", "--audit"])
            .arg(dir.path().join("audit.jsonl"))
            .args(extra)
            .env("RUST_LOG", "warn")
            .env("AIRLOCK_TOKEN", "a-secret-that-must-not-reach-the-guest")
            .env("TMPDIR", dir.path().join("tmp"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("stderr")).unwrap())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        StdioServer {
            child,
            stdin,
            stdout,
            dir,
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let w = self.stdin.as_mut().unwrap();
        w.write_all(bytes).unwrap();
        w.flush().unwrap();
    }

    pub fn send(&mut self, v: &Value) {
        let body = v.to_string();
        self.send_raw(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    }

    /// The next framed message, or None at EOF. Blocking (the tests run it on a plain thread).
    pub fn recv(&mut self) -> Option<Value> {
        let mut len = None;
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line).unwrap() == 0 {
                return None;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (k, v) = line.split_once(':').unwrap();
            assert!(
                k.eq_ignore_ascii_case("content-length"),
                "unexpected header {line:?}"
            );
            len = Some(v.trim().parse::<usize>().unwrap());
        }
        let mut body = vec![0; len.expect("no content-length")];
        self.stdout.read_exact(&mut body).unwrap();
        Some(serde_json::from_slice(&body).unwrap())
    }

    pub fn execute(&mut self, id: i64, params: Value, tools: ToolFn<'_>) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "execute", "params": params}));
        self.finish(id, tools)
    }

    pub fn finish(&mut self, id: i64, tools: ToolFn<'_>) -> Value {
        loop {
            let m = self.recv().expect("eof before the terminal response");
            if m["method"] == "call_tool" {
                let answer = tools(
                    m["params"]["tool"].as_str().unwrap_or(""),
                    &m["params"]["args"],
                );
                self.send(&tool_answer(&m["id"], answer));
            } else if m["id"] == json!(id) {
                return m;
            } else {
                panic!("unexpected message while waiting for {id}: {m}");
            }
        }
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The audit file's run records (policy events, which carry an `event` member, left out).
    pub fn audit(&self) -> Vec<Value> {
        audit_lines(self.dir.path(), false)
    }

    /// The audit file's policy events.
    pub fn audit_events(&self) -> Vec<Value> {
        audit_lines(self.dir.path(), true)
    }

    pub fn run_dirs(&self) -> Vec<String> {
        run_dirs(&self.dir.path().join("tmp"))
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `airlock-run-*` dirs left in `tmp`.
pub fn run_dirs(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("airlock-run-"))
                .collect()
        })
        .unwrap_or_default()
}

fn ppid_of(pid: &str) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    after.split_whitespace().nth(1).map(str::to_string)
}

/// Every live descendant of `pid` (walks /proc by ppid), but the server's zygote: it is the
/// server's own long-lived helper (never runs untrusted code), not a run's process.
pub fn descendants(pid: i32) -> Vec<i32> {
    all_descendants(pid)
        .into_iter()
        .filter(|p| !is_zygote_of(pid, *p))
        .collect()
}

/// Every live descendant of `pid`, the zygote included.
pub fn all_descendants(pid: i32) -> Vec<i32> {
    let all: Vec<(String, String)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|p| ppid_of(&p).map(|pp| (p, pp)))
        .collect();
    let mut out = Vec::new();
    let mut frontier = vec![pid.to_string()];
    while let Some(parent) = frontier.pop() {
        for (p, pp) in &all {
            if *pp == parent {
                out.push(p.parse().unwrap());
                frontier.push(p.clone());
            }
        }
    }
    out
}

fn cmdline_has(pid: i32, needle: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| c.windows(needle.len()).any(|w| w == needle))
        .unwrap_or(false)
}

/// Whether `child` is `server`'s zygote: the interpreter that loaded libairlock_zygote.so, in
/// the server's own user namespace (a run forked from it has entered its sandbox's).
pub fn is_zygote_of(server: i32, child: i32) -> bool {
    let userns = |p: i32| std::fs::read_link(format!("/proc/{p}/ns/user")).ok();
    cmdline_has(child, b"libairlock_zygote.so")
        && ppid_of(&child.to_string()) == Some(server.to_string())
        && userns(child).is_some()
        && userns(child) == userns(server)
}

/// The run stages of `pid`: its children that are a spawned `airlock __executor` or a process
/// the zygote forked for a run (each the server's child), not the zygote itself.
pub fn executors(pid: i32) -> Vec<i32> {
    all_descendants(pid)
        .into_iter()
        .filter(|p| {
            cmdline_has(*p, b"__executor")
                || (cmdline_has(*p, b"libairlock_zygote.so")
                    && ppid_of(&p.to_string()) == Some(pid.to_string())
                    && !is_zygote_of(pid, *p))
        })
        .collect()
}

/// Wait until `pid` has no descendants (bounded); returns what is left.
pub fn settle(pid: i32, within: Duration) -> Vec<i32> {
    let end = Instant::now() + within;
    loop {
        let left = descendants(pid);
        if left.is_empty() || Instant::now() > end {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

pub fn fd_list(pid: i32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| {
                    std::fs::read_link(e.path())
                        .map(|l| l.display().to_string())
                        .unwrap_or_default()
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn result_of(resp: &Value) -> &Value {
    assert!(resp.get("error").is_none(), "expected a result: {resp}");
    &resp["result"]
}

pub fn error_code(resp: &Value) -> i64 {
    resp["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error: {resp}"))
}

pub fn temp_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

// ---- the session methods (`sandbox.*`, `files.*`, `run.cancel`) ----

/// Base64 of `bytes` (the file methods' encoding).
pub fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The bytes of a base64 `data` member.
pub fn unb64(v: &Value) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(v.as_str().unwrap_or_else(|| panic!("not base64 text: {v}")))
        .unwrap()
}

/// `data.kind` of a `sandbox_refused` error.
pub fn refusal_kind(resp: &Value) -> &str {
    assert_eq!(error_code(resp), -32007, "{resp}");
    resp["error"]["data"]["kind"].as_str().unwrap_or("")
}

/// The text of `run_id`'s `output` notifications on `stream`, in arrival order.
pub fn output_text(notes: &[Value], run_id: &str, stream: &str) -> String {
    notes
        .iter()
        .filter(|n| n["method"] == "output" && n["params"]["run_id"] == run_id)
        .filter(|n| n["params"]["stream"] == stream)
        .map(|n| n["params"]["data"].as_str().unwrap().to_string())
        .collect()
}

impl WsClient {
    /// Send `method` with a fresh id; returns the id.
    pub async fn request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// One request and its response; notifications in between are dropped, a `call_tool`
    /// is a test failure (use [`WsClient::wait_for`] for runs that call tools).
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        let (resp, notes) = self.wait_for(id, &no_tools).await;
        assert!(
            notes.iter().all(|n| n["method"] != "call_tool"),
            "{notes:?}"
        );
        resp
    }

    /// The response to `id`, answering `call_tool`s with `tools`. Returns it and every other
    /// message that arrived first (notifications and tool calls, in order); responses to other
    /// ids are kept in `stash` for their own `wait_for`.
    pub async fn wait_for(&mut self, id: i64, tools: ToolFn<'_>) -> (Value, Vec<Value>) {
        if let Some(i) = self.stash.iter().position(|m| m["id"] == json!(id)) {
            return (self.stash.remove(i), Vec::new());
        }
        let mut seen = Vec::new();
        loop {
            let m = self
                .recv()
                .await
                .unwrap_or_else(|| panic!("connection closed before the response to {id}"));
            if m["method"] == "call_tool" {
                let answer = tools(
                    m["params"]["tool"].as_str().unwrap_or(""),
                    &m["params"]["args"],
                );
                self.send(&tool_answer(&m["id"], answer)).await;
                seen.push(m);
            } else if m["id"] == json!(id) && m.get("method").is_none() {
                return (m, seen);
            } else if m.get("method").is_some() {
                seen.push(m);
            } else {
                self.stash.push(m);
            }
        }
    }
}

/// Tools for a test that expects no `call_tool` (every call fails the test).
pub fn no_tools(name: &str, _args: &Value) -> Result<Value, (i64, String)> {
    panic!("unexpected call_tool {name:?}")
}

impl StdioServer {
    /// One request and its response (blocking); `output` notifications in between are
    /// returned with it.
    pub fn call(&mut self, id: i64, method: &str, params: Value) -> (Value, Vec<Value>) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut notes = Vec::new();
        loop {
            let m = self.recv().expect("eof before the response");
            if m["id"] == json!(id) && m.get("method").is_none() {
                return (m, notes);
            }
            assert_eq!(m["method"], "output", "unexpected message: {m}");
            notes.push(m);
        }
    }
}

/// The real uid of `pid`, if it still exists.
pub fn uid_of(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Every process on the host (any parent) whose real uid is one of `uids`.
pub fn processes_of(uids: &[u32]) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| uid_of(*p).is_some_and(|u| uids.contains(&u)))
        .collect()
}

/// Which of `pids` still exist.
pub fn still_alive(pids: &[i32]) -> Vec<i32> {
    pids.iter()
        .copied()
        .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
        .collect()
}

/// The server's descriptors on mount namespaces (a live sandbox holds one).
pub fn mount_ns_fds(pid: i32) -> usize {
    fd_list(pid)
        .iter()
        .filter(|l| l.starts_with("mnt:["))
        .count()
}

/// Held by the tests that read the host's `Shmem` and by those that put tens of MiB or more in
/// sandboxes' filesystems: one of them at a time, since the tests of a binary run side by side
/// and their figures would mix.
pub static SHMEM: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `Shmem` of /proc/meminfo (tmpfs pages, the sandboxes' files included), KiB.
pub fn shmem_kib() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = text.lines().find(|l| l.starts_with("Shmem:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

// =============================================================================================
// Session load and fault probes (serve_load.rs, serve/session_faults.rs): a client that
// multiplexes many requests on one connection, process snapshots that survive the server's
// death, and memory probes. One module, so it merges beside other additions to this file.
// =============================================================================================
pub mod session_probes {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use futures_util::{SinkExt, StreamExt};
    use serde_json::{json, Value};
    use tokio::net::TcpStream;
    use tokio::sync::{mpsc, oneshot};
    use tokio::task::JoinHandle;
    use tokio_tungstenite::tungstenite::Message as WsMessage;
    use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

    use super::{shmem_kib, tool_answer, PATIENCE};

    /// The bytes of standard base64 text.
    pub fn unb64_text(text: &str) -> Vec<u8> {
        super::unb64(&Value::String(text.to_owned()))
    }

    /// How the reader answers `call_tool` (it lives in the reader task).
    pub type SharedTools = Arc<dyn Fn(&str, &Value) -> Result<Value, (i64, String)> + Send + Sync>;

    /// One response, with the `output` notifications and `call_tool`s of its run (when it is a
    /// run's result) that arrived before it.
    #[derive(Debug)]
    pub struct Reply {
        pub msg: Value,
        pub outputs: Vec<Value>,
        pub tool_calls: usize,
    }

    impl Reply {
        /// The concatenated `data` of this run's notifications on `stream`.
        pub fn streamed(&self, stream: &str) -> String {
            self.outputs
                .iter()
                .filter(|n| n["params"]["stream"] == stream)
                .map(|n| n["params"]["data"].as_str().unwrap_or(""))
                .collect()
        }
    }

    #[derive(Default)]
    struct State {
        waiting: HashMap<i64, oneshot::Sender<Reply>>,
        outputs: HashMap<String, Vec<Value>>,
        tool_calls: HashMap<String, usize>,
        /// Notifications of any run received so far.
        outputs_seen: usize,
        /// Responses nobody waited for (a duplicate, an unknown id) and unknown messages.
        strays: Vec<Value>,
    }

    type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

    /// A connection carrying many requests at once: a writer task, a reader task that answers
    /// `call_tool`, files `output` notifications by run id and hands each response to its
    /// waiter — exactly once; anything else is kept as a stray.
    pub struct Mux {
        out: mpsc::UnboundedSender<WsMessage>,
        state: Arc<Mutex<State>>,
        next: AtomicI64,
        reader: JoinHandle<()>,
        writer: JoinHandle<()>,
    }

    fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn on_message(
        m: Value,
        state: &Mutex<State>,
        tools: &SharedTools,
        out: &mpsc::UnboundedSender<WsMessage>,
    ) {
        let run_id = m["params"]["run_id"].as_str().unwrap_or("").to_string();
        let mut st = lock(state);
        match m["method"].as_str() {
            Some("call_tool") => {
                *st.tool_calls.entry(run_id).or_default() += 1;
                drop(st);
                let args = &m["params"]["args"];
                let answer = tools(m["params"]["tool"].as_str().unwrap_or(""), args);
                let _ = out.send(WsMessage::text(tool_answer(&m["id"], answer).to_string()));
            }
            Some("output") => {
                st.outputs_seen += 1;
                st.outputs.entry(run_id).or_default().push(m);
            }
            Some(_) => st.strays.push(m),
            None => {
                let waiter = m["id"].as_i64().and_then(|id| st.waiting.remove(&id));
                let Some(tx) = waiter else {
                    st.strays.push(m);
                    return;
                };
                let run = m["result"]["run_id"].as_str().unwrap_or("").to_string();
                let outputs = st.outputs.remove(&run).unwrap_or_default();
                let tool_calls = st.tool_calls.remove(&run).unwrap_or_default();
                let _ = tx.send(Reply {
                    msg: m,
                    outputs,
                    tool_calls,
                });
            }
        }
    }

    impl Mux {
        pub fn new(ws: Ws, tools: SharedTools) -> Mux {
            let (mut sink, mut stream) = ws.split();
            let (out, mut rx) = mpsc::unbounded_channel::<WsMessage>();
            let writer = tokio::spawn(async move {
                while let Some(m) = rx.recv().await {
                    let close = matches!(m, WsMessage::Close(_));
                    if sink.send(m).await.is_err() || close {
                        break;
                    }
                }
            });
            let state = Arc::new(Mutex::new(State::default()));
            let (st, tx) = (Arc::clone(&state), out.clone());
            let reader = tokio::spawn(async move {
                while let Some(Ok(msg)) = stream.next().await {
                    match msg {
                        WsMessage::Text(t) => match serde_json::from_str(t.as_str()) {
                            Ok(v) => on_message(v, &st, &tools, &tx),
                            Err(_) => lock(&st).strays.push(json!({"unparsable": t.as_str()})),
                        },
                        WsMessage::Close(_) => break,
                        _ => {}
                    }
                }
                // Waiters still registered learn the connection is gone.
                lock(&st).waiting.clear();
            });
            Mux {
                out,
                state,
                next: AtomicI64::new(1),
                reader,
                writer,
            }
        }

        /// Send `method` and wait for its one response.
        pub async fn call(&self, method: &str, params: Value) -> Reply {
            self.try_call(method, params)
                .await
                .unwrap_or_else(|| panic!("connection closed before the response to {method}"))
        }

        /// Like [`Mux::call`]; None when the connection ends before the response.
        pub async fn try_call(&self, method: &str, params: Value) -> Option<Reply> {
            let id = self.next.fetch_add(1, Ordering::Relaxed);
            let (tx, rx) = oneshot::channel();
            lock(&self.state).waiting.insert(id, tx);
            let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            if self.out.send(WsMessage::text(req.to_string())).is_err() {
                return None;
            }
            match tokio::time::timeout(PATIENCE, rx).await {
                Ok(r) => r.ok(),
                Err(_) => panic!("no response to {method} {id} within {PATIENCE:?}"),
            }
        }

        /// `output` notifications received so far (runs whose result has not come included).
        pub fn outputs_seen(&self) -> usize {
            lock(&self.state).outputs_seen
        }

        /// Close the connection, read to its end, and return every message that was not the one
        /// response to a request (duplicates, unknown ids, notifications after their result).
        pub async fn close(self) -> Vec<Value> {
            let _ = self.out.send(WsMessage::Close(None));
            let _ = tokio::time::timeout(PATIENCE, self.reader).await;
            self.writer.abort();
            let mut st = lock(&self.state);
            let mut strays = std::mem::take(&mut st.strays);
            strays.extend(st.outputs.drain().flat_map(|(_, v)| v));
            strays
        }
    }

    /// A process as it was seen: its pid and start time (so a reused pid is not mistaken for it).
    pub type Seen = (i32, u64);

    /// A process's start time (field 22 of /proc/<pid>/stat), None once it is gone.
    pub fn start_time(pid: i32) -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(19)?
            .parse()
            .ok()
    }

    /// Every descendant of `pid` now, with start times.
    pub fn snapshot(pid: i32) -> Vec<Seen> {
        super::descendants(pid)
            .into_iter()
            .filter_map(|p| start_time(p).map(|t| (p, t)))
            .collect()
    }

    fn is_zombie(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, a)| a.trim_start().starts_with('Z'))
            })
            .unwrap_or(false)
    }

    /// Which of `seen` are still alive (same pid, same start time; zombies count as gone).
    pub fn alive(seen: &[Seen]) -> Vec<i32> {
        seen.iter()
            .filter(|(p, t)| start_time(*p) == Some(*t) && !is_zombie(*p))
            .map(|(p, _)| *p)
            .collect()
    }

    /// Wait (bounded) until none of `seen` is alive; returns those left.
    pub fn wait_gone(seen: &[Seen], within: Duration) -> Vec<i32> {
        let end = Instant::now() + within;
        loop {
            let left = alive(seen);
            if left.is_empty() || Instant::now() > end {
                return left;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn status_kib(pid: i32, field: &str) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        text.lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// Resident memory of `pid`, KiB.
    pub fn rss_kib(pid: i32) -> u64 {
        status_kib(pid, "VmRSS:")
    }

    /// Peak resident memory of `pid` over its life, KiB.
    pub fn peak_rss_kib(pid: i32) -> u64 {
        status_kib(pid, "VmHWM:")
    }

    /// Wait (bounded) until `Shmem` is at most `kib`; returns the last reading.
    pub fn shmem_at_most(kib: u64, within: Duration) -> u64 {
        let end = Instant::now() + within;
        loop {
            let now = shmem_kib();
            if now <= kib || Instant::now() > end {
                return now;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Entries left in a directory.
    pub fn entries(dir: &std::path::Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// `server`'s own cgroup in every hierarchy mounted whole: where `airlock_jail::cgroup`
/// creates a run's cgroups.
pub fn own_cgroup_dirs(server: i32) -> Vec<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let own = std::fs::read_to_string(format!("/proc/{server}/cgroup")).unwrap();
    let mut dirs = Vec::new();
    for line in mountinfo.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let post: Vec<&str> = post.split_whitespace().collect();
        let pre: Vec<&str> = pre.split_whitespace().collect();
        let (Some(fstype), Some(root), Some(mountpoint)) = (post.first(), pre.get(3), pre.get(4))
        else {
            continue;
        };
        if *root != "/" || !matches!(*fstype, "cgroup" | "cgroup2") {
            continue;
        }
        let opts: Vec<&str> = post.get(2).map_or(vec![], |o| o.split(',').collect());
        let path = own.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (id, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
            let fits = if *fstype == "cgroup2" {
                id == "0" && ctrls.is_empty()
            } else {
                !ctrls.is_empty() && ctrls.split(',').all(|c| opts.contains(&c))
            };
            fits.then(|| path.trim_start_matches('/').to_string())
        });
        if let Some(path) = path {
            dirs.push(std::path::Path::new(mountpoint).join(path));
        }
    }
    dirs
}

/// Whether a child cgroup can be made beside `server`'s runs' (then its runs have cgroups,
/// and the leak check is not vacuous).
pub fn cgroups_writable(server: i32) -> bool {
    own_cgroup_dirs(server).iter().any(|d| {
        let probe = d.join(format!("serve-load-probe-{}", std::process::id()));
        std::fs::create_dir(&probe).is_ok() && std::fs::remove_dir(&probe).is_ok()
    })
}

/// The run cgroups `server` made that exist now: `airlock-*` directories named after its pid
/// (`airlock-<stage>-<pid>`, `airlock-z<n>-<pid>`, prefixed `airlock-` by airlock-jail) in its
/// own cgroup of every hierarchy.
pub fn run_cgroups(server: i32) -> std::collections::BTreeSet<PathBuf> {
    let suffix = format!("-{server}");
    let mut dirs = std::collections::BTreeSet::new();
    for dir in own_cgroup_dirs(server) {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("airlock-") && name.ends_with(&suffix) {
                dirs.insert(e.path());
            }
        }
    }
    dirs
}

/// A state directory (`--state-dir`) the server's `user` owns, 0700.
pub fn state_dir(user: Option<&str>) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    if let Some(u) = user {
        let st = Command::new("chown")
            .args([&format!("{u}:"), tmp.path().to_str().unwrap()])
            .status()
            .unwrap();
        assert!(st.success());
    }
    tmp
}

/// `method`'s result, asserting it is not an error.
pub async fn ok(c: &mut WsClient, method: &str, params: Value) -> Value {
    let r = c.call(method, params).await;
    assert!(r.get("error").is_none(), "{method}: {r}");
    result_of(&r).clone()
}

/// Who the server runs as: the invoking user, and the unprivileged test user when root.
pub fn identities() -> Vec<Option<&'static str>> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0\n"))
        .unwrap_or(false);
    if root {
        vec![None, Some("airlock-test")]
    } else {
        vec![None]
    }
}

/// `sandbox.create` with `params`: the new sandbox's id.
pub async fn create(c: &mut WsClient, params: Value) -> String {
    let r = c.call("sandbox.create", params).await;
    result_of(&r)["sandbox_id"].as_str().unwrap().to_string()
}

/// A server as `user` on a state directory of its own, with tenants `alice` and `bob`, and a
/// connection of each: (the state directory, the server, alice's, bob's).
pub async fn alice_and_bob_on_a_state_dir(
    user: Option<&str>,
) -> (tempfile::TempDir, WsServer, WsClient, WsClient) {
    let state = state_dir(user);
    let dir = state.path().to_str().unwrap().to_string();
    let (server, tokens) = WsServer::start_tenants(user, &["alice", "bob"], &["--state-dir", &dir]);
    let a = server.connect_as(&tokens["alice"]).await;
    let b = server.connect_as(&tokens["bob"]).await;
    (state, server, a, b)
}

/// The `airlock` binary to run as `user` (through `setpriv`, which execs in place, after
/// giving it `dir`), started by `wrapper` (a program and its arguments that exec the rest of
/// their command line) when that is not empty.
pub fn airlock_as(user: Option<&str>, wrapper: &[&str], dir: &std::path::Path) -> Command {
    match (user, wrapper.split_first()) {
        (None, None) => Command::new(binary()),
        (None, Some((program, args))) => {
            let mut c = Command::new(program);
            c.args(args).arg(binary());
            c
        }
        (Some(u), _) => {
            let st = Command::new("chown")
                .args(["-R", &format!("{u}:")])
                .arg(dir)
                .status()
                .unwrap();
            assert!(st.success());
            let mut c = Command::new("setpriv");
            c.args([
                &format!("--reuid={u}"),
                &format!("--regid={u}"),
                "--init-groups",
                "--",
            ]);
            c.args(wrapper).arg(binary());
            c
        }
    }
}

/// Busy loops on every core (two a core) until dropped: the load under which a test checks
/// that an ordering the product promises does not depend on scheduling.
pub struct CpuHog {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl CpuHog {
    pub fn start() -> CpuHog {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        let threads = (0..cores * 2)
            .map(|_| {
                let stop = std::sync::Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        CpuHog { stop, threads }
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
