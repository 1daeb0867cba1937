//! An upstream MCP server's replies as `airlock mcp` takes them: its stdout through rmcp's
//! client line reader as `Upstream::start` configures it (`AsyncRwTransport`, client role, the
//! 4 MiB line cap); its `tools/list` pages through the paging and caps of start-up; the tools
//! through registration (name, description, the input schema compiled by the host-tool
//! registry) into the typed stubs (`airlock_tools.py`), their signatures and the `execute`
//! description; its `tools/call` results (or JSON-RPC errors) through the conversion into what
//! the program receives, behind the registry's door (call cap, name, argument schema, response
//! caps), as the guest's `call_tool` reaches it.
//!
//! Input: a selector byte (low nibble: read size, `common::chunk_of`; bit 4: a 64-byte
//! response cap; bits 5-6: the call cap, 1, 2, 4 or 64), then lines: a line starting with `>`
//! is a program's `call_tool` params (`{"tool": "up.NAME", "args": {...}}`), made after the
//! listing, in order; every other line is the upstream's stdout. The upstream is named `up`.
//!
//! Oracles: the reader ends at the end of input and delivers at most one message per line,
//! each (but rmcp's catch-all for results it does not recognise, which airlock ignores)
//! re-encoding to JSON that decodes to the same JSON; at most 128 tools and 32 pages are
//! taken, the tools a prefix of the pages'; a registered tool is `up.NAME` with NAME of 1-61
//! bytes of `[A-Za-z0-9_.-]`, listed once, and its description a prefix of the upstream's
//! within 2000 characters; the stubs module is the fixed header then code in which, outside JSON string
//! literals, only the stub vocabulary's characters occur, each `def` naming `_up__` and a
//! usable identifier, with usable identifiers as parameters, none of them a name the stub's
//! body uses (`_a`, `_UNSET`, `_call`); the `execute` description has one
//! line per tool; a reply converts as documented (structured content, unwrapped when the
//! output schema wraps it; else the one block, text read as JSON when it is JSON; else the
//! list; an error result is a failure); what the program receives is within the response cap
//! and round-trips through JSON; a refusal's message has no control characters and is bounded.
#![no_main]

#[path = "../common/mod.rs"]
mod common;

use std::sync::OnceLock;

use airlock_broker::{Limits, ToolHandler};
use airlock_mcp::fuzzing::{call_value, listed, offered, Reply};
use airlock_mcp::server::host_tool_limits;
use airlock_mcp::stubs;
use airlock_mcp::UpstreamTools;
use airlock_protocol::ErrorCode;
use libfuzzer_sys::fuzz_target;
use rmcp::model::{CallToolResult, ContentBlock, JsonRpcMessage, ListToolsResult, ServerResult};
use rmcp::service::{RoleClient, RxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use serde_json::Value;

/// The line cap `Upstream::start` sets.
const MAX_LINE: usize = airlock_mcp::upstream::MAX_UPSTREAM_LINE;
const UPSTREAM: &str = "up";
/// The names a stub's body uses besides its parameters.
const STUB_NAMES: &[&str] = &["_a", "_UNSET", "_call"];

fuzz_target!(|input: &[u8]| {
    let Some((&selector, data)) = input.split_first() else {
        return;
    };
    let (calls, stdout): (Vec<&[u8]>, Vec<&[u8]>) = data
        .split(|b| *b == b'\n')
        .partition(|line| line.first() == Some(&b'>'));
    let stdout = stdout.join(&b'\n');
    let (pages, replies) = read_upstream(&stdout, selector);
    for r in &replies {
        check_conversion(r);
    }
    let (kept, asked) = common::ready(listed(UPSTREAM, pages.clone()));
    assert!(asked <= airlock_mcp::upstream::MAX_TOOL_PAGES && asked <= pages.len() + 1);
    let Ok(tools) = kept else {
        return;
    };
    let all: Vec<_> = pages.iter().flat_map(|p| p.tools.iter()).collect();
    assert!(tools.len() <= airlock_mcp::upstream::MAX_TOOLS_PER_UPSTREAM);
    assert!(tools.iter().zip(&all).all(|(a, b)| a == *b), "not a prefix");
    let limits = Limits {
        max_tool_response_bytes: if selector & 0x10 == 0 { 256 * 1024 } else { 64 },
        max_tool_calls: [1, 2, 4, 64][usize::from((selector >> 5) & 3)],
        ..Limits::default()
    };
    let caps = host_tool_limits(&limits);
    let offer = offered(UPSTREAM, &tools, replies, caps);
    check_registered(&offer, &tools);
    check_stubs(&offer);
    let run = offer.for_run();
    for line in calls {
        let Ok(Value::Object(mut params)) = serde_json::from_slice::<Value>(&line[1..]) else {
            continue;
        };
        let name = match params.remove("tool") {
            Some(Value::String(s)) => s,
            _ => continue,
        };
        let args = params.remove("args").unwrap_or(Value::Null);
        match common::ready(run.call(&name, args)) {
            Ok(v) => {
                let bytes = serde_json::to_vec(&v).expect("encodes");
                assert!(bytes.len() as u64 <= caps.responses.max_bytes_per_file);
                assert_eq!(serde_json::from_slice::<Value>(&bytes).expect("decodes"), v);
            }
            Err(f) => {
                let band = [
                    ErrorCode::UnknownTool,
                    ErrorCode::ToolCallLimit,
                    ErrorCode::InvalidParams,
                    ErrorCode::ToolError,
                    ErrorCode::ToolDenied,
                ];
                assert!(band.contains(&f.code), "{f:?}");
                assert!(!f.message.chars().any(char::is_control), "{f:?}");
                assert!(f.message.len() <= 16 * 1024);
            }
        }
    }
});

/// The upstream's stdout through rmcp's client reader: the `tools/list` pages and the
/// `tools/call` replies (results and errors) it delivers, in order.
fn read_upstream(stdout: &[u8], selector: u8) -> (Vec<ListToolsResult>, Vec<Reply>) {
    let reader = common::Chunked {
        data: stdout,
        chunk: common::chunk_of(selector),
    };
    let mut t = AsyncRwTransport::<RoleClient, _, _>::new(reader, tokio::io::sink())
        .with_max_line_length(MAX_LINE);
    let lines = stdout.iter().filter(|b| **b == b'\n').count() + 1;
    let (mut pages, mut replies, mut delivered) = (Vec::new(), Vec::new(), 0);
    while let Some(msg) = common::ready(t.receive()) {
        delivered += 1;
        assert!(delivered <= lines, "more messages than lines");
        let v = serde_json::to_value(&msg).expect("a delivered message encodes");
        let back: RxJsonRpcMessage<RoleClient> =
            serde_json::from_value(v.clone()).expect("its encoding decodes");
        // rmcp's catch-all for results it does not recognise (e.g. a tools/list page with a
        // key twice) keeps the raw JSON, which may then read as a typed result: airlock takes
        // nothing from it (a page or a reply must be the typed result), so only typed
        // messages must re-encode to themselves.
        let untyped = matches!(
            &msg,
            JsonRpcMessage::Response(r) if matches!(r.result, ServerResult::CustomResult(_))
        );
        if !untyped {
            assert_eq!(serde_json::to_value(&back).expect("encodes again"), v);
        }
        match msg {
            JsonRpcMessage::Response(r) => match r.result {
                ServerResult::ListToolsResult(p) => pages.push(p),
                ServerResult::CallToolResult(c) => replies.push(Ok(c)),
                _ => {}
            },
            JsonRpcMessage::Error(e) => replies.push(Err(e.error)),
            _ => {}
        }
    }
    (pages, replies)
}

/// A reply converts as documented, whether or not the output schema wraps the result.
fn check_conversion(reply: &Reply) {
    for unwrap in [false, true] {
        let got = call_value("up.t", reply.clone(), unwrap);
        let Ok(r) = reply else {
            let why = got.expect_err("an error reply is a failure");
            assert!(why.starts_with("upstream failed: up.t: ") && why.chars().count() <= 930);
            continue;
        };
        if r.is_error == Some(true) {
            let why = got.expect_err("an error result is a failure");
            assert!(why.starts_with("upstream error: up.t: ") && why.chars().count() <= 930);
            continue;
        }
        assert_eq!(got.expect("a result converts"), expected(r, unwrap));
    }
}

fn expected(r: &CallToolResult, unwrap: bool) -> Value {
    if let Some(sc) = &r.structured_content {
        return match sc {
            Value::Object(m) if unwrap && m.len() == 1 && m.contains_key("result") => {
                m["result"].clone()
            }
            other => other.clone(),
        };
    }
    let block = |b: &ContentBlock| match b {
        ContentBlock::Text(t) => {
            serde_json::from_str(&t.text).unwrap_or_else(|_| Value::String(t.text.clone()))
        }
        other => serde_json::to_value(other).expect("a block encodes"),
    };
    match r.content.as_slice() {
        [] => Value::Null,
        [one] => block(one),
        many => Value::Array(many.iter().map(block).collect()),
    }
}

/// Registered tools are `up.NAME` with a usable registry name, descriptions cut from theirs.
fn check_registered(offer: &UpstreamTools, listed: &[rmcp::model::Tool]) {
    let mut names = Vec::new();
    for t in offer.tools() {
        let q = &t.qualified;
        assert_eq!(q, &format!("{UPSTREAM}.{}", t.tool));
        assert!(!t.tool.is_empty() && q.len() <= 64, "{q:?}");
        assert!(q
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b)));
        let mut same = listed.iter().filter(|l| l.name == t.tool);
        let theirs = same.next().expect("a registered tool was listed");
        assert!(same.next().is_none(), "{q} was listed twice");
        let full = theirs.description.as_deref().unwrap_or("");
        assert!(t.description.chars().count() <= 2000 && full.starts_with(&t.description));
        names.push(q.clone());
    }
    let n = names.len();
    names.dedup();
    assert_eq!(names.len(), n, "a name registered twice");
}

fn usable(name: &str) -> bool {
    const KEYWORDS: &[&str] = &[
        "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
        "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
        "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return",
        "try", "while", "with", "yield",
    ];
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&name)
        && !name.starts_with("__")
}

/// The code of a stub line with its JSON string literals taken out (None: a literal that is
/// not one JSON string).
fn code_of(line: &str) -> Option<String> {
    let mut code = String::new();
    let mut rest = line;
    while let Some(i) = rest.find('"') {
        code.push_str(&rest[..i]);
        let mut lit = serde_json::Deserializer::from_str(&rest[i..]).into_iter::<String>();
        lit.next()?.ok()?;
        rest = &rest[i + lit.byte_offset()..];
        code.push_str("\"\"");
    }
    code.push_str(rest);
    Some(code)
}

/// `text` split at its commas outside brackets, each piece trimmed.
fn top_level(text: &str) -> Vec<&str> {
    let (mut pieces, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' => depth -= 1,
            ',' if depth == 0 => {
                pieces.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    pieces.push(text[start..].trim());
    pieces
}

/// The generated Python: the fixed header, then only the stubs' vocabulary outside literals,
/// sanitized identifiers for functions and parameters; one description line per tool.
fn check_stubs(offer: &UpstreamTools) {
    static HEADER: OnceLock<String> = OnceLock::new();
    let header = HEADER.get_or_init(|| {
        let none = offered(UPSTREAM, &[], Vec::new(), Default::default());
        let module = stubs::module(&none);
        let header = module.strip_suffix("TOOLS = []\n");
        header.expect("the empty module").to_owned()
    });
    let module = stubs::module(offer);
    let body = module
        .strip_prefix(header.as_str())
        .expect("the fixed header");
    for line in body.split('\n') {
        let code = code_of(line).unwrap_or_else(|| panic!("a broken literal: {line:?}"));
        let vocabulary = |c: char| c.is_ascii_alphanumeric() || " _,.:=()[]|*{}+->\"".contains(c);
        assert!(
            code.chars().all(vocabulary),
            "outside the vocabulary: {line:?}"
        );
        if let Some(def) = code.strip_prefix("def ") {
            let (name, params) = def.split_once('(').expect("a def has parameters");
            let own = name.strip_prefix("_up__").expect("a stub's name");
            assert!(usable(own), "{name:?}");
            let params = params.rsplit_once(')').expect("closed").0;
            for p in top_level(params) {
                let p = p.split(':').next().unwrap_or(p);
                assert!(["*", "**args"].contains(&p) || usable(p), "parameter {p:?}");
                assert!(
                    !STUB_NAMES.contains(&p),
                    "parameter {p:?} shadows the stub's own"
                );
            }
        }
    }
    let tools = offer.tools().count();
    let description = stubs::execute_description(offer, "here");
    assert_eq!(
        description.split('\n').count(),
        tools + 3,
        "{description:?}"
    );
}
