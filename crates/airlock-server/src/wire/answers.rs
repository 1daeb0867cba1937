//! The registry's answers as JSON-RPC results: what `sandbox.create`, `sandbox.connect` and
//! `sandbox.resume` say of a sandbox, a disposal, a snapshot, a fork, a snapshot list.
use airlock_policy::DisposalFailure;
use airlock_router::ScopeRecord;
use serde_json::{json, Value};

use crate::registry::pause::{Captured, Forked};
use crate::registry::sandboxes::{Disposed, Held};
use crate::registry::snapshot_owners::SnapshotInfo;

/// What `sandbox.create`/`sandbox.connect` answer.
#[must_use]
pub fn describe(held: &Held, isolation: &str) -> Value {
    let mut v = json!({
        "sandbox_id": held.id,
        "isolation": isolation,
        "isolation_scope": held.spec.isolation_scope().as_str(),
        "egress": held.spec.egress().as_str(),
        "requires": held.spec.requires().iter().map(|c| c.as_str()).collect::<Vec<_>>(),
        "work_dir": airlock_broker::GUEST_WORK_DIR,
        "idle_timeout_s": held.life.idle_timeout().as_secs_f64(),
        "metadata": held.life.metadata,
    });
    // Only a sandbox with a lifetime says when it ends.
    if let (Value::Object(o), Some(end)) = (&mut v, held.life.ends_at_ms()) {
        o.insert("ends_at_ms".into(), json!(end));
    }
    v
}

fn disposal_value(f: Option<&DisposalFailure>) -> Value {
    match f {
        None => Value::Null,
        Some(f) => json!({"code": f.code().as_str(), "message": f.to_string()}),
    }
}

/// `sandbox.dispose`.
#[must_use]
pub fn disposed(d: &Disposed) -> Value {
    json!({ "sandbox_id": d.sandbox_id, "disposal": disposal_value(d.failure.as_ref()) })
}

/// `scope.dispose`.
#[must_use]
pub fn scope_disposed(r: &ScopeRecord) -> Value {
    json!({ "disposed": r.disposed, "undisposed": disposal_value(r.undisposed.as_ref()) })
}

/// `sandbox.snapshot`.
#[must_use]
pub fn captured(c: &Captured) -> Value {
    json!({
        "sandbox_id": c.sandbox_id, "snapshot_id": c.snapshot_id.as_str(), "bytes": c.bytes,
        "kernel": c.kernel.0,
    })
}

/// `sandbox.pause`: the snapshot, and its state.
#[must_use]
pub fn paused(c: &Captured) -> Value {
    let mut v = captured(c);
    v["state"] = json!("paused");
    v
}

/// `sandbox.fork`.
#[must_use]
pub fn forked(f: &Forked) -> Value {
    json!({
        "sandbox_id": f.sandbox_id, "sandbox_ids": f.branches, "copy_on_write": f.copy_on_write,
    })
}

/// `snapshot.list`.
#[must_use]
pub fn snapshots(list: &[SnapshotInfo]) -> Value {
    let items: Vec<Value> = list
        .iter()
        .map(|s| {
            json!({
                "snapshot_id": s.snapshot_id.as_str(), "bytes": s.bytes, "made_unix": s.made_unix,
                "kept": s.kept, "paused_sandboxes": s.paused_sandboxes,
            })
        })
        .collect();
    json!({ "snapshots": items })
}
