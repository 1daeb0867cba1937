//! `--policy policy.toml`: the host's floor, denied capabilities and limits hold a CLI run and a
//! server, refusing (never degrading) what they do not admit.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failed unwrap is a failed test, with its location"
)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn policy(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

fn airlock(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(args)
        .env_remove("AIRLOCK_POLICY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn run_json(policy: &tempfile::NamedTempFile, extra: &[&str], code: &str) -> serde_json::Value {
    let path = policy.path().to_str().unwrap();
    let mut args = vec!["run", "--json", "--policy", path];
    args.extend_from_slice(extra);
    args.push("-");
    let out = airlock(&args, code);
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout:?} / {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn the_default_floor_refuses_a_shared_kernel_sandbox() {
    // An empty policy means the production floor (microvm): nothing runs, nothing spawns.
    let p = policy("");
    let v = run_json(&p, &[], "open('/proc/self/status'); print('RAN')");
    assert_eq!(v["status"], "refused", "{v}");
    assert_eq!(v["error"]["code"], -32007);
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("refused by policy") && msg.contains("microvm"),
        "{msg}"
    );
    assert_eq!(v["stdout"], "");
}

#[test]
fn an_opted_down_floor_admits_it() {
    let p = policy("floor = \"os_process\"\n");
    let v = run_json(&p, &[], "print('ran')");
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["stdout"], "ran\n");
}

#[test]
fn a_denied_capability_refuses_the_run_that_needs_it() {
    let p = policy("floor = \"os_process\"\ndenied_capabilities = [\"host_tools\"]\n");
    let v = run_json(&p, &["--tool", "echo=cat"], "print(call_tool('echo', {}))");
    assert_eq!(v["status"], "refused", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("host_tools"),
        "{v}"
    );
    let v = run_json(&p, &[], "print('no tools needed')");
    assert_eq!(v["status"], "completed", "{v}");
}

#[test]
fn policy_limits_are_defaults_and_ceilings() {
    let p = policy("floor = \"os_process\"\n[limits]\ntimeout_seconds = 1\nmemory_mb = 64\n");
    // The default comes from the policy: a spin ends at 1 s.
    let v = run_json(&p, &[], "while True: pass");
    assert_eq!(v["status"], "timeout", "{v}");
    assert!(v["wall_time_ms"].as_f64().unwrap() < 5000.0, "{v}");
    // Asking above the ceiling is refused before anything runs, naming the key.
    let path = p.path().to_str().unwrap();
    let out = airlock(
        &["run", "--policy", path, "--timeout", "10", "-"],
        "print(1)",
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("limits.timeout_seconds = 1"), "{err}");
}

#[test]
fn a_bad_policy_value_is_a_clear_error() {
    let p = policy("floor = \"process\"\n");
    let path = p.path().to_str().unwrap();
    let out = airlock(&["run", "--policy", path, "-"], "print(1)");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("floor") && err.contains("process"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_server_refuses_to_start_on_an_unknown_tenant_quota_naming_it() {
    let p = policy("floor = \"os_process\"\n[tenants.alice]\nmax_sandbox = 2\n");
    let path = p.path().to_str().unwrap();
    let out = airlock(&["serve", "--stdio", "--policy", path], "");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`tenants.alice.max_sandbox`"), "{err}");
    assert!(
        err.contains("max_sandboxes"),
        "the keys it knows are listed: {err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_server_whose_policy_admits_nothing_refuses_to_start() {
    let p = policy("");
    let path = p.path().to_str().unwrap();
    let out = airlock(&["serve", "--stdio", "--policy", path], "");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refused by policy"), "{err}");
}

#[test]
fn a_server_refuses_runs_its_policy_denies() {
    let p = policy("floor = \"os_process\"\ndenied_capabilities = [\"exec\"]\n");
    let stdout = serve_stdio(
        &p,
        &[
            r#"{"jsonrpc":"2.0","id":1,"method":"execute","params":{"argv":["/bin/true"]}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"execute","params":{"code":"print(6*7)","tools":[]}}"#,
        ],
        2,
    );
    assert!(
        stdout.contains("\"code\":-32007") && stdout.contains("exec"),
        "{stdout}"
    );
    assert!(stdout.contains(r#""stdout":"42\n""#), "{stdout}");
}

#[test]
fn transfer_ceilings_lower_a_run_s_limits_instead_of_refusing_it() {
    // docs/policy.md's own example: a files_in ceiling below the defaults. A run that names no
    // limits of its own gets the ceilings, and a transfer over them is refused.
    let p = policy(
        "floor = \"os_process\"\n[limits.files_in]\nmax_files = 2\nmax_bytes_per_file = 16\nmax_total_bytes = 32\n",
    );
    let v = run_json(&p, &[], "print('ran')");
    assert_eq!(v["status"], "completed", "{v}");
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    let big = dir.path().join("big");
    std::fs::write(&small, "ok").unwrap();
    std::fs::write(&big, "x".repeat(17)).unwrap();
    let put = |local: &std::path::Path, guest: &str| format!("{}={guest}", local.display());
    let v = run_json(&p, &["--put", &put(&small, "a")], "print(open('a').read())");
    assert_eq!(v["stdout"], "ok\n", "{v}");
    let out = airlock(
        &[
            "run",
            "--policy",
            p.path().to_str().unwrap(),
            "--put",
            &put(&big, "b"),
            "-",
        ],
        "print('RAN')",
    );
    assert!(!out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("RAN"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("16"), "the refusal names the cap: {err}");
}

/// Sends `requests` to `airlock serve --stdio --policy <p>` and returns what came back once
/// the responses with ids 1 to `last_id` arrived (stdin stays open until then: EOF ends the
/// connection and cancels its run).
fn serve_stdio(p: &tempfile::NamedTempFile, requests: &[&str], last_id: u32) -> String {
    let frame = |body: &str| format!("Content-Length: {}\r\n\r\n{body}", body.len());
    let input: String = requests.iter().map(|r| frame(r)).collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(["serve", "--stdio", "--policy", p.path().to_str().unwrap()])
        .env_remove("AIRLOCK_POLICY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    // Session methods answer in any order: wait for every id up to `last_id`.
    let all_seen = |seen: &[u8]| {
        let text = String::from_utf8_lossy(seen);
        (1..=last_id).all(|id| text.contains(&format!("\"id\":{id}")))
    };
    while !all_seen(&seen) {
        use std::io::Read;
        let n = stdout.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "server closed early: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    drop(stdin);
    child.wait().unwrap();
    String::from_utf8_lossy(&seen).into_owned()
}

#[test]
fn a_server_policy_caps_live_sandboxes_and_denies_capabilities_at_create() {
    let p = policy(
        "floor = \"os_process\"\ndenied_capabilities = [\"host_tools\"]\n[server]\nmax_sandboxes = 1\n",
    );
    let out = serve_stdio(
        &p,
        &[
            r#"{"jsonrpc":"2.0","id":1,"method":"sandbox.create","params":{"spec":{"requires":["run_code","host_tools"]}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"sandbox.create","params":{"spec":{}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"sandbox.create","params":{"spec":{}}}"#,
        ],
        3,
    );
    let msgs: Vec<serde_json::Value> = out
        .split("Content-Length:")
        .filter_map(|f| f.split_once("\r\n\r\n").map(|(_, b)| b))
        .map(|b| serde_json::from_str(b).unwrap())
        .collect();
    let by_id = |id: u64| msgs.iter().find(|m| m["id"] == id).unwrap();
    assert_eq!(by_id(1)["error"]["code"], -32007, "{out}");
    assert_eq!(
        by_id(1)["error"]["data"]["kind"],
        "SandboxCapabilityDenied",
        "{out}"
    );
    // Creates 2 and 3 run concurrently: one gets the only place, the other is refused.
    let made = [2, 3]
        .iter()
        .filter(|id| by_id(**id)["result"]["sandbox_id"].is_string())
        .count();
    let refused = [2, 3]
        .iter()
        .filter(|id| by_id(**id)["error"]["code"] == -32018)
        .count();
    assert_eq!((made, refused), (1, 1), "{out}");
}
