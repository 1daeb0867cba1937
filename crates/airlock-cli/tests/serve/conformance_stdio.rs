//! The stdio transport: Content-Length framing, the same session rules as WebSocket, and
//! framing errors (recoverable ones answered, fatal ones answered and the connection closed).
use std::time::Duration;

use serde_json::{json, Value};

use super::support::*;

#[test]
fn stdio_execute_relays_tool_calls_and_busy_is_refused() {
    let mut s = StdioServer::start(&[]);
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "execute",
                   "params": {"code": "print(call_tool('add', {'a': 40, 'b': 2}))", "env": {"K": "v"}}}));
    let call = s.recv().unwrap();
    assert_eq!(call["method"], "call_tool");
    assert!(call["id"].is_string(), "{call}");
    s.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "execute", "params": {"argv": ["/bin/true"]}}),
    );
    let busy = s.recv().unwrap();
    assert_eq!((busy["id"].clone(), error_code(&busy)), (json!(2), -32006));
    s.send(&tool_answer(
        &call["id"],
        echo_tools("add", &call["params"]["args"]),
    ));
    let r = s.finish(1, &echo_tools);
    assert_eq!(result_of(&r)["stdout"], "42\n");
    let env = s.execute(3, json!({"code": "import os; print(os.environ.get('K'), 'PATH' in os.environ, 'AIRLOCK_TOKEN' in os.environ)", "env": {"K": "v"}}), &echo_tools);
    assert_eq!(
        result_of(&env)["stdout"],
        "v False False\n",
        "only the requested env reaches the guest"
    );
    s.close_stdin();
    assert!(s.recv().is_none(), "stdout ends after stdin does");
    assert!(wait_bounded(&mut s.child, Duration::from_secs(10))
        .unwrap()
        .success());
    let audit = s.audit();
    assert_eq!(audit.len(), 2);
    assert!(audit.iter().all(|a| a["transport"] == "stdio"));
    assert!(s.run_dirs().is_empty());
}

#[test]
fn stdio_recoverable_frame_errors_are_answered_and_serving_goes_on() {
    let mut s = StdioServer::start(&[]);
    // A body over the cap is skipped unread and answered program_too_large.
    s.send_raw(format!("Content-Length: {}\r\n\r\n", CAP + 1).as_bytes());
    s.send_raw(&vec![b' '; CAP + 1]);
    let r = s.recv().unwrap();
    assert_eq!((r["id"].clone(), error_code(&r)), (Value::Null, -32008));
    // Undecodable bodies in good frames.
    for (body, code) in [
        ("{nope", -32700),
        (r#"{"jsonrpc":"2.0","id":null,"method":"execute"}"#, -32600),
    ] {
        s.send_raw(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
        let r = s.recv().unwrap();
        assert_eq!(
            (r["id"].clone(), error_code(&r)),
            (Value::Null, code),
            "{body}"
        );
    }
    let ok = s.execute(1, json!({"argv": ["/bin/echo", "still here"]}), &echo_tools);
    assert_eq!(result_of(&ok)["stdout"], "still here\n");
}

#[test]
fn stdio_a_broken_frame_ends_the_connection_and_kills_its_run() {
    let mut s = StdioServer::start(&[]);
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "execute",
                   "params": {"code": "call_tool('echo', {})\nimport time\ntime.sleep(60)"}}));
    let call = s.recv().unwrap();
    assert_eq!(call["method"], "call_tool");
    s.send_raw(b"Content-Length: 5\r\nContent-Length: 5\r\n\r\n");
    let mut got = Vec::new();
    while let Some(m) = s.recv() {
        got.push(m);
    }
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(
        (got[0]["id"].clone(), error_code(&got[0])),
        (Value::Null, -32005)
    );
    assert_eq!(got[1]["id"], 1);
    assert_eq!(result_of(&got[1])["status"], "cancelled");
    assert!(wait_bounded(&mut s.child, Duration::from_secs(10))
        .unwrap()
        .success());
    assert!(s.run_dirs().is_empty());
}
