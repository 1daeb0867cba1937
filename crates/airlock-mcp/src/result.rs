//! A finished run as an MCP tool-call result: one short text block for the model (status,
//! stdout, stderr, what was attached), each declared output once as its own content block
//! (image, text resource or blob resource, see [`crate::media`]), a cell's rich output (images
//! as image content, HTML and SVG as resources, see [`crate::rich`]), and the machine detail as
//! `structuredContent` (the broker's whole run result, the outputs' metadata, the sandbox
//! scope). `isError` is set when the status is anything but `completed`.
use airlock_broker::{RunResult, RunStatus};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{json, Value};

use crate::media;
use crate::outputs::{self, Output};
use crate::rich;

fn stream(s: &mut String, name: &str, text: &str, truncated: bool, total: u64) {
    if text.is_empty() && !truncated {
        return;
    }
    s.push_str(&format!("\n--- {name} ---\n{text}"));
    if !text.ends_with('\n') && !text.is_empty() {
        s.push('\n');
    }
    if truncated {
        s.push_str(&format!("[{name} truncated: {total} bytes written]\n"));
    }
}

/// The model-readable summary of a run.
pub fn summary(r: &RunResult, outputs: &[Output]) -> String {
    let mut s = format!("status: {}", r.status.as_str());
    if let Some(code) = r.exit_code {
        s.push_str(&format!(", exit_code: {code}"));
    }
    if let Some(sig) = r.signal {
        s.push_str(&format!(", signal: {sig}"));
    }
    if let Some(e) = &r.error {
        s.push_str(&format!("\nerror: {}", e.message));
    }
    stream(
        &mut s,
        "stdout",
        &r.stdout,
        r.stdout_truncated,
        r.stdout_bytes,
    );
    stream(
        &mut s,
        "stderr",
        &r.stderr,
        r.stderr_truncated,
        r.stderr_bytes,
    );
    if let Some(v) = &r.value {
        s.push_str(&format!("\n--- value ---\n{}\n", v.repr));
    }
    let mut attached = usize::from(r.value.as_ref().and_then(rich::value).is_some());
    for (n, d) in r.display.iter().enumerate() {
        match rich::item(n, d) {
            rich::Shown::Text(t) => s.push_str(&format!("\n--- display ---\n{t}\n")),
            rich::Shown::Block(_) => attached += 1,
        }
    }
    if attached > 0 {
        s.push_str(&format!(
            "\n{attached} rich output(s) attached (images as image content, HTML and SVG as resources)"
        ));
    }
    if r.display_dropped > 0 {
        s.push_str(&format!(
            "\n{} display item(s) not returned (over the caps)",
            r.display_dropped
        ));
    }
    if r.kernel_restarted {
        s.push_str("\nthe Python state was lost (the interpreter was restarted): variables, imports and objects are gone; files are kept");
    }
    for o in outputs {
        match (&o.error, o.mime_type, o.bytes) {
            (Some(e), _, _) => s.push_str(&format!("\noutput {}: not returned: {e}", o.path)),
            (None, Some(m), Some(n)) => {
                s.push_str(&format!("\noutput {}: {m}, {n} bytes, attached", o.path));
            }
            _ => {}
        }
    }
    s
}

/// The MCP result for a run and its declared outputs; `scope` is the sandbox scope served.
pub fn to_call_result(r: &RunResult, outputs: &[Output], scope: &str) -> CallToolResult {
    let mut content = vec![ContentBlock::text(summary(r, outputs))];
    content.extend(r.value.as_ref().and_then(rich::value));
    for (n, d) in r.display.iter().enumerate() {
        if let rich::Shown::Block(b) = rich::item(n, d) {
            content.push(*b);
        }
    }
    for o in outputs {
        if let (Some((data, form)), Some(mime)) = (&o.data, o.mime_type) {
            content.push(media::block(&outputs::uri(&o.path), mime, *form, data));
        }
    }
    let mut structured = serde_json::to_value(r).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut structured {
        m.insert("outputs".into(), json!(outputs));
        m.insert("scope".into(), json!(scope));
    }
    let mut result = if r.status == RunStatus::Completed {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    };
    result.structured_content = Some(structured);
    result
}

/// An MCP error result for a call refused before anything ran (bad arguments, policy, ...).
pub fn refusal(message: impl Into<String>) -> CallToolResult {
    let message = message.into();
    let mut r = CallToolResult::error(vec![ContentBlock::text(format!("refused: {message}"))]);
    r.structured_content = Some(json!({"status": "refused", "error": {"message": message}}));
    r
}

/// An MCP result for a file tool: `text` for the model, `detail` as structured content.
pub fn file_result(text: String, extra: Vec<ContentBlock>, detail: Value) -> CallToolResult {
    let mut content = vec![ContentBlock::text(text)];
    content.extend(extra);
    let mut r = CallToolResult::success(content);
    r.structured_content = Some(detail);
    r
}

/// A file tool that failed (the file is missing, too large, ...).
pub fn file_error(message: impl Into<String>) -> CallToolResult {
    let message = message.into();
    let mut r = CallToolResult::error(vec![ContentBlock::text(format!("error: {message}"))]);
    r.structured_content = Some(json!({"status": "error", "error": {"message": message}}));
    r
}
