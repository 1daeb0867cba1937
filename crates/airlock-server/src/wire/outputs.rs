//! Outputs as the wire names them (in a spec's `declared_outputs` or an `outputs.collect`),
//! checked into the router's declared outputs.
use airlock_policy::GuestRelPath;
use airlock_protocol::{ErrorCode, ErrorObject};
use airlock_router::outputs::DeclaredOutput;
use serde::Deserialize;
use serde_json::Value;

/// Most outputs one spec or call may name.
pub const MAX_OUTPUTS: usize = 32;
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
