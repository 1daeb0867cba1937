//! `sandbox.create` params: the policy vocabulary (a [`SandboxSpec`]) plus what only the wire
//! needs (run limits, idle timeout), and the orchestrator's key.
//!
//! Strict shape (unknown members refused) and bounded collections: everything here crosses a
//! trust boundary.
use std::collections::BTreeSet;
use std::time::Duration;

use airlock_policy::{
    Capability, Egress, HostPolicy, Isolation, IsolationScope, SandboxKey, SandboxSpec,
    TransferLimits,
};
use serde::Deserialize;
use serde_json::Value;

use crate::ceilings::RequestedLimits;

pub use crate::registry::request::{
    IdleAction, NewSandbox as CreateParams, Outputs, KEYLESS_SCOPE,
};

/// Most hosts in an egress allowlist.
const MAX_ALLOW: usize = 64;
/// Longest key part.
const MAX_KEY_PART: usize = 128;
/// What a wire sandbox may do when its spec does not say: run code and commands and move
/// files, but never call host tools (those must be asked for).
#[must_use]
pub fn default_requires() -> BTreeSet<Capability> {
    BTreeSet::from([
        Capability::RunCode,
        Capability::Exec,
        Capability::FilesIn,
        Capability::FilesOut,
        Capability::FilesList,
        Capability::FilesDelete,
    ])
}

/// Idle timeout when the spec names none.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(600);
/// Longest idle timeout a spec may ask for.
pub use crate::registry::life::MAX_IDLE;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    requires: Option<BTreeSet<Capability>>,
    #[serde(default)]
    egress: Option<Egress>,
    #[serde(default)]
    egress_allow: Vec<String>,
    #[serde(default)]
    isolation_scope: Option<IsolationScope>,
    #[serde(default)]
    min_isolation: Option<Isolation>,
    #[serde(default)]
    limits: RequestedLimits,
    files_in: Option<TransferLimits>,
    files_out: Option<TransferLimits>,
    idle_timeout_s: Option<f64>,
    /// An absolute life from create, whatever the activity.
    lifetime_s: Option<f64>,
    /// What idle reclaim does: dispose (the default) or pause (needs `snapshot`).
    #[serde(default)]
    idle_action: IdleAction,
    #[serde(default)]
    declared_outputs: Vec<crate::wire::outputs::WireOutput>,
    #[serde(default)]
    outputs_named_at_call_time: bool,
    #[serde(default)]
    tools: Vec<crate::registry::request::ToolDecl>,
    #[serde(default)]
    stateful: bool,
    #[serde(default)]
    restricted: bool,
    /// An image of the server's store to run on (`airlock image ls`).
    #[serde(default)]
    image: Option<String>,
    /// The orchestrator's labels (`crate::registry::life`); not part of the policy spec.
    #[serde(default)]
    metadata: Option<Value>,
    /// Environment variables of every run, process and terminal of the sandbox (a call's own
    /// `env` wins).
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKey {
    scope: String,
    thread_id: String,
    call_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCreate {
    spec: RawSpec,
    key: Option<RawKey>,
}

fn invalid(m: impl Into<String>) -> String {
    m.into()
}

/// Parse `sandbox.create` params; the error is the `invalid_params` message. Transfer limits
/// the spec does not name are the defaults lowered to the host's ceilings (`host`).
pub fn parse_create(params: Option<Value>, host: &HostPolicy) -> Result<CreateParams, String> {
    let Some(v @ Value::Object(_)) = params else {
        return Err(invalid(
            "sandbox.create params must be an object with `spec`",
        ));
    };
    let params = v.clone();
    let raw: RawCreate =
        serde_json::from_value(v).map_err(|e| format!("sandbox.create params: {e}"))?;
    let key = raw.key.map(parse_key).transpose()?;
    let s = raw.spec;
    if s.egress_allow.len() > MAX_ALLOW {
        return Err(invalid(format!(
            "spec.egress_allow lists more than {MAX_ALLOW} hosts"
        )));
    }
    let idle = match s.idle_timeout_s {
        None => DEFAULT_IDLE,
        Some(x) => crate::registry::life::checked_idle("spec.idle_timeout_s", x)?,
    };
    let metadata = crate::wire::metadata::parse_metadata(s.metadata)?;
    let env = sandbox_env(s.env)?;
    let lifetime = s
        .lifetime_s
        .map(|x| crate::registry::life::checked_lifetime("spec.lifetime_s", x))
        .transpose()?;
    let mut b = SandboxSpec::builder("python")
        .requires(s.requires.unwrap_or_else(default_requires))
        .egress(s.egress.unwrap_or(Egress::Closed))
        .egress_allow(s.egress_allow)
        .isolation_scope(s.isolation_scope.unwrap_or(IsolationScope::Conversation))
        .stateful(s.stateful)
        .restricted(s.restricted);
    if let Some(floor) = s.min_isolation {
        b = b.min_isolation(floor);
    }
    if let Some(image) = s.image {
        b = b.image(crate::wire::spec_image::checked(image)?);
    }
    let lowered = |c: Option<&TransferLimits>| TransferLimits::DEFAULT.within(c);
    b = b.files_in(
        s.files_in
            .unwrap_or_else(|| lowered(host.files_in_ceiling.as_ref())),
    );
    b = b.files_out(
        s.files_out
            .unwrap_or_else(|| lowered(host.files_out_ceiling.as_ref())),
    );
    let spec = b.build().map_err(|e| format!("spec: {e}"))?;
    let outputs = Outputs {
        declared: crate::wire::outputs::declared(s.declared_outputs)
            .map_err(|e| format!("spec.declared_outputs: {e}"))?,
        at_call_time: s.outputs_named_at_call_time,
    };
    crate::wire::tools::check(&s.tools)?;
    if s.idle_action == IdleAction::Pause && !spec.requires().contains(&Capability::Snapshot) {
        return Err("spec.idle_action \"pause\" needs `snapshot` in spec.requires".into());
    }
    if !s.tools.is_empty() && !spec.requires().contains(&Capability::HostTools) {
        return Err("spec.tools declares tools but spec.requires lacks host_tools".into());
    }
    Ok(CreateParams {
        spec,
        limits: s.limits,
        idle,
        outputs,
        tools: s.tools,
        key,
        metadata,
        idle_action: s.idle_action,
        env,
        lifetime,
        raw: crate::json_doc::JsonDoc(params),
        tenant: crate::tenancy::tenant::Tenant::single(),
    })
}

/// `spec.env`, bounded as a run's env is; the names the server sets itself (allowlist egress's
/// proxy variables) are refused, since a run's would be replaced.
fn sandbox_env(
    env: std::collections::BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, String> {
    crate::wire::params::check_env(&env, "spec.env").map_err(|e| e.to_string())?;
    let env: Vec<(String, String)> = env.into_iter().collect();
    // A spec.env over the setup frame's budget would refuse every run of the sandbox.
    crate::wire::params::setup_fits(&env, None).map_err(|e| format!("spec.env: {e}"))?;
    let reserved = airlock_egress::proxy_env();
    if let Some((k, _)) = env
        .iter()
        .find(|(k, _)| reserved.iter().any(|(r, _)| r == k))
    {
        return Err(format!(
            "spec.env name {k:?} is reserved: the server sets it (the allowlist egress proxy)"
        ));
    }
    Ok(env)
}

fn parse_key(k: RawKey) -> Result<SandboxKey, String> {
    if k.scope == KEYLESS_SCOPE {
        return Err(format!("key.scope {KEYLESS_SCOPE:?} is reserved"));
    }
    let parts = [Some(&k.scope), Some(&k.thread_id), k.call_id.as_ref()];
    if parts.into_iter().flatten().any(|p| p.len() > MAX_KEY_PART) {
        return Err(invalid(format!(
            "key parts are at most {MAX_KEY_PART} bytes"
        )));
    }
    let key = SandboxKey::new(k.scope, k.thread_id, "wire").map_err(|e| format!("key: {e}"))?;
    match k.call_id {
        Some(c) => key.with_call_id(c).map_err(|e| format!("key.call_id: {e}")),
        None => Ok(key),
    }
}

/// The capability a method needs, checked on every call.
#[must_use]
pub fn needs(method: &str) -> Option<Capability> {
    use airlock_protocol::method as m;
    Some(match method {
        m::SANDBOX_RUN_CODE => Capability::RunCode,
        m::SANDBOX_EXEC => Capability::Exec,
        m::FILES_WRITE | m::FILES_MAKE_DIR | m::FILES_WRITE_MANY => Capability::FilesIn,
        // A rename takes a name away (and `dir_api` checks `files_in` for the one it makes).
        m::FILES_RENAME => Capability::FilesDelete,
        m::FILES_READ | m::OUTPUTS_COLLECT => Capability::FilesOut,
        m::FILES_LIST | m::FILES_STAT => Capability::FilesList,
        m::FILES_REMOVE => Capability::FilesDelete,
        m if crate::wire::process_methods::is_process_method(m) => Capability::Processes,
        m::SANDBOX_EXPOSE | m::SANDBOX_UNEXPOSE => Capability::Ports,
        m::SANDBOX_SNAPSHOT | m::SANDBOX_PAUSE | m::SANDBOX_FORK => Capability::Snapshot,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_full_spec_parses_and_unknown_members_are_refused() {
        let host = HostPolicy::default();
        let p = parse_create(
            Some(json!({
                "spec": {"requires": ["run_code", "files_in"], "egress": "allowlist",
                         "egress_allow": ["example.com:443"], "isolation_scope": "call",
                         "limits": {"timeout_s": 5, "memory_mb": 256}, "idle_timeout_s": 60},
                "key": {"scope": "tenant", "thread_id": "t1", "call_id": "c1"}
            })),
            &host,
        )
        .unwrap();
        assert_eq!(p.spec.egress(), Egress::Allowlist);
        assert!(p.spec.requires().contains(&Capability::FilesIn));
        assert_eq!(p.idle, Duration::from_secs(60));
        assert_eq!(p.key.unwrap().call_id(), Some("c1"));
        let e = parse_create(
            Some(json!({"spec": {"requires": [], "surprise": 1}})),
            &host,
        )
        .unwrap_err();
        assert!(e.contains("surprise"), "{e}");
        let e = parse_create(Some(json!({"spec": {"requires": ["teleport"]}})), &host).unwrap_err();
        assert!(e.contains("teleport"), "{e}");
        let e = parse_create(Some(json!({"spec": {"idle_timeout_s": -1}})), &host).unwrap_err();
        assert!(e.contains("idle_timeout_s"), "{e}");
        assert!(parse_create(Some(json!([])), &host).is_err());
    }

    #[test]
    fn a_declared_output_name_that_could_never_land_is_refused_at_create() {
        let host = HostPolicy::default();
        for name in ["../../etc", "a\u{1}b", ""] {
            let e = parse_create(
                Some(json!({"spec": {"declared_outputs": [
                    {"path": "out.txt", "name": name, "media_type": "text/plain"}]}})),
                &host,
            )
            .unwrap_err();
            assert!(e.contains("declared_outputs"), "{name:?}: {e}");
        }
        parse_create(
            Some(json!({"spec": {"declared_outputs": [
                {"path": "out.txt", "name": "report.txt", "media_type": "text/plain"}]}})),
            &host,
        )
        .unwrap();
    }

    #[test]
    fn unnamed_transfer_limits_are_lowered_to_the_host_ceilings() {
        let host = HostPolicy {
            files_in_ceiling: Some(TransferLimits {
                max_files: 8,
                ..TransferLimits::DEFAULT
            }),
            ..HostPolicy::default()
        };
        let p = parse_create(Some(json!({"spec": {}})), &host).unwrap();
        assert_eq!(p.spec.files_in().max_files, 8);
        assert_eq!(*p.spec.files_out(), TransferLimits::DEFAULT);
    }

    #[test]
    fn every_sandbox_method_but_lifecycle_names_its_capability() {
        assert_eq!(needs("files.read"), Some(Capability::FilesOut));
        assert_eq!(needs("files.remove"), Some(Capability::FilesDelete));
        assert_eq!(needs("sandbox.dispose"), None);
    }
}
