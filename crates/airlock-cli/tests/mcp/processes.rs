//! `airlock mcp --processes` (issue 26): `start_process`, `process_output`, `stop_process` on
//! the session sandbox's machine, through a real MCP session over stdio, with the server run
//! as root and as the unprivileged `airlock-test`. A background HTTP server is reached from an
//! `exec` run (they share the machine's loopback), its log is read back, it is stopped; the
//! session's end (the client closing stdin) leaves no process behind, seen from the host's
//! /proc (a unique marker in the process's argv).
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    ProtocolVersion,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::ServiceExt;
use serde_json::{json, Value};

use super::{start, text, AIRLOCK};

/// The identities the server runs as.
const IDENTITIES: [Option<&str>; 2] = [None, Some("airlock-test")];

const TOOLS: [&str; 3] = ["start_process", "process_output", "stop_process"];

const POLICY: &str = "floor = \"os_process\"\n[limits]\ntimeout_seconds = 30\n";

/// A unique argument for `sleep` (a float GNU sleep accepts), so the host can find the process.
fn marker() -> String {
    use std::io::Read;
    let mut b = [0u8; 4];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut b)
        .unwrap();
    format!(
        "3141.{:05}{:09}",
        std::process::id() % 100_000,
        u32::from_ne_bytes(b) % 1_000_000_000
    )
}

/// Host pids whose command line carries `needle`.
fn marked(needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            let raw = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&raw).contains(needle)
        })
        .collect()
}

/// `airlock mcp --policy POLICY EXTRA...` run as `user` (through `setpriv`, which execs in
/// place), and an MCP client on its stdin/stdout; the client owns the stdin.
struct Session {
    child: tokio::process::Child,
    client: RunningService<RoleClient, ClientConfig>,
    _dir: tempfile::TempDir,
}

async fn session(user: Option<&str>, policy: &str, extra: &[&str]) -> Session {
    let dir = tempfile::tempdir().unwrap();
    let policy_path = dir.path().join("policy.toml");
    std::fs::write(&policy_path, policy).unwrap();
    let mut cmd = match user {
        None => tokio::process::Command::new(AIRLOCK),
        Some(u) => {
            let st = std::process::Command::new("chown")
                .args(["-R", &format!("{u}:")])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(st.success());
            let mut c = tokio::process::Command::new("setpriv");
            c.args([
                &format!("--reuid={u}"),
                &format!("--regid={u}"),
                "--init-groups",
                "--",
                AIRLOCK,
            ]);
            c
        }
    };
    let mut child = cmd
        .arg("mcp")
        .arg("--policy")
        .arg(&policy_path)
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("airlock-test", "0"),
    );
    info.protocol_version = ProtocolVersion::V_2025_06_18;
    let client = tokio::time::timeout(Duration::from_secs(30), info.serve((stdout, stdin)))
        .await
        .expect("initialize within 30 s")
        .expect("initialize succeeds");
    Session {
        child,
        client,
        _dir: dir,
    }
}

impl Session {
    async fn call(&self, tool: &'static str, args: Value) -> (CallToolResult, Value) {
        let mut params = CallToolRequestParams::new(tool);
        params.arguments = args.as_object().cloned();
        let r = tokio::time::timeout(
            Duration::from_secs(90),
            self.client.peer().call_tool(params),
        )
        .await
        .expect("tools/call within 90 s")
        .expect("tools/call succeeds");
        let s = r.structured_content.clone().expect("structured content");
        (r, s)
    }

    async fn tool_names(&self) -> Vec<String> {
        let tools = self.client.peer().list_all_tools().await.unwrap();
        tools.iter().map(|t| t.name.to_string()).collect()
    }

    /// Closes the client's end (stdin reaches EOF) and waits for `airlock mcp` to exit.
    async fn end(mut self) -> std::process::ExitStatus {
        let _ = self.client.cancel().await;
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("airlock mcp exits when its stdin closes")
            .unwrap()
    }
}

#[tokio::test]
async fn a_background_server_is_reached_from_exec_read_and_stopped() {
    for who in IDENTITIES {
        let s = session(who, POLICY, &["--processes"]).await;
        let names = s.tool_names().await;
        for t in TOOLS {
            assert!(names.iter().any(|n| n == t), "{who:?}: {t} in {names:?}");
        }
        let (r, st) = s
            .call(
                "start_process",
                json!({"command": "python3 -m http.server 8000 --bind 127.0.0.1"}),
            )
            .await;
        assert_eq!(r.is_error, Some(false), "{who:?}: {}", text(&r));
        let id = st["process_id"].as_str().unwrap().to_owned();
        assert!(text(&r).contains(&id), "{}", text(&r));
        assert!(text(&r).contains("background"), "{}", text(&r));
        assert_eq!(st["state"], "running", "{st}");

        // A run in the same sandbox reaches it on the machine's loopback.
        let tag = format!("probe{}", marker().replace('.', ""));
        let code = format!(
            "import time, urllib.request\n\
             for i in range(150):\n\
             \x20   try:\n\
             \x20       r = urllib.request.urlopen('http://127.0.0.1:8000/?tag={tag}', timeout=2)\n\
             \x20       print('status', r.status); break\n\
             \x20   except OSError:\n\
             \x20       time.sleep(0.2)\n\
             else:\n\
             \x20   print('never reached')\n"
        );
        let (r, st) = s
            .call("exec", json!({"argv": ["python3", "-c", code]}))
            .await;
        assert_eq!(st["stdout"], "status 200\n", "{who:?}: {}", text(&r));

        // Its log line is in its recent output (read until the relay has delivered it).
        let deadline = Instant::now() + Duration::from_secs(10);
        let st = loop {
            let (r, st) = s.call("process_output", json!({"process_id": id})).await;
            assert_eq!(r.is_error, Some(false), "{}", text(&r));
            assert_eq!(st["state"], "running", "{st}");
            if st["stderr"].as_str().unwrap().contains(&tag) {
                assert!(
                    text(&r).contains(&format!("GET /?tag={tag}")),
                    "{}",
                    text(&r)
                );
                assert!(text(&r).contains("running"), "{}", text(&r));
                break st;
            }
            assert!(Instant::now() < deadline, "{who:?}: no log line: {st}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert!(
            st["stderr"].as_str().unwrap().contains("HTTP/1.1\" 200"),
            "{st}"
        );

        let (r, st) = s.call("stop_process", json!({"process_id": id})).await;
        assert_eq!(r.is_error, Some(false), "{}", text(&r));
        assert_eq!(st["was_running"], true, "{st}");
        assert!(text(&r).contains("was running"), "{}", text(&r));
        let (r, st) = s
            .call("process_output", json!({"process_id": id, "wait_s": 10}))
            .await;
        assert_eq!(st["state"], "exited", "{who:?}: {st}");
        assert_eq!(st["signal"], 9, "{st}");
        assert!(text(&r).contains("exited by signal 9"), "{}", text(&r));
        let (_, st) = s.call("stop_process", json!({"process_id": id})).await;
        assert_eq!(st["was_running"], false, "{st}");

        // Bad arguments and unknown ids are refused without starting anything.
        let (r, _) = s
            .call("start_process", json!({"command": "x", "argv": ["x"]}))
            .await;
        assert_eq!(r.is_error, Some(true), "{}", text(&r));
        let (r, _) = s
            .call("process_output", json!({"process_id": id, "wait_s": 61}))
            .await;
        assert_eq!(r.is_error, Some(true), "{}", text(&r));
        let (r, _) = s
            .call("process_output", json!({"process_id": "proc-999"}))
            .await;
        assert_eq!(r.is_error, Some(true), "{}", text(&r));
        assert!(s.end().await.success(), "{who:?}");
    }
}

#[tokio::test]
async fn the_session_end_leaves_no_process_behind() {
    for who in IDENTITIES {
        let s = session(who, POLICY, &["--processes"]).await;
        let mark = marker();
        let (r, _) = s
            .call("start_process", json!({"argv": ["sleep", mark]}))
            .await;
        assert_eq!(r.is_error, Some(false), "{who:?}: {}", text(&r));
        let deadline = Instant::now() + Duration::from_secs(10);
        while marked(&mark).is_empty() {
            assert!(Instant::now() < deadline, "{who:?}: the process never ran");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(s.end().await.success(), "{who:?}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = marked(&mark);
            if left.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{who:?}: {left:?} outlived the session"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test]
async fn without_the_flag_the_process_tools_are_not_listed_nor_served() {
    let a = start(POLICY, &[]).await;
    let tools = a.client.peer().list_all_tools().await.unwrap();
    for t in TOOLS {
        assert!(!tools.iter().any(|x| x.name == t), "{t}");
    }
    let mut params = CallToolRequestParams::new("start_process");
    params.arguments = json!({"argv": ["true"]}).as_object().cloned();
    let err = a.client.peer().call_tool(params).await.unwrap_err();
    assert!(err.to_string().contains("--processes"), "{err}");

    // Not with --scope call: refused at start, with the reason.
    let out = std::process::Command::new(AIRLOCK)
        .args(["mcp", "--processes", "--scope", "call"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--processes needs --scope conversation"),
        "{err}"
    );
}

#[tokio::test]
async fn a_policy_denying_processes_marks_the_tools_unavailable() {
    let policy = "floor = \"os_process\"\ndenied_capabilities = [\"processes\"]\n";
    let s = session(None, policy, &["--processes"]).await;
    let tools = s.client.peer().list_all_tools().await.unwrap();
    for t in TOOLS {
        let d = tools
            .iter()
            .find(|x| x.name == t)
            .and_then(|x| x.description.as_deref())
            .unwrap_or_else(|| panic!("{t} listed"));
        assert!(d.starts_with("[Unavailable"), "{t}: {d}");
        assert!(d.contains("processes"), "{t}: {d}");
    }
    let (r, st) = s.call("start_process", json!({"argv": ["true"]})).await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert_eq!(st["status"], "refused", "{st}");
    // The other tools still work, in a sandbox without a machine.
    let (_, st) = s.call("exec", json!({"argv": ["echo", "fine"]})).await;
    assert_eq!(st["stdout"], "fine\n", "{st}");
    assert!(s.end().await.success());
}
