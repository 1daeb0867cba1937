//! Tool calls from the sandbox: the handler trait the relay calls, and the command-backed
//! handler behind `airlock run --tool NAME=CMD`.
//!
//! A handler runs on the trusted side with the broker's authority; what reaches it is
//! guest-chosen (name and arguments), so handlers validate and bound what they do.
use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use airlock_protocol::ErrorCode;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

/// A tool call that did not produce a result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolFailure {
    /// Protocol error code (tool error, unknown tool, denied, limit ...).
    pub code: ErrorCode,
    /// A sentence the program (and the model behind it) can act on.
    pub message: String,
    /// Optional structured detail.
    pub data: Option<Value>,
}

impl ToolFailure {
    /// A failure with no structured detail.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }
}

/// Answers the sandbox's `call_tool` requests.
pub trait ToolHandler: Send + Sync {
    /// Call `name` with `args`.
    fn call<'a>(&'a self, name: &'a str, args: Value) -> BoxFuture<'a, Result<Value, ToolFailure>>;
}

/// A handler with no tools: every call is an unknown tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoTools;

impl ToolHandler for NoTools {
    fn call<'a>(&'a self, name: &'a str, _: Value) -> BoxFuture<'a, Result<Value, ToolFailure>> {
        Box::pin(async move { Err(unknown(name)) })
    }
}

fn unknown(name: &str) -> ToolFailure {
    // The name is guest-chosen: echo a bounded, printable rendering only.
    let shown: String = name.chars().filter(|c| !c.is_control()).take(64).collect();
    ToolFailure::new(
        ErrorCode::UnknownTool,
        format!("no tool named {shown:?} is available"),
    )
}

/// Tools backed by host commands: `sh -c CMD`, JSON arguments on stdin, JSON result on stdout.
#[derive(Debug, Clone, Default)]
pub struct CommandTools {
    commands: BTreeMap<String, String>,
    /// Per-call time budget.
    pub timeout: Duration,
    /// Largest stdout accepted from a tool.
    pub max_output_bytes: usize,
}

impl CommandTools {
    /// An empty set with a 30 s per-call budget and a 256 KiB output cap.
    pub fn new() -> Self {
        Self {
            commands: BTreeMap::new(),
            timeout: Duration::from_secs(30),
            max_output_bytes: 256 * 1024,
        }
    }

    /// Register `name` to run `command`.
    pub fn insert(&mut self, name: impl Into<String>, command: impl Into<String>) {
        self.commands.insert(name.into(), command.into());
    }

    /// Registered tool names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.commands.keys().map(String::as_str)
    }

    async fn run(&self, command: &str, args: Value) -> Result<Value, ToolFailure> {
        let fail = |m: String| ToolFailure::new(ErrorCode::ToolError, m);
        let mut child = tokio::process::Command::new("/bin/sh")
            .args(["-c", command])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| fail(format!("tool could not start: {e}")))?;
        let input = serde_json::to_vec(&args).map_err(|e| fail(e.to_string()))?;
        let mut stdin = child.stdin.take().ok_or_else(|| fail("no stdin".into()))?;
        let mut stdout = child
            .stdout
            .take()
            .ok_or_else(|| fail("no stdout".into()))?;
        let mut stderr = child
            .stderr
            .take()
            .ok_or_else(|| fail("no stderr".into()))?;
        let cap_bytes = self.max_output_bytes;
        let work = async {
            let write = async {
                let _ = stdin.write_all(&input).await;
                drop(stdin);
            };
            // Drain both pipes to the end, keeping only their heads, so a tool that writes past
            // a cap still runs to its exit (and fails at once) instead of blocking on a pipe.
            let read_out = crate::output::capture(&mut stdout, cap_bytes.saturating_add(1), None);
            let read_err = crate::output::capture(&mut stderr, 4096, None);
            let (_, out, err, status) = tokio::join!(write, read_out, read_err, child.wait());
            (out, err, status)
        };
        let (out, err, status) = tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| fail(format!("tool timed out after {:?}", self.timeout)))?;
        if out.truncated() || out.kept.len() > cap_bytes {
            return Err(fail(format!(
                "tool output exceeds {} bytes",
                self.max_output_bytes
            )));
        }
        let status = status.map_err(|e| fail(e.to_string()))?;
        if !status.success() {
            let detail = err.text().trim().to_string();
            return Err(fail(format!("tool exited with {status}: {detail}")));
        }
        serde_json::from_slice(&out.kept)
            .map_err(|e| fail(format!("tool printed invalid JSON: {e}")))
    }
}

impl ToolHandler for CommandTools {
    fn call<'a>(&'a self, name: &'a str, args: Value) -> BoxFuture<'a, Result<Value, ToolFailure>> {
        Box::pin(async move {
            match self.commands.get(name) {
                Some(command) => self.run(command, args).await,
                None => Err(unknown(name)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_command_tool_round_trips_json() {
        let mut tools = CommandTools::new();
        tools.insert("echo", "cat");
        let got = tools
            .call("echo", serde_json::json!({"a": [1, 2]}))
            .await
            .unwrap();
        assert_eq!(got, serde_json::json!({"a": [1, 2]}));
    }

    #[tokio::test]
    async fn failures_are_typed() {
        let mut tools = CommandTools::new();
        tools.insert("bad", "echo not-json");
        tools.insert("fails", "echo oops >&2; exit 3");
        assert_eq!(
            tools.call("bad", Value::Null).await.unwrap_err().code,
            ErrorCode::ToolError
        );
        let err = tools.call("fails", Value::Null).await.unwrap_err();
        assert!(err.message.contains("oops"), "{err:?}");
        let err = tools.call("missing\u{7}", Value::Null).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::UnknownTool);
        assert!(!err.message.contains('\u{7}'));
    }

    #[tokio::test]
    async fn floods_past_the_caps_fail_or_pass_at_once_not_at_the_timeout() {
        // A tool that writes far past both pipe buffers must not block on them (review #16).
        let mut tools = CommandTools::new();
        tools.timeout = Duration::from_secs(20);
        tools.insert("big", "head -c 400000 /dev/zero | tr '\\0' x; echo");
        tools.insert("noisy", "head -c 300000 /dev/zero >&2; echo '{\"ok\": 1}'");
        let started = std::time::Instant::now();
        let err = tools.call("big", Value::Null).await.unwrap_err();
        assert!(err.message.contains("exceeds"), "{err:?}");
        let ok = tools.call("noisy", Value::Null).await.unwrap();
        assert_eq!(ok, serde_json::json!({"ok": 1}));
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn oversized_tool_output_is_refused() {
        let mut tools = CommandTools::new();
        tools.max_output_bytes = 100;
        tools.insert("big", "head -c 1000 /dev/zero | tr '\\0' a");
        let err = tools.call("big", Value::Null).await.unwrap_err();
        assert!(err.message.contains("exceeds"), "{err:?}");
    }
}
