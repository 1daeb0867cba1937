//! An image through the wire (`airlock serve --stdio`, `spec.image`) and through MCP
//! (`airlock mcp --image`), as root and rootless.
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use serde_json::{json, Value};

use super::fixture::{fixture, Store};
use super::run::PANDAS;
use crate::support::{command, identities, As};

/// A spawned `airlock` speaking JSON-RPC on its stdio, framed or one message per line.
struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    framed: bool,
}

impl Peer {
    fn spawn(who: As, args: &[&str], framed: bool) -> Peer {
        let mut child = command(who)
            .args(args)
            .env("RUST_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Peer {
            child,
            stdin,
            stdout,
            framed,
        }
    }

    fn send(&mut self, v: &Value) {
        let body = serde_json::to_vec(v).unwrap();
        if self.framed {
            write!(self.stdin, "Content-Length: {}\r\n\r\n", body.len()).unwrap();
            self.stdin.write_all(&body).unwrap();
        } else {
            self.stdin.write_all(&body).unwrap();
            self.stdin.write_all(b"\n").unwrap();
        }
        self.stdin.flush().unwrap();
    }

    fn recv(&mut self) -> Value {
        if !self.framed {
            let mut line = String::new();
            self.stdout.read_line(&mut line).unwrap();
            return serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        }
        let mut len = 0;
        loop {
            let mut h = String::new();
            assert!(
                self.stdout.read_line(&mut h).unwrap() > 0,
                "the server closed"
            );
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some(v) = h.strip_prefix("Content-Length: ") {
                len = v.parse().unwrap();
            }
        }
        let mut body = vec![0; len];
        self.stdout.read_exact(&mut body).unwrap();
        serde_json::from_slice(&body).unwrap()
    }

    /// Sends a request and returns its response (notifications in between are skipped).
    fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let m = self.recv();
            if m["id"] == id && m.get("method").is_none() {
                return m;
            }
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pandas_store(who: As) -> Store {
    let store = Store::new(who);
    store.imported(&fixture().join("oci.tar"), "pandas");
    store
}

#[test]
fn a_wire_sandbox_runs_pandas_on_an_image() {
    for who in identities() {
        let store = pandas_store(who);
        let dir = store.path().to_str().unwrap();
        let mut s = Peer::spawn(who, &["serve", "--stdio", "--image-dir", dir], true);
        let made = s.call(1, "sandbox.create", json!({"spec": {"image": "pandas"}}));
        let id = made["result"]["sandbox_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{made}"));
        let r = s.call(
            2,
            "sandbox.run_code",
            json!({"sandbox_id": id, "code": PANDAS}),
        );
        let out = r["result"]["stdout"]
            .as_str()
            .unwrap_or_else(|| panic!("{who:?}: {r}"));
        assert!(
            out.starts_with("{'a': 8.0, 'b': 4.0, 'c': 0.0}\n"),
            "{who:?}: {r}"
        );
        assert!(
            out.trim_end().ends_with("/srv 1000 C.UTF-8"),
            "{who:?}: {out}"
        );
        // Files persist across runs of the sandbox, on the image's root.
        let r = s.call(
            3,
            "sandbox.exec",
            json!({"sandbox_id": id, "argv": ["/bin/sh", "-c", "echo x > /work/f && cat /etc/debian_version"]}),
        );
        assert_eq!(r["result"]["status"], "completed", "{r}");
        let r = s.call(
            4,
            "sandbox.run_code",
            json!({"sandbox_id": id, "code": "print(open('/work/f').read())"}),
        );
        assert_eq!(r["result"]["stdout"], "x\n\n", "{r}");
        // An image the store does not have is refused; a malformed name is invalid.
        let r = s.call(5, "sandbox.create", json!({"spec": {"image": "nope"}}));
        assert_eq!(r["error"]["code"], -32007, "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("no image named"),
            "{r}"
        );
        let r = s.call(6, "sandbox.create", json!({"spec": {"image": "../../etc"}}));
        assert_eq!(r["error"]["code"], -32602, "{r}");
    }
}

#[test]
fn mcp_runs_pandas_on_an_image() {
    for who in identities() {
        let store = pandas_store(who);
        let dir = store.path().to_str().unwrap();
        let mut m = Peer::spawn(
            who,
            &["mcp", "--image", "pandas", "--image-dir", dir],
            false,
        );
        let init = m.call(
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "images-test", "version": "0"}}),
        );
        assert!(init.get("result").is_some(), "{init}");
        m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let r = m.call(
            2,
            "tools/call",
            json!({"name": "run_python", "arguments": {"code": PANDAS}}),
        );
        let text = r["result"]["content"].to_string();
        assert!(
            text.contains("{'a': 8.0, 'b': 4.0, 'c': 0.0}"),
            "{who:?}: {r}"
        );
        assert!(r["result"]["isError"] != true, "{r}");
    }
}
