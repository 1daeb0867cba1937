//! A run that times out reports exit code 124 on the wire, as `airlock run` exits and as
//! `timeout(1)` does, whatever the killed process said: `execute` (Python and a command), a
//! session's `sandbox.run_code` (one-shot and a stateful sandbox's cell) and `sandbox.exec`.
//! The server runs as root and as `airlock-test`.
use serde_json::{json, Value};

use super::support::*;

const IDENTITIES: [Option<&str>; 2] = [None, Some("airlock-test")];

fn assert_timeout_124(what: &str, r: &Value) {
    assert_eq!(r["status"], "timeout", "{what}: {r}");
    assert_eq!(r["exit_code"], 124, "{what}: {r}");
    assert_eq!(r["error"]["code"], -32002, "{what}: {r}");
}

async fn session_run(c: &mut WsClient, method: &str, params: Value) -> Value {
    result_of(&c.call(method, params).await).clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timeout_is_exit_code_124_on_every_kind_of_run() {
    for who in IDENTITIES {
        let server = WsServer::start_as(who, &[]);
        let mut c = server.connect().await;
        let limits = json!({"timeout_s": 1});
        // A Python program ignoring SIGTERM, and a command that would outlive its budget.
        let code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
                    while True: time.sleep(0.05)";
        let r = c
            .execute(1, json!({"code": code, "limits": limits}), &no_tools)
            .await;
        assert_timeout_124(&format!("{who:?} execute code"), result_of(&r));
        let argv = json!(["/bin/sleep", "30"]);
        let r = c
            .execute(2, json!({"argv": argv, "limits": limits}), &no_tools)
            .await;
        assert_timeout_124(&format!("{who:?} execute argv"), result_of(&r));
        for stateful in [false, true] {
            let spec = json!({"stateful": stateful});
            let created = session_run(&mut c, "sandbox.create", json!({ "spec": spec })).await;
            let sid = created["sandbox_id"].as_str().unwrap().to_owned();
            let p = json!({"sandbox_id": sid, "code": "while True: pass", "timeout_s": 1});
            let r = session_run(&mut c, "sandbox.run_code", p).await;
            assert_timeout_124(&format!("{who:?} run_code stateful={stateful}"), &r);
            let p = json!({"sandbox_id": sid, "argv": argv, "timeout_s": 1});
            let r = session_run(&mut c, "sandbox.exec", p).await;
            assert_timeout_124(&format!("{who:?} exec stateful={stateful}"), &r);
        }
    }
}
