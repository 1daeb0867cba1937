//! The MCP stdio line reader as `airlock mcp` configures it (rmcp's `AsyncRwTransport`, server
//! role, a line cap), over bytes fed in pieces, then the arguments of every `tools/call` it
//! delivers through the server's own argument parsers. The first input byte picks the piece
//! size (low nibble) and a small line cap (0x10: 256 bytes instead of 64 KiB).
//! Oracles: the reader ends at the end of input (never waits, never panics); it delivers at
//! most one message per line; each message re-encodes to JSON that decodes to the same JSON
//! (a request with a repeated member excepted: rmcp reads it as a custom request, see `check`).
#![no_main]

#[path = "../common/mod.rs"]
mod common;

use std::time::Duration;

use airlock_mcp::fuzzing::tool_arguments;
use airlock_policy::TransferLimits;
use libfuzzer_sys::fuzz_target;
use rmcp::model::{ClientNotification, ClientRequest, JsonRpcMessage};
use rmcp::service::{RoleServer, RxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use serde_json::Value;

fuzz_target!(|input: &[u8]| {
    let Some((&selector, data)) = input.split_first() else {
        return;
    };
    let cap = if selector & 0x10 == 0 { 64 * 1024 } else { 256 };
    let reader = common::Chunked {
        data,
        chunk: common::chunk_of(selector),
    };
    let mut t = AsyncRwTransport::<RoleServer, _, _>::new(reader, tokio::io::sink())
        .with_max_line_length(cap);
    let lines = data.iter().filter(|b| **b == b'\n').count();
    let mut delivered = 0;
    while let Some(msg) = common::ready(t.receive()) {
        delivered += 1;
        assert!(delivered <= lines, "more messages than lines");
        check(&msg);
    }
});

fn check(msg: &RxJsonRpcMessage<RoleServer>) {
    let v = serde_json::to_value(msg).expect("a delivered message encodes");
    let back: RxJsonRpcMessage<RoleServer> =
        serde_json::from_value(v.clone()).expect("its encoding decodes");
    let again = serde_json::to_value(&back).expect("encodes again");
    if again != v {
        // A request whose params repeat a member fails rmcp's typed params (serde refuses the
        // duplicate) and is read as a custom request, which the server answers "method not
        // found" and runs nothing (`mcp::wire::a_tools_call_whose_params_repeat_a_member_is_refused`);
        // its encoding has the duplicate collapsed and decodes as the typed request. Nothing
        // else may change on the way round.
        assert!(custom(msg), "{v} came back as {again}");
    }
    let third: RxJsonRpcMessage<RoleServer> =
        serde_json::from_value(again.clone()).expect("the second encoding decodes");
    assert_eq!(
        serde_json::to_value(&third).expect("encodes a third time"),
        again
    );
    if v["method"] == "tools/call" {
        let name = v["params"]["name"].as_str().unwrap_or_default();
        if let Some(Value::Object(args)) = v["params"].get("arguments") {
            let max = Duration::from_secs(300);
            let _ = tool_arguments(name, args, max, &TransferLimits::DEFAULT);
        }
    }
}

/// A message rmcp read as a custom request or notification (a method it does not type).
fn custom(msg: &RxJsonRpcMessage<RoleServer>) -> bool {
    match msg {
        JsonRpcMessage::Request(r) => matches!(r.request, ClientRequest::CustomRequest(_)),
        JsonRpcMessage::Notification(n) => {
            matches!(n.notification, ClientNotification::CustomNotification(_))
        }
        _ => false,
    }
}
