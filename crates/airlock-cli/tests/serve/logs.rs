//! What `airlock serve --stdio` writes to the stderr of the program that spawned it
//! (docs/server.md, "Logs"): `--log-level LEVEL` filters, and beats `RUST_LOG`; without it
//! `RUST_LOG`, else `info`; ANSI colour only on a terminal (a pipe or file gets none).
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use super::support::binary;

/// A normal session on a fresh `serve --stdio` (create, run, write, dispose, EOF); the
/// server's whole stderr.
fn session_stderr(flags: &[&str], rust_log: Option<&str>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(binary());
    // A state directory of its own: the machine's default may be held by another server,
    // which is worth a warning that this test is not about.
    cmd.args(["serve", "--stdio", "--state-dir"])
        .arg(dir.path().join("state"))
        .args(flags)
        .env_remove("RUST_LOG")
        .env("TMPDIR", dir.path())
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
    let mut call = |id: i64, method: &str, params: Value| -> Value {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let body = body.to_string();
        write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        stdin.flush().unwrap();
        read_frame(&mut stdout)
    };
    let r = call(1, "sandbox.create", json!({"spec": {}}));
    let sid = r["result"]["sandbox_id"].as_str().unwrap().to_owned();
    let r = call(
        2,
        "sandbox.run_code",
        json!({"sandbox_id": sid, "code": "print(6*7)"}),
    );
    assert_eq!(r["result"]["stdout"], "42\n", "{r}");
    let r = call(3, "execute", json!({"code": "print(1)"}));
    assert_eq!(r["result"]["status"], "completed", "{r}");
    let r = call(4, "sandbox.dispose", json!({"sandbox_id": sid}));
    assert!(r.get("result").is_some(), "{r}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    reader.join().unwrap()
}

fn read_frame(r: &mut impl BufRead) -> Value {
    let mut len = 0;
    loop {
        let mut line = String::new();
        assert!(r.read_line(&mut line).unwrap() > 0, "EOF before a response");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((_, v)) = line.split_once(':') {
            len = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body).unwrap()
}

fn info_lines(stderr: &str) -> usize {
    stderr.lines().filter(|l| l.contains(" INFO ")).count()
}

#[test]
fn log_level_warn_keeps_a_normal_session_quiet_and_info_brings_the_lines_back() {
    // What the SDK spawns: nothing on stderr for a session that goes well, even under an
    // ambient RUST_LOG meant for something else.
    for rust_log in [None, Some("info")] {
        let err = session_stderr(&["--log-level", "warn"], rust_log);
        assert_eq!(err, "", "RUST_LOG={rust_log:?}");
    }
    // `--log-level info` (and, without the flag, the default and RUST_LOG) bring them back;
    // never a colour code, since stderr is a pipe here.
    for (flags, rust_log) in [
        (&["--log-level", "info"][..], Some("warn")),
        (&[][..], None),
        (&[][..], Some("info")),
    ] {
        let err = session_stderr(flags, rust_log);
        assert!(info_lines(&err) >= 4, "{flags:?} {rust_log:?}: {err}");
        assert!(err.contains("connection opened"), "{err}");
        assert!(!err.contains('\x1b'), "{flags:?}: ANSI escape in {err:?}");
    }
    // And RUST_LOG still filters when no flag is given.
    let err = session_stderr(&[], Some("warn"));
    assert_eq!(info_lines(&err), 0, "{err}");
}
