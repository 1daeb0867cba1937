//! `files.write`, `files.read`, `files.list`, `files.stat`, `files.remove`: paths relative to a
//! sandbox's `/work`, resolved with no-follow primitives beneath the sandbox's work dir handle.
//!
//! Bytes travel as base64. A file larger than one message moves in chunks: `files.read` takes
//! `offset`/`length` (at most [`MAX_CHUNK`] per call), `files.write` with `offset` > 0 appends
//! exactly at the file's current end. Each call is bounded on its own by the spec's per-file
//! cap (`files_in.max_bytes_per_file` for writes, `files_out.max_bytes_per_file` for reads);
//! nothing is counted over the sandbox's life (its disk bounds what it can hold).
use airlock_policy::GuestRelPath;
use airlock_protocol::{ErrorCode, ErrorObject};
use airlock_router::ErrorKind;
use airlock_router::{FileStat, Sandbox, SandboxError};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::ops::metrics::{Metrics, Transfer};
use crate::registry::sandboxes::Held;

/// Most bytes one `files.read` or `files.write` carries (base64 makes it 4/3 of this, well
/// under the 1 MiB message cap).
pub const MAX_CHUNK: u64 = 512 * 1024;

const WORK: &str = airlock_broker::GUEST_WORK_DIR;

pub(crate) fn invalid(m: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::InvalidParams, m)
}

/// A sandbox error as the wire sees it.
#[must_use]
pub fn file_error(e: &SandboxError) -> ErrorObject {
    let code = match e {
        SandboxError::Path(_) => ErrorCode::InvalidParams,
        // protocol.md: `not_found` is "no such sandbox, run or file".
        SandboxError::NotFound { .. } => ErrorCode::NotFound,
        SandboxError::OverCapacity { .. } | SandboxError::QueuedTimeout => ErrorCode::OverCapacity,
        _ => ErrorCode::FileRefused,
    };
    // `data.kind` names the rule (`SandboxPathNotConfined`, `SandboxFileTooLarge`, ...), so a
    // client tells a path through a link from an oversized file without parsing the message.
    ErrorObject::new(code, e.to_string()).with_data(json!({ "kind": e.kind() }))
}

fn path(raw: &str) -> Result<GuestRelPath, ErrorObject> {
    GuestRelPath::parse(raw).map_err(|e| invalid(format!("path {raw:?}: {e}")))
}

pub(crate) fn params<T: for<'de> Deserialize<'de>>(
    method: &str,
    v: Value,
) -> Result<T, ErrorObject> {
    serde_json::from_value(v).map_err(|e| invalid(format!("{method} params: {e}")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteParams {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: String,
    path: String,
    data: String,
    #[serde(default)]
    offset: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadParams {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: String,
    path: String,
    #[serde(default)]
    offset: u64,
    length: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PathParams {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: String,
    path: Option<String>,
}

/// A checked `files.write`: the path, the decoded bytes (at most [`MAX_CHUNK`]), the offset.
pub(crate) struct WriteCall {
    pub(crate) rel: GuestRelPath,
    pub(crate) data: Vec<u8>,
    pub(crate) offset: u64,
}

/// Parse and bound `files.write` params, before any file is touched.
pub(crate) fn parse_write(v: Value) -> Result<WriteCall, ErrorObject> {
    let p: WriteParams = params("files.write", v)?;
    let rel = path(&p.path)?;
    if p.data.len() as u64 > MAX_CHUNK.div_ceil(3) * 4 + 4 {
        return Err(invalid(format!(
            "one files.write carries at most {MAX_CHUNK} bytes; send larger files in chunks"
        )));
    }
    let data = B64
        .decode(p.data.as_bytes())
        .map_err(|e| invalid(format!("data is not base64: {e}")))?;
    // The encoded-length check above lets up to 4 bytes over through (base64 padding).
    if data.len() as u64 > MAX_CHUNK {
        return Err(invalid(format!(
            "one files.write carries at most {MAX_CHUNK} bytes; send larger files in chunks"
        )));
    }
    Ok(WriteCall {
        rel,
        data,
        offset: p.offset,
    })
}

/// `files.write`: replace the file (offset 0) or append a chunk at its end; answers as
/// `files.stat` would.
pub async fn write(h: &Held, v: Value, metrics: &Metrics) -> Result<Value, ErrorObject> {
    let WriteCall { rel, data, offset } = parse_write(v)?;
    let max = h.spec.files_in().max_bytes_per_file;
    // Each call is checked on its own: the file it leaves is at most `max_bytes_per_file`
    // (both branches refuse before a byte lands), and what a sandbox holds in all is bounded
    // by its disk (one size- and inode-bounded tmpfs), not by a count of calls.
    let len = data.len() as u64;
    let written = if offset == 0 {
        h.sandbox.write_file(WORK, &rel, &data).await.map(|()| len)
    } else {
        h.sandbox.append_chunk(WORK, &rel, offset, data, max).await
    };
    written.map_err(|e| file_error(&e))?;
    metrics.transferred(Transfer::FilesWrite, len);
    // What `files.stat` says now: both branches leave a regular file (a link or a directory
    // in the way is refused above).
    stat_now(h, &rel).await
}

/// What `files.stat` answers for `rel` now.
pub(crate) async fn stat_now(h: &Held, rel: &GuestRelPath) -> Result<Value, ErrorObject> {
    let st = h
        .sandbox
        .stat(WORK, rel)
        .await
        .map_err(|e| file_error(&e))?;
    Ok(stat_answer(rel, st.as_ref()))
}

/// `files.stat`'s answer for `rel`: the documented members, whatever is there.
fn stat_answer(rel: &GuestRelPath, st: Option<&FileStat>) -> Value {
    let mut v = json!({ "path": rel.as_str(), "exists": st.is_some() });
    if let Value::Object(o) = &mut v {
        o.extend(stat_members(st));
    }
    v
}

/// The members a stat and a listed entry share: size, kind, mode, permissions, modified_ms.
fn stat_members(st: Option<&FileStat>) -> serde_json::Map<String, Value> {
    let mode = st.and_then(|s| s.mode);
    let members = json!({
        "size": st.and_then(|s| s.size),
        "is_dir": st.is_some_and(|s| s.is_dir),
        "kind": st.map(|s| s.kind.as_str()),
        "mode": mode,
        "permissions": mode.map(permissions),
        "modified_ms": st.and_then(|s| s.modified_ms),
    });
    match members {
        Value::Object(o) => o,
        _ => serde_json::Map::new(),
    }
}

/// `ls -l`'s nine permission characters for `mode` (`rwxr-xr-x`).
fn permissions(mode: u32) -> String {
    (0..9)
        .map(|i| {
            let bit = 1 << (8 - i);
            match (mode & bit != 0, i % 3) {
                (false, _) => '-',
                (true, 0) => 'r',
                (true, 1) => 'w',
                (true, _) => 'x',
            }
        })
        .collect()
}

/// A checked `files.read`: the path, the offset and a length of at most [`MAX_CHUNK`].
pub(crate) struct ReadCall {
    pub(crate) rel: GuestRelPath,
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

/// Parse and bound `files.read` params, before any file is touched.
pub(crate) fn parse_read(v: Value) -> Result<ReadCall, ErrorObject> {
    let p: ReadParams = params("files.read", v)?;
    let rel = path(&p.path)?;
    let len = p.length.unwrap_or(MAX_CHUNK);
    if len > MAX_CHUNK {
        return Err(invalid(format!(
            "length {len} is over the {MAX_CHUNK} byte chunk; read larger files in chunks"
        )));
    }
    Ok(ReadCall {
        rel,
        offset: p.offset,
        len,
    })
}

/// `files.read`: up to `length` bytes from `offset`.
pub async fn read(h: &Held, v: Value, metrics: &Metrics) -> Result<Value, ErrorObject> {
    let ReadCall { rel, offset, len } = parse_read(v)?;
    let max = h.spec.files_out().max_bytes_per_file;
    let c = h
        .sandbox
        .read_chunk(WORK, &rel, offset, len, max)
        .await
        .map_err(|e| file_error(&e))?;
    metrics.transferred(Transfer::FilesRead, c.data.len() as u64);
    let end = offset.saturating_add(c.data.len() as u64);
    Ok(json!({
        "path": rel.as_str(),
        "offset": offset,
        "data": B64.encode(&c.data),
        "size": c.size,
        "eof": end >= c.size,
    }))
}

/// The path of `files.stat`, `files.remove` (required) or `files.list` (the work dir when
/// absent), checked.
pub(crate) fn parse_path(method: &str, v: Value) -> Result<Option<GuestRelPath>, ErrorObject> {
    let p: PathParams = params(method, v)?;
    match p.path.as_deref() {
        None if method == "files.list" => Ok(None),
        raw => path(raw.unwrap_or_default()).map(Some),
    }
}

/// The path `files.stat` and `files.remove` require.
fn required_path(method: &str, v: Value) -> Result<GuestRelPath, ErrorObject> {
    parse_path(method, v)?.ok_or_else(|| invalid(format!("{method} needs a `path`")))
}

/// `files.stat`: lstat-like; a size only for what `files.read` would serve.
pub async fn stat(h: &Held, v: Value) -> Result<Value, ErrorObject> {
    let rel = required_path("files.stat", v)?;
    stat_now(h, &rel).await
}

/// `files.list`: the sorted entries of a directory (the work dir when `path` is absent).
pub async fn list(h: &Held, v: Value) -> Result<Value, ErrorObject> {
    let dir = parse_path("files.list", v)?;
    let entries = h
        .sandbox
        .list(WORK, dir.as_ref())
        .await
        .map_err(|e| file_error(&e))?;
    let entries: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut o = stat_members(Some(&e.stat));
            o.insert("name".into(), json!(e.name));
            Value::Object(o)
        })
        .collect();
    Ok(json!({ "entries": entries }))
}

/// `files.remove`: unlink a file or link (never followed) or an empty directory; missing is
/// success.
pub async fn remove(h: &Held, v: Value) -> Result<Value, ErrorObject> {
    let rel = required_path("files.remove", v)?;
    h.sandbox
        .remove(WORK, &rel)
        .await
        .map_err(|e| file_error(&e))?;
    Ok(json!({ "path": rel.as_str() }))
}

#[cfg(test)]
mod tests {
    use super::permissions;

    #[test]
    fn permissions_read_as_ls_writes_them() {
        assert_eq!(permissions(0o755), "rwxr-xr-x");
        assert_eq!(permissions(0o640), "rw-r-----");
        assert_eq!(permissions(0o4711), "rwx--x--x");
        assert_eq!(permissions(0), "---------");
    }
}
