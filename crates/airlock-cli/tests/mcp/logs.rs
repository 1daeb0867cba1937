//! What `airlock mcp` writes to its client's stderr (docs/mcp.md): `--log-level LEVEL`
//! filters, and beats `RUST_LOG`; without it `RUST_LOG`, else `warn`; ANSI colour only on a
//! terminal (a pipe gets none).
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use super::AIRLOCK;

/// An MCP session (initialize, one `run_python`, EOF) on a fresh `airlock mcp`; its stderr.
fn session_stderr(flags: &[&str], rust_log: Option<&str>) -> String {
    let mut cmd = Command::new(AIRLOCK);
    cmd.arg("mcp")
        .args(flags)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(v) = rust_log {
        cmd.env("RUST_LOG", v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        stderr.read_to_string(&mut s).unwrap();
        s
    });
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "t", "version": "0"}});
    for m in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "run_python", "arguments": {"code": "print(6*7)"}}}),
    ] {
        writeln!(stdin, "{m}").unwrap();
    }
    stdin.flush().unwrap();
    let answer = loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "EOF before the answer"
        );
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == 2 {
            break v;
        }
    };
    assert_eq!(
        answer["result"]["structuredContent"]["stdout"], "42\n",
        "{answer}"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
    reader.join().unwrap()
}

fn info_lines(stderr: &str) -> usize {
    stderr.lines().filter(|l| l.contains(" INFO ")).count()
}

#[test]
fn log_level_filters_mcp_s_stderr_and_a_pipe_gets_no_colour() {
    for (flags, rust_log) in [
        (&[][..], None),
        (&["--log-level", "warn"][..], Some("info")),
    ] {
        let err = session_stderr(flags, rust_log);
        assert_eq!(info_lines(&err), 0, "{flags:?} {rust_log:?}: {err}");
    }
    for (flags, rust_log) in [
        (&["--log-level", "info"][..], Some("warn")),
        (&[][..], Some("info")),
    ] {
        let err = session_stderr(flags, rust_log);
        assert!(info_lines(&err) >= 2, "{flags:?} {rust_log:?}: {err}");
        assert!(!err.contains('\x1b'), "{flags:?}: ANSI escape in {err:?}");
    }
}
