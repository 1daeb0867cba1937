//! `sandbox.list` and `sandbox.set_timeout`: the sandboxes this server holds, and a held
//! sandbox's idle timeout.
//!
//! "For the caller": the server serves one token today (no tenants), so every authenticated
//! connection sees every held sandbox. The listing takes a visibility filter
//! ([`visible_to`]) so that a multi-tenant server narrows it in one place. Call-scoped
//! `execute` sandboxes are never held, so never listed. The list is bounded by what the server
//! holds (at most `--max-sandboxes`).
use std::time::Duration;

use airlock_protocol::{ErrorCode, ErrorObject};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::registry::sandboxes::{Held, Sandboxes};
use crate::wire::run::Conn;

fn invalid(m: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::InvalidParams, m)
}

/// Which sandboxes `conn` may see: its tenant's.
pub(crate) fn visible_to(conn: &Conn) -> crate::tenancy::tenant::Tenant {
    conn.info.tenant.clone()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {}

/// `sandbox.list` params: `{}` (absent or `null` too); unknown members are refused.
pub(crate) fn parse_list(params: Value) -> Result<(), ErrorObject> {
    match params {
        Value::Null => Ok(()),
        v => serde_json::from_value::<ListParams>(v)
            .map(|_| ())
            .map_err(|e| invalid(format!("sandbox.list params: {e}"))),
    }
}

/// The key a sandbox is held under, as the orchestrator gave it; `null` for a keyless one.
fn key_value(h: &Held) -> Value {
    let k = &h.key;
    if k.scope() == crate::wire::spec::KEYLESS_SCOPE {
        return Value::Null;
    }
    let scope = crate::tenancy::tenant::wire_scope(&h.tenant, k.scope());
    let mut v = json!({ "scope": scope, "thread_id": k.thread_id() });
    if let (Some(c), Value::Object(m)) = (k.call_id(), &mut v) {
        m.insert("call_id".into(), json!(c));
    }
    v
}

/// One entry of `sandbox.list`.
#[must_use]
pub(crate) fn record(h: &Held) -> Value {
    let mut v = json!({
        "sandbox_id": h.id,
        "key": key_value(h),
        "metadata": h.life.metadata,
        "created_at_ms": h.life.created_at_ms(),
        "last_used_at_ms": h.life.at_ms(h.last_used()),
        "idle_timeout_s": h.life.idle_timeout().as_secs_f64(),
        "state": if h.running().is_some() { "running" } else { "idle" },
    });
    // Only a sandbox with a lifetime says when it ends.
    if let (Value::Object(o), Some(end)) = (&mut v, h.life.ends_at_ms()) {
        o.insert("ends_at_ms".into(), json!(end));
    }
    v
}

/// `sandbox.list {}` → `{"sandboxes": [...]}`: the tenant's live ones, oldest first,
/// then the paused ones (`"state": "paused"`).
pub(crate) fn list(sbs: &Sandboxes, tenant: &crate::tenancy::tenant::Tenant) -> Value {
    let mut held: Vec<_> = sbs
        .held()
        .into_iter()
        .filter(|h| h.tenant == *tenant)
        .collect();
    held.sort_by(|a, b| (a.life.created_at_ms(), &a.id).cmp(&(b.life.created_at_ms(), &b.id)));
    let mut sandboxes: Vec<Value> = held.iter().map(|h| record(h)).collect();
    let mut paused = sbs.paused_records();
    paused.retain(|r| r.tenant() == *tenant);
    paused.sort_by(|a, b| (a.paused_at_ms, &a.sandbox_id).cmp(&(b.paused_at_ms, &b.sandbox_id)));
    sandboxes.extend(paused.iter().map(paused_record));
    json!({ "sandboxes": sandboxes })
}

/// One entry of `sandbox.list` for a paused sandbox (after the live ones).
fn paused_record(r: &crate::state_dir::PausedRecord) -> Value {
    json!({
        "sandbox_id": r.sandbox_id,
        "key": r.create.0.get("key").cloned().unwrap_or(Value::Null),
        "metadata": r.metadata,
        "paused_at_ms": r.paused_at_ms,
        "snapshot_id": r.snapshot_id,
        "state": "paused",
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetTimeoutParams {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: String,
    idle_timeout_s: Value,
}

/// `sandbox.set_timeout` params, checked: the new idle timeout (the bounds of create's).
pub(crate) fn parse_set_timeout(params: Value) -> Result<Duration, ErrorObject> {
    let p: SetTimeoutParams = serde_json::from_value(params)
        .map_err(|e| invalid(format!("sandbox.set_timeout params: {e}")))?;
    seconds(
        "idle_timeout_s",
        &p.idle_timeout_s,
        crate::registry::life::checked_idle,
    )
}

/// `raw`, the member `member`, as a number of seconds that `check` bounds.
fn seconds(
    member: &str,
    raw: &Value,
    check: fn(&str, f64) -> Result<Duration, String>,
) -> Result<Duration, ErrorObject> {
    let Some(secs) = raw.as_f64() else {
        return Err(invalid(format!(
            "{member} = {raw}: must be a number of seconds"
        )));
    };
    check(member, secs).map_err(invalid)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetLifetimeParams {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: String,
    lifetime_s: Value,
}

/// `sandbox.set_lifetime` params, checked: the new lifetime (the bounds of create's).
pub(crate) fn parse_set_lifetime(params: Value) -> Result<Duration, ErrorObject> {
    let p: SetLifetimeParams = serde_json::from_value(params)
        .map_err(|e| invalid(format!("sandbox.set_lifetime params: {e}")))?;
    seconds(
        "lifetime_s",
        &p.lifetime_s,
        crate::registry::life::checked_lifetime,
    )
}

/// `sandbox.set_lifetime {sandbox_id, lifetime_s}`: the sandbox's lifetime ends `lifetime_s`
/// from now, whatever its activity (then it is paused with `idle_action: "pause"`, else
/// disposed of). The spec's own lifetime, which the key-reuse rule compares, is unchanged.
pub(crate) fn set_lifetime(h: &Held, params: Value) -> Result<(), ErrorObject> {
    h.life.set_lifetime(parse_set_lifetime(params)?);
    Ok(())
}

/// `sandbox.set_timeout {sandbox_id, idle_timeout_s}`: the timeout in force from now (the
/// call itself is a use, so the sandbox has all of it). The spec's own timeout, which the
/// key-reuse rule compares, is unchanged.
pub(crate) fn set_timeout(h: &Held, params: Value) -> Result<(), ErrorObject> {
    h.life.set_idle_timeout(parse_set_timeout(params)?);
    h.touch();
    Ok(())
}
