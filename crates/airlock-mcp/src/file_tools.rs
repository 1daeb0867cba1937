//! `write_file`, `read_file`, `list_files`: moving files in and out of the session's sandbox,
//! beneath /work, through the local sandbox's no-follow file operations (a symlink anywhere on
//! the path is refused, a file with more than one link is not read), within the policy's
//! transfer ceilings (`files_in` for writes, `files_out` for reads).
use airlock_broker::GUEST_WORK_DIR;
use airlock_local::LocalSandbox;
use airlock_policy::{GuestRelPath, TransferLimits};
use airlock_router::Sandbox;
use base64::Engine;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde_json::{json, Value};

use crate::media::{self, Form};
use crate::outputs::{uri, why};
use crate::{args, result};

/// Most entries `list_files` returns.
pub const MAX_LISTED: usize = 1000;

pub(crate) fn parse_write(
    a: &JsonObject,
    limits: &TransferLimits,
) -> Result<(GuestRelPath, Vec<u8>), String> {
    args::only_keys(a, &["path", "content", "encoding"])?;
    let path = args::path(a, "path")?;
    let content = args::string(a, "content")?;
    let data = match args::opt_string(a, "encoding")?.as_deref() {
        None | Some("text") => content.into_bytes(),
        Some("base64") => base64::engine::general_purpose::STANDARD
            .decode(content.trim())
            .map_err(|e| format!("`content` is not valid base64: {e}"))?,
        Some(_) => return Err("`encoding` must be \"text\" or \"base64\"".to_owned()),
    };
    let n = u64::try_from(data.len()).unwrap_or(u64::MAX);
    if n > limits.max_bytes_per_file {
        return Err(format!(
            "{n} bytes, above the {} byte per-file cap for files written in",
            limits.max_bytes_per_file
        ));
    }
    Ok((path, data))
}

/// `read_file` arguments: the path and the byte cap (at most the per-file cap).
pub(crate) fn parse_read(
    a: &JsonObject,
    limits: &TransferLimits,
) -> Result<(GuestRelPath, u64), String> {
    args::only_keys(a, &["path", "max_bytes"])?;
    let cap = match a.get("max_bytes") {
        None | Some(Value::Null) => limits.max_bytes_per_file,
        Some(v) => v
            .as_u64()
            .filter(|n| *n > 0)
            .ok_or("`max_bytes` must be a positive integer")?
            .min(limits.max_bytes_per_file),
    };
    Ok((args::path(a, "path")?, cap))
}

/// `list_files` arguments: the directory (`None`: /work itself).
pub(crate) fn parse_list(a: &JsonObject) -> Result<Option<GuestRelPath>, String> {
    args::only_keys(a, &["path"])?;
    match args::opt_string(a, "path")?.as_deref() {
        None | Some("" | "." | "/work" | "/work/") => Ok(None),
        Some(p) => args::parse_path(p).map(Some),
    }
}

/// `write_file {path, content, encoding?}`: creates or replaces the file (parents made).
pub async fn write(sb: &LocalSandbox, a: &JsonObject, limits: &TransferLimits) -> CallToolResult {
    let (rel, data) = match parse_write(a, limits) {
        Ok(x) => x,
        Err(m) => return result::refusal(m),
    };
    let path = rel.as_str();
    match sb.write_file(GUEST_WORK_DIR, &rel, &data).await {
        Ok(()) => result::file_result(
            format!("wrote {} bytes to /work/{path}", data.len()),
            Vec::new(),
            json!({"path": path, "bytes": data.len()}),
        ),
        Err(e) => result::file_error(format!("/work/{path}: {}", why(&e))),
    }
}

/// `read_file {path, max_bytes?}`: text comes back as text, a raster image as image content,
/// anything else as a base64 blob resource with its media type.
pub async fn read(sb: &LocalSandbox, a: &JsonObject, limits: &TransferLimits) -> CallToolResult {
    let (rel, cap) = match parse_read(a, limits) {
        Ok(x) => x,
        Err(m) => return result::refusal(m),
    };
    let path = rel.as_str();
    let data = match sb.read_file(GUEST_WORK_DIR, &rel, cap).await {
        Ok(d) => d,
        Err(e) => return result::file_error(format!("/work/{path}: {}", why(&e))),
    };
    let (mime, form) = media::classify(path, &data);
    let detail = json!({"path": path, "bytes": data.len(), "mime_type": mime,
                        "content": form.as_str()});
    match form {
        Form::Text => {
            let mut r = CallToolResult::success(vec![ContentBlock::text(
                String::from_utf8_lossy(&data).into_owned(),
            )]);
            r.structured_content = Some(detail);
            r
        }
        Form::Image | Form::Blob => result::file_result(
            format!("/work/{path}: {mime}, {} bytes, attached", data.len()),
            vec![media::block(&uri(path), mime, form, &data)],
            detail,
        ),
    }
}

/// `list_files {path?}`: the entries of a directory beneath /work (one level).
pub async fn list(sb: &LocalSandbox, a: &JsonObject) -> CallToolResult {
    let dir = match parse_list(a) {
        Ok(d) => d,
        Err(m) => return result::refusal(m),
    };
    let shown = dir
        .as_ref()
        .map_or_else(|| "/work".to_owned(), |d| format!("/work/{d}"));
    let entries = match sb.list(GUEST_WORK_DIR, dir.as_ref()).await {
        Ok(e) => e,
        Err(e) => return result::file_error(format!("{shown}: {}", why(&e))),
    };
    let truncated = entries.len() > MAX_LISTED;
    let mut text = format!("{shown}: {} entries", entries.len());
    let mut listed = Vec::new();
    for e in entries.iter().take(MAX_LISTED) {
        let (kind, line) = match (e.stat.is_dir, e.stat.size) {
            (true, _) => ("dir", format!("{}/", e.name)),
            (false, Some(n)) => ("file", format!("{}  {n} bytes", e.name)),
            (false, None) => ("other", format!("{}  (not a plain file)", e.name)),
        };
        text.push('\n');
        text.push_str(&line);
        listed.push(json!({"name": e.name, "type": kind, "size": e.stat.size}));
    }
    if truncated {
        text.push_str(&format!("\n[only the first {MAX_LISTED} are listed]"));
    }
    result::file_result(
        text,
        Vec::new(),
        json!({"path": shown, "entries": listed, "truncated": truncated}),
    )
}
