//! The wire of snapshots: `sandbox.snapshot`, `sandbox.pause`, `sandbox.resume`,
//! `sandbox.fork`, `snapshot.list`, `snapshot.remove`, and `sandbox.create`'s
//! `from_snapshot` (the work is `crate::registry::pause`'s). Strict params, as everywhere.
use std::sync::Arc;

use airlock_protocol::{ErrorCode, ErrorObject};
use serde::Deserialize;
use serde_json::Value;

use airlock_policy::HostPolicy;

use crate::json_doc::JsonDoc;
use crate::registry::error::ServerError;
use crate::registry::pause::Remake;
use crate::registry::sandboxes::{Held, Sandboxes};
use crate::tenancy::tenant::Tenant;
use crate::wire::answers;
use crate::wire::run::Conn;
use crate::wire::spec::CreateParams;

fn invalid(msg: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::InvalidParams, msg)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForkParams {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: String,
    count: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoveParams {
    snapshot_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoParams {}

/// A sandbox made again by this face: its `sandbox.create` params parsed again, its limits
/// its requested ones within the connection's ceilings.
pub(crate) struct Remade<'a>(pub(crate) &'a Conn);

impl Remake for Remade<'_> {
    fn request(
        &self,
        raw: &JsonDoc,
        host: &HostPolicy,
        tenant: &Tenant,
    ) -> Result<CreateParams, ServerError> {
        crate::wire::spec::parse_create(Some(raw.0.clone()), host)
            .and_then(|p| p.for_tenant(tenant))
            .map_err(ServerError::refused)
    }

    fn limits(&self, p: &CreateParams) -> Result<airlock_broker::Limits, ServerError> {
        let config = &self.0.shared.config;
        config
            .ceilings
            .resolve(&config.defaults, &p.limits)
            .map_err(|r| ServerError::invalid(r.to_string()))
    }
}

/// `sandbox.fork`.
pub(crate) async fn fork(
    conn: &Conn,
    sbs: &Sandboxes,
    held: &Arc<Held>,
    params: Value,
) -> Result<Value, ErrorObject> {
    let p: ForkParams =
        serde_json::from_value(params).map_err(|e| invalid(format!("sandbox.fork params: {e}")))?;
    let forked = sbs.fork(held, p.count, &Remade(conn)).await?;
    Ok(answers::forked(&forked))
}

/// `snapshot.list`.
pub(crate) fn list(sbs: &Sandboxes, tenant: &Tenant, params: Value) -> Result<Value, ErrorObject> {
    let params = if params.is_null() {
        Value::Object(serde_json::Map::new())
    } else {
        params
    };
    serde_json::from_value::<NoParams>(params)
        .map_err(|e| invalid(format!("snapshot.list params: {e}")))?;
    Ok(answers::snapshots(&sbs.list_snapshots(tenant)?))
}

/// `snapshot.remove`.
pub(crate) fn remove(
    sbs: &Sandboxes,
    tenant: &Tenant,
    params: Value,
) -> Result<Value, ErrorObject> {
    let p: RemoveParams = serde_json::from_value(params)
        .map_err(|e| invalid(format!("snapshot.remove params: {e}")))?;
    sbs.remove_snapshot(tenant, &p.snapshot_id)?;
    Ok(serde_json::json!({ "snapshot_id": p.snapshot_id, "removed": true }))
}

/// Splits `from_snapshot` off `sandbox.create`'s params; without a `spec` the snapshot's own
/// is used (never its key: the new sandbox has the key the caller gives, or none).
pub(crate) async fn create_from(
    conn: &Conn,
    sbs: &Sandboxes,
    mut params: Value,
) -> Result<Value, ErrorObject> {
    let Some(obj) = params.as_object_mut() else {
        return Err(invalid("sandbox.create params must be an object"));
    };
    let Some(from) = obj.remove("from_snapshot") else {
        return Err(invalid("sandbox.create params: no from_snapshot"));
    };
    let Some(from) = from.as_str().map(str::to_owned) else {
        return Err(invalid(
            "sandbox.create from_snapshot must be a snapshot id string",
        ));
    };
    let snapshot = sbs.read_snapshot_for(&conn.info.tenant, &from).await?;
    if !obj.contains_key("spec") {
        let manifest: Value = serde_json::from_slice(snapshot.manifest())
            .map_err(|e| invalid(format!("snapshot {from} has no readable manifest: {e}")))?;
        let spec = manifest["create"]["spec"].clone();
        if spec.is_null() {
            return Err(invalid(format!("snapshot {from} names no spec; give one")));
        }
        obj.insert("spec".into(), spec);
    }
    let p = crate::wire::spec::parse_create(Some(params), sbs.host_policy())
        .and_then(|p| p.for_tenant(&conn.info.tenant))
        .map_err(invalid)?;
    let limits = Remade(conn).limits(&p)?;
    let held = sbs.create_from(p, limits, Arc::new(snapshot)).await?;
    Ok(answers::describe(&held, sbs.isolation()))
}
