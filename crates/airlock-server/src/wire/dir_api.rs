//! `files.make_dir` and `files.rename` (issue 40): a sandbox's directories made and its
//! entries renamed, paths relative to its `/work` and walked by handle with no link followed
//! (`airlock_local::files`), answered as `files.stat` would answer the path made.
use airlock_policy::{Capability, GuestRelPath};
use airlock_protocol::{ErrorCode, ErrorObject};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::registry::sandboxes::Held;
use crate::wire::files_api::{file_error, stat};

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

fn invalid(m: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::InvalidParams, m)
}

fn params<T: for<'de> Deserialize<'de>>(method: &str, v: Value) -> Result<T, ErrorObject> {
    serde_json::from_value(v).map_err(|e| invalid(format!("{method} params: {e}")))
}

fn path(member: &str, raw: &str) -> Result<GuestRelPath, ErrorObject> {
    GuestRelPath::parse(raw).map_err(|e| invalid(format!("{member} {raw:?}: {e}")))
}

/// The answer `files.stat` gives for `rel` now, with `extra` members.
async fn stat_of(h: &Held, rel: &GuestRelPath, extra: Value) -> Result<Value, ErrorObject> {
    let mut v = stat(h, json!({ "sandbox_id": h.id, "path": rel.as_str() })).await?;
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
