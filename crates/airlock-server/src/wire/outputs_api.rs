//! `outputs.collect`: a sandbox's declared outputs, read in the maf-sandbox reference's phase
//! order (declaration, stat and cap, read with the caps re-checked against the bytes read) by
//! `airlock_router::outputs::collect_outputs`, and returned to the orchestrator with their
//! bytes. Outputs named at call time are accepted only when the spec says so.
use airlock_protocol::{ErrorCode, ErrorObject};
use airlock_router::outputs::{collect_outputs, CollectContext, Collected};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};

use crate::registry::sandboxes::Held;
pub(crate) use crate::wire::outputs::{declared, parse_collect, MAX_OUTPUTS};

/// Most artifact bytes one response carries (base64 makes it 4/3 of this, under the cap).
pub const MAX_RESPONSE_BYTES: u64 = 640 * 1024;

/// `outputs.collect {sandbox_id, outputs?}`.
pub async fn collect(
    h: &Held,
    v: Value,
    observers: &airlock_router::Observers,
) -> Result<Value, ErrorObject> {
    let outputs = match parse_collect(v)? {
        None => h.outputs.declared.clone(),
        Some(_) if !h.outputs.at_call_time => {
            return Err(ErrorObject::new(
                ErrorCode::SandboxRefused,
                "this sandbox's spec does not accept outputs named at call time \
                 (outputs_named_at_call_time); collect its declared outputs",
            ))
        }
        Some(named) => {
            declared(named).map_err(|m| ErrorObject::new(ErrorCode::InvalidParams, m))?
        }
    };
    let ctx = CollectContext {
        observers: Some(observers),
        key: Some(&h.key),
    };
    // The response cap is a collection cap: phases 2 and 3 refuse past it before (and while)
    // reading, so a call never reads more than one response can carry.
    let one_response = airlock_policy::TransferLimits {
        max_bytes_per_file: MAX_RESPONSE_BYTES,
        max_total_bytes: MAX_RESPONSE_BYTES,
        max_files: MAX_OUTPUTS as u64,
    };
    let spec = h.spec.with_files_out_within(&one_response);
    let collected = collect_outputs(h.sandbox.as_ref(), &spec, &outputs, None, ctx)
        .await
        .map_err(|e| {
            let kind = airlock_router::ErrorKind::kind(&e);
            ErrorObject::new(ErrorCode::FileRefused, e.to_string())
                .with_data(json!({ "kind": kind }))
        })?;
    let mut artifacts = Vec::new();
    let mut absent = Vec::new();
    for c in collected {
        match c {
            Collected::Consumed(a) => {
                artifacts.push(json!({
                    "name": a.name.as_str(),
                    "media_type": a.media_type,
                    "size": a.bytes.len(),
                    "data": B64.encode(&a.bytes),
                }));
            }
            Collected::Absent { name } => absent.push(json!(name.as_str())),
            Collected::Landed(l) => absent.push(json!(l.name.as_str())),
        }
    }
    Ok(json!({ "artifacts": artifacts, "absent": absent }))
}
