//! `outputs.collect`: a sandbox's declared outputs, read in the maf-sandbox reference's phase
//! order (declaration, stat and cap, read with the caps re-checked against the bytes read) by
//! `airlock_router::outputs::collect_outputs`, and returned to the orchestrator with their
//! bytes. Outputs named at call time are accepted only when the spec says so.
use airlock_policy::GuestRelPath;
use airlock_protocol::{ErrorCode, ErrorObject};
use airlock_router::outputs::{collect_outputs, CollectContext, Collected, DeclaredOutput};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::sandboxes::Held;

/// Most outputs one spec or call may name.
pub const MAX_OUTPUTS: usize = 32;
/// Most artifact bytes one response carries (base64 makes it 4/3 of this, under the cap).
pub const MAX_RESPONSE_BYTES: u64 = 640 * 1024;

/// One output as the wire names it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireOutput {
    path: String,
    name: Option<String>,
    media_type: String,
    #[serde(default = "yes")]
    required: bool,
}

fn yes() -> bool {
    true
}

/// The declared outputs of a spec, checked.
pub fn declared(outputs: Vec<WireOutput>) -> Result<Vec<DeclaredOutput>, String> {
    if outputs.len() > MAX_OUTPUTS {
        return Err(format!("at most {MAX_OUTPUTS} outputs may be declared"));
    }
    outputs
        .into_iter()
        .map(|o| {
            let path =
                GuestRelPath::parse(&o.path).map_err(|e| format!("output {:?}: {e}", o.path))?;
            // The name it will be returned under is checked now, not at the first collect.
            let name = o.name.as_deref().unwrap_or(&o.path);
            airlock_router::names::validate_artifact_name(name)
                .map_err(|e| format!("output name {name:?}: {e}"))?;
            let mut d = DeclaredOutput::new(path, o.media_type).consume();
            if let Some(n) = o.name {
                d = d.named(n);
            }
            if !o.required {
                d = d.optional();
            }
            Ok(d)
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CollectParams {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: String,
    outputs: Option<Vec<WireOutput>>,
}

/// The outputs an `outputs.collect` names at call time (`None`: the declared ones), unchecked
/// (they are checked by [`declared`] once the sandbox is known to accept them).
pub(crate) fn parse_collect(v: Value) -> Result<Option<Vec<WireOutput>>, ErrorObject> {
    let p: CollectParams = serde_json::from_value(v).map_err(|e| {
        ErrorObject::new(
            ErrorCode::InvalidParams,
            format!("outputs.collect params: {e}"),
        )
    })?;
    Ok(p.outputs)
}

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
