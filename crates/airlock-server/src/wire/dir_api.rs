//! `files.make_dir`, `files.rename` and `files.write_many` (issue 40): a sandbox's directories
//! made, its entries renamed, several files written in one call, paths relative to its `/work` and walked by handle with no link followed
//! (`airlock_local::files`), answered as `files.stat` would answer the path made.
use airlock_policy::{Capability, GuestRelPath};
use airlock_protocol::ErrorObject;
use airlock_router::Sandbox;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::registry::sandboxes::Held;
use crate::wire::files_api::{file_error, invalid, params, stat_now};

const WORK: &str = airlock_broker::GUEST_WORK_DIR;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MakeDirParams {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: String,
    path: String,
    #[serde(default)]
    parents: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RenameParams {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: String,
    from: String,
    to: String,
}

fn path(member: &str, raw: &str) -> Result<GuestRelPath, ErrorObject> {
    GuestRelPath::parse(raw).map_err(|e| invalid(format!("{member} {raw:?}: {e}")))
}

/// The answer `files.stat` gives for `rel` now, with `extra` members.
async fn stat_of(h: &Held, rel: &GuestRelPath, extra: Value) -> Result<Value, ErrorObject> {
    let mut v = stat_now(h, rel).await?;
    if let (Value::Object(o), Value::Object(e)) = (&mut v, extra) {
        o.extend(e);
    }
    Ok(v)
}

/// `files.make_dir` params, checked: the path and whether parents are made.
pub(crate) fn parse_make_dir(v: Value) -> Result<(GuestRelPath, bool), ErrorObject> {
    let p: MakeDirParams = params("files.make_dir", v)?;
    Ok((path("path", &p.path)?, p.parents))
}

/// `files.rename` params, checked: from and to.
pub(crate) fn parse_rename(v: Value) -> Result<(GuestRelPath, GuestRelPath), ErrorObject> {
    let p: RenameParams = params("files.rename", v)?;
    Ok((path("from", &p.from)?, path("to", &p.to)?))
}

/// `files.make_dir {sandbox_id, path, parents?}`: `created` is false when a directory was
/// already there (anything else there is refused).
pub async fn make_dir(h: &Held, v: Value) -> Result<Value, ErrorObject> {
    let (rel, parents) = parse_make_dir(v)?;
    let created = h
        .sandbox
        .make_dir(WORK, &rel, parents)
        .await
        .map_err(|e| file_error(&e))?;
    stat_of(h, &rel, json!({ "created": created })).await
}

/// `files.rename {sandbox_id, from, to}`: a file (or an empty directory) at `to` is replaced;
/// answers for `to`.
pub async fn rename(h: &Held, v: Value) -> Result<Value, ErrorObject> {
    h.allows(Capability::FilesIn)?;
    let (from, to) = parse_rename(v)?;
    h.sandbox
        .rename(WORK, &from, &to)
        .await
        .map_err(|e| file_error(&e))?;
    stat_of(h, &to, json!({ "from": from.as_str() })).await
}

/// Most files one `files.write_many` carries.
const MAX_MANY: usize = 1_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ManyParams {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: String,
    files: Vec<OneFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OneFile {
    path: String,
    data: String,
}

/// `files.write_many` params, checked before any file is touched: at most [`MAX_MANY`]
/// files whose decoded bytes together fit one `files.write`'s chunk.
pub(crate) fn parse_write_many(v: Value) -> Result<Vec<(GuestRelPath, Vec<u8>)>, ErrorObject> {
    use base64::Engine as _;
    let p: ManyParams = params("files.write_many", v)?;
    if p.files.is_empty() || p.files.len() > MAX_MANY {
        return Err(invalid(format!(
            "files.write_many takes 1 to {MAX_MANY} files"
        )));
    }
    // Decoding is bounded by the message (one frame); the total is checked as it grows.
    let max = crate::wire::files_api::MAX_CHUNK;
    let mut total = 0u64;
    let mut out = Vec::with_capacity(p.files.len());
    for (i, f) in p.files.into_iter().enumerate() {
        let rel = path(&format!("files[{i}].path"), &f.path)?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(f.data.as_bytes())
            .map_err(|e| invalid(format!("files[{i}].data is not base64: {e}")))?;
        total = total.saturating_add(data.len() as u64);
        if total > max {
            return Err(invalid(format!(
                "one files.write_many carries at most {max} bytes in all; send more in several"
            )));
        }
        out.push((rel, data));
    }
    Ok(out)
}

/// `files.write_many {sandbox_id, files: [{path, data}]}` → `{files: [...]}`, each as
/// `files.write` answers; the files are written in order, and the first refused ends the call
/// (those before it are written).
pub async fn write_many(
    h: &Held,
    v: Value,
    metrics: &crate::ops::metrics::Metrics,
) -> Result<Value, ErrorObject> {
    let files = parse_write_many(v)?;
    let mut answers = Vec::with_capacity(files.len());
    for (rel, data) in files {
        // The sandbox refuses a file over its `files_in.max_bytes_per_file` before writing it.
        h.sandbox
            .write_file(WORK, &rel, &data)
            .await
            .map_err(|e| file_error(&e))?;
        metrics.transferred(crate::ops::metrics::Transfer::FilesWrite, data.len() as u64);
        answers.push(stat_of(h, &rel, json!({})).await?);
    }
    Ok(json!({ "files": answers }))
}
