//! A finished run as MCP tool-call result content: a text block a model reads (status,
//! stdout, stderr), the declared outputs as embedded text resources, and the whole
//! [`RunResult`] (plus outputs) as structured content. `isError` is set when the status is
//! anything but `completed`.
use airlock_broker::{RunResult, RunStatus};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::{json, Value};

use crate::outputs::Output;

/// The human/model-readable summary of a run.
pub fn summary(r: &RunResult) -> String {
    let mut s = format!("status: {}", r.status.as_str());
    if let Some(code) = r.exit_code {
        s.push_str(&format!("\nexit_code: {code}"));
    }
    if let Some(e) = &r.error {
        s.push_str(&format!("\nerror: {} (code {})", e.message, e.code));
    }
    s.push_str(&format!("\n--- stdout ---\n{}", r.stdout));
    if r.stdout_truncated {
        s.push_str(&format!(
            "\n[stdout truncated: {} bytes written]",
            r.stdout_bytes
        ));
    }
    s.push_str(&format!("\n--- stderr ---\n{}", r.stderr));
    if r.stderr_truncated {
        s.push_str(&format!(
            "\n[stderr truncated: {} bytes written]",
            r.stderr_bytes
        ));
    }
    s
}

/// The MCP result for a run and its declared outputs.
pub fn to_call_result(r: &RunResult, outputs: &[Output]) -> CallToolResult {
    let mut content = vec![ContentBlock::text(summary(r))];
    for o in outputs {
        if let Some(text) = &o.text {
            content.push(ContentBlock::resource(
                ResourceContents::TextResourceContents {
                    uri: format!("airlock://outputs/{}", o.path),
                    mime_type: Some("text/plain".to_owned()),
                    text: text.clone(),
                    meta: None,
                },
            ));
        }
    }
    let mut structured = serde_json::to_value(r).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut structured {
        m.insert("outputs".into(), json!(outputs));
    }
    content.push(ContentBlock::text(structured.to_string()));
    let mut result = if r.status == RunStatus::Completed {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    };
    result.structured_content = Some(structured);
    result
}

/// An MCP error result for a call refused before anything ran (bad arguments, ...).
pub fn refusal(message: impl Into<String>) -> CallToolResult {
    let message = message.into();
    let mut r = CallToolResult::error(vec![ContentBlock::text(format!("refused: {message}"))]);
    r.structured_content = Some(json!({"status": "refused", "error": {"message": message}}));
    r
}
