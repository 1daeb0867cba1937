//! The wire itself, without the SDK: newline-delimited JSON-RPC, initialize with version
//! negotiation, tools/list, and refusal of a tool that does not exist.
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use super::AIRLOCK;

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
    assert_eq!(names, ["execute", "run_python", "exec"]);
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
