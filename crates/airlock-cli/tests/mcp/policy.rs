//! `--policy` admits every tool call as `serve` does: the floor and the denied capabilities
//! refuse a call with a clear error before anything runs.
use rmcp::model::CallToolResult;
use serde_json::{json, Value};

use super::{start, text};

fn refused(r: &CallToolResult) -> Value {
    assert_eq!(r.is_error, Some(true), "{}", text(r));
    let s = r.structured_content.clone().unwrap();
    assert_eq!(s["status"], "refused", "{s}");
    s
}

/// A program that, if it ran, would print a marker; a refused call has no stdout at all.
const MARKER: &str = "print('RAN-' + 'MARKER')";

#[tokio::test]
async fn a_floor_above_this_machine_refuses_every_call() {
    let a = start("floor = \"vm\"\n[limits]\ntimeout_seconds = 20\n", &[]).await;
    let tools = a.client.peer().list_all_tools().await.unwrap();
    for t in &tools {
        let d = t.description.as_deref().unwrap();
        assert!(
            d.starts_with("[Unavailable on this server: refused by policy"),
            "{d}"
        );
    }
    for (tool, args) in [
        ("run_python", json!({ "code": MARKER })),
        ("execute", json!({ "code": MARKER })),
        ("exec", json!({"argv": ["echo", "RAN-MARKER"]})),
        ("write_file", json!({"path": "a", "content": "b"})),
        ("list_files", json!({})),
    ] {
        let r = a.call(tool, args).await;
        let s = refused(&r);
        let msg = s["error"]["message"].as_str().unwrap();
        assert!(msg.starts_with("refused by policy:"), "{tool}: {msg}");
        assert!(msg.contains("below the vm floor"), "{tool}: {msg}");
        assert!(
            msg.contains("this machine's local sandbox"),
            "{tool}: {msg}"
        );
        assert!(!text(&r).contains("RAN-MARKER"), "{tool}");
        assert!(s.get("stdout").is_none(), "{tool}: {s}");
    }
}

#[tokio::test]
async fn denied_capabilities_refuse_the_tools_that_need_them() {
    let a = start(
        "floor = \"os_process\"\ndenied_capabilities = [\"run_code\", \"files_out\"]\n\
         [limits]\ntimeout_seconds = 20\n",
        &[],
    )
    .await;
    for tool in ["run_python", "execute"] {
        let r = a.call(tool, json!({ "code": MARKER })).await;
        let msg = refused(&r)["error"]["message"].clone();
        assert!(
            msg.as_str()
                .unwrap()
                .contains("requires run_code, denied by host policy"),
            "{tool}: {msg}"
        );
        assert!(!text(&r).contains("RAN-MARKER"));
    }
    // exec is allowed; asking for an output needs files_out, which is not.
    let r = a.call("exec", json!({"argv": ["echo", "fine"]})).await;
    assert_eq!(r.structured_content.clone().unwrap()["stdout"], "fine\n");
    let r = a
        .call(
            "exec",
            json!({"argv": ["touch", "o.txt"], "outputs": ["o.txt"]}),
        )
        .await;
    let msg = refused(&r)["error"]["message"].clone();
    assert!(msg.as_str().unwrap().contains("files_out"), "{msg}");
    let r = a.call("read_file", json!({"path": "o.txt"})).await;
    refused(&r);
    let r = a
        .call("write_file", json!({"path": "w", "content": "x"}))
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    let tools = a.client.peer().list_all_tools().await.unwrap();
    let unavailable: Vec<&str> = tools
        .iter()
        .filter(|t| {
            t.description
                .as_deref()
                .unwrap()
                .starts_with("[Unavailable")
        })
        .map(|t| t.name.as_ref())
        .collect();
    assert_eq!(unavailable, ["execute", "run_python", "read_file"]);
}

#[tokio::test]
async fn denied_host_tools_or_identity_refuse_execute_but_not_run_python() {
    let a = start(
        "floor = \"os_process\"\ndenied_capabilities = [\"host_tools\"]\n",
        &[],
    )
    .await;
    let r = a.call("execute", json!({ "code": MARKER })).await;
    let msg = refused(&r)["error"]["message"].clone();
    assert!(msg.as_str().unwrap().contains("host_tools"), "{msg}");
    let r = a.call("run_python", json!({"code": "print(1)"})).await;
    assert_eq!(r.structured_content.unwrap()["stdout"], "1\n");

    // The upstreams act as identity `app`: denying it refuses `execute` as well.
    let a = start(
        "floor = \"os_process\"\ndenied_identities = [\"app\"]\n",
        &[],
    )
    .await;
    let r = a.call("execute", json!({ "code": MARKER })).await;
    let msg = refused(&r)["error"]["message"].clone();
    assert!(msg.as_str().unwrap().contains("identity app"), "{msg}");
    let r = a.call("run_python", json!({"code": "print(2)"})).await;
    assert_eq!(r.structured_content.unwrap()["stdout"], "2\n");
}
