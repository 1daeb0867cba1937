//! The wire itself, without the SDK: newline-delimited JSON-RPC, initialize with version
//! negotiation, tools/list, and refusal of a tool that does not exist.
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use super::AIRLOCK;

async fn read_message(out: &mut (impl AsyncBufReadExt + Unpin)) -> Value {
    let mut line = String::new();
    let read = async {
        // Bounded: one line, at most 1 MiB.
        (&mut *out)
            .take(1 << 20)
            .read_line(&mut line)
            .await
            .unwrap()
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("a message");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

async fn exchange(
    stdin: &mut tokio::process::ChildStdin,
    out: &mut (impl AsyncBufReadExt + Unpin),
    msg: Value,
) -> Value {
    stdin
        .write_all(format!("{msg}\n").as_bytes())
        .await
        .unwrap();
    let mut line = String::new();
    let read = async {
        // Bounded: one answer line, at most 1 MiB.
        (&mut *out)
            .take(1 << 20)
            .read_line(&mut line)
            .await
            .unwrap()
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("an answer");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

#[tokio::test]
async fn speaks_newline_delimited_json_rpc_and_negotiates_the_version() {
    let mut child = tokio::process::Command::new(AIRLOCK)
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let r = exchange(&mut stdin, &mut out, init).await;
    assert_eq!(r["id"], 1);
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18", "{r}");
    assert_eq!(r["result"]["serverInfo"]["name"], "airlock");
    assert!(r["result"]["capabilities"]["tools"].is_object(), "{r}");
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();
    let r = exchange(
        &mut stdin,
        &mut out,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "execute",
            "run_python",
            "exec",
            "write_file",
            "read_file",
            "list_files"
        ]
    );
    let desc = r["result"]["tools"][0]["description"].as_str().unwrap();
    assert!(desc.contains("No upstream tools are configured"), "{desc}");
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                      "params": {"name": "rm_rf", "arguments": {}}});
    let r = exchange(&mut stdin, &mut out, call).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                      "params": {"name": "run_python", "arguments": {"code": "print('ok')"}}});
    let r = exchange(&mut stdin, &mut out, call).await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(r["result"]["structuredContent"]["stdout"], "ok\n", "{r}");
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("airlock mcp exits when stdin closes")
        .unwrap();
    assert!(status.success(), "{status}");
}

/// A started `airlock mcp` after the initialize handshake, spoken to line by line.
async fn initialized() -> (
    tokio::process::Child,
    tokio::process::ChildStdin,
    BufReader<tokio::process::ChildStdout>,
) {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "floor = \"os_process\"\n").unwrap();
    let mut child = tokio::process::Command::new(AIRLOCK)
        .arg("mcp")
        .arg("--policy")
        .arg(&policy)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let r = exchange(&mut stdin, &mut out, init).await;
    assert_eq!(r["id"], 1, "{r}");
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();
    (child, stdin, out)
}

/// Sends a tools/call and reads every message up to its response.
async fn call_collecting(
    stdin: &mut tokio::process::ChildStdin,
    out: &mut (impl AsyncBufReadExt + Unpin),
    id: u64,
    params: Value,
) -> (Vec<Value>, Value) {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    stdin
        .write_all(format!("{msg}\n").as_bytes())
        .await
        .unwrap();
    let mut notes = Vec::new();
    loop {
        let m = read_message(out).await;
        if m["id"] == id {
            return (notes, m);
        }
        notes.push(m);
    }
}

#[tokio::test]
async fn a_progress_token_gets_the_output_streamed_as_progress_notifications() {
    let (_child, mut stdin, mut out) = initialized().await;
    let code = "import sys, time\n\
                for i in range(3):\n    print(f'line {i}')\n    time.sleep(0.3)\n\
                print('oops', file=sys.stderr)\n";
    let params = json!({"name": "run_python", "arguments": {"code": code},
                        "_meta": {"progressToken": "tok-7"}});
    let (notes, resp) = call_collecting(&mut stdin, &mut out, 2, params).await;
    assert_eq!(
        resp["result"]["structuredContent"]["stdout"], "line 0\nline 1\nline 2\n",
        "{resp}"
    );
    let progress: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 3, "{notes:?}");
    let mut last = 0.0;
    let mut streamed = String::new();
    let mut stderr = String::new();
    for p in &progress {
        let params = &p["params"];
        assert_eq!(params["progressToken"], "tok-7", "{p}");
        let now = params["progress"].as_f64().unwrap();
        assert!(now > last, "progress must increase: {notes:?}");
        last = now;
        let msg = params["message"].as_str().unwrap();
        match params["_meta"]["airlock/stream"].as_str() {
            Some("stdout") => streamed.push_str(msg),
            Some("stderr") => stderr.push_str(msg),
            other => panic!("{other:?} in {p}"),
        }
    }
    assert_eq!(streamed, "line 0\nline 1\nline 2\n");
    assert_eq!(stderr, "oops\n");

    // Without a token, no progress notifications.
    let params = json!({"name": "run_python", "arguments": {"code": "print('quiet')"}});
    let (notes, resp) = call_collecting(&mut stdin, &mut out, 3, params).await;
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(resp["result"]["structuredContent"]["stdout"], "quiet\n");
}

/// Found by the `mcp_stdio` fuzz target: rmcp reads a `tools/call` whose params repeat a member
/// as a request it does not know (its typed params refuse the duplicate). The server must
/// answer it with an error and run nothing — whichever copy of the member a reader would take —
/// and go on serving.
#[tokio::test]
async fn a_tools_call_whose_params_repeat_a_member_is_refused() {
    let (_child, mut stdin, mut out) = initialized().await;
    let code = "print('RAN')";
    for (id, line) in [
        (
            2,
            format!(
                r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"run_python","arguments":{{"code":{code:?}}},"name":"run_python"}}}}"#
            ),
        ),
        (
            3,
            format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"no_such_tool","arguments":{{"code":{code:?}}},"name":"run_python"}}}}"#
            ),
        ),
    ] {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let resp = read_message(&mut out).await;
        assert_eq!(resp["id"], id, "{resp}");
        assert!(resp.get("result").is_none(), "{line} ran: {resp}");
        assert_eq!(resp["error"]["code"], -32601, "{resp}");
    }
    let params = json!({"name": "run_python", "arguments": {"code": code}});
    let (_, resp) = call_collecting(&mut stdin, &mut out, 4, params).await;
    assert_eq!(
        resp["result"]["structuredContent"]["stdout"], "RAN\n",
        "{resp}"
    );
}
