//! The MCP stdio line reader as `airlock mcp` configures it (rmcp's `AsyncRwTransport`, server
//! role, a line cap), over bytes fed in pieces, then the arguments of every `tools/call` it
//! delivers through the server's own argument parsers. The first input byte picks the piece
//! size (low nibble) and a small line cap (0x10: 256 bytes instead of 64 KiB).
//! Oracles: the reader ends at the end of input (never waits, never panics); it delivers at
//! most one message per line; each message re-encodes to JSON that decodes to the same JSON.
#![no_main]

#[path = "../common/mod.rs"]
mod common;

use std::time::Duration;

use airlock_mcp::fuzzing::tool_arguments;
use airlock_policy::TransferLimits;
use libfuzzer_sys::fuzz_target;
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
    assert_eq!(serde_json::to_value(&back).expect("encodes again"), v);
    if v["method"] == "tools/call" {
        let name = v["params"]["name"].as_str().unwrap_or_default();
        if let Some(Value::Object(args)) = v["params"].get("arguments") {
            let max = Duration::from_secs(300);
            let _ = tool_arguments(name, args, max, &TransferLimits::DEFAULT);
        }
    }
}
