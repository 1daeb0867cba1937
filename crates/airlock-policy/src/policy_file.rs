//! `policy.toml`: the host policy the CLI and the server read.
//!
//! Parsing is strict: an unknown key, a wrong type or an out-of-range value is an error that
//! names the key and the value. The text is bounded before it is parsed, then deserialized
//! with serde into the sections' structs (`deny_unknown_fields`), whose fields are checked as
//! they are read (`checked`); the tables below the top one are `policy_sections` and
//! `tenant_quota`.

use std::str::FromStr;

use serde::Deserialize;
use toml::Value;

use crate::capability::Capability;
use crate::checked::{section, take, Checked, Fault, Field, FromValue, Word, WordSet};
use crate::decide::HostPolicy;
pub use crate::file_error::{PolicyFileError, MAX_POLICY_BYTES};
use crate::identity::Identity;
use crate::isolation::Isolation;
use crate::policy_sections::Limits;
pub use crate::policy_sections::ServerLimits;
use crate::reclaim::FailedReclaimPolicy;
use crate::restricted::RestrictedProfile;
pub use crate::run_limits::RunLimits;
use crate::scope::IsolationScope;
use crate::tenant_quota::Tenants;

/// Everything `policy.toml` configures.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// Floors, denials and transfer ceilings for the router.
    pub host: HostPolicy,
    /// Per-run limits for the broker.
    pub limits: RunLimits,
    /// What to do with a sandbox whose per-call cleanup failed.
    pub failed_reclaim: FailedReclaimPolicy,
    /// Server-wide ceilings (`[server]`).
    pub server: ServerLimits,
    /// The restricted language profile sandboxes opt into (`[restricted_profile]`).
    pub restricted: RestrictedProfile,
    /// Per-tenant quotas (`[tenants.NAME]`); a tenant with no section has the server's limits.
    pub tenants: std::collections::BTreeMap<String, crate::tenant_quota::TenantQuota>,
}

impl Policy {
    /// Parses `policy.toml` text.
    pub fn from_toml_str(text: &str) -> Result<Policy, PolicyFileError> {
        if text.len() > MAX_POLICY_BYTES {
            return Err(PolicyFileError::TooLarge { len: text.len() });
        }
        let Checked(policy) =
            toml::from_str::<Checked<Policy>>(text).map_err(|e| PolicyFileError::Syntax {
                message: e.message().to_owned(),
            })?;
        policy.map_err(Fault::into_error)
    }
}

impl FromStr for Policy {
    type Err = PolicyFileError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Policy::from_toml_str(s)
    }
}

/// The file's top table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyDoc {
    floor: Field<Word<Isolation>>,
    min_isolation_scope: Field<Word<IsolationScope>>,
    denied_capabilities: Field<WordSet<Capability>>,
    denied_identities: Field<WordSet<Identity>>,
    failed_reclaim: Field<Word<FailedReclaimPolicy>>,
    limits: Field<Limits>,
    server: Field<ServerLimits>,
    restricted_profile: Field<RestrictedProfile>,
    tenants: Field<Tenants>,
}

const TOP_KEYS: &[&str] = &[
    "floor",
    "min_isolation_scope",
    "denied_capabilities",
    "denied_identities",
    "failed_reclaim",
    "limits",
    "server",
    "restricted_profile",
    "tenants",
];

impl FromValue for Policy {
    fn from_value(v: &Value) -> Result<Self, Fault> {
        let doc: PolicyDoc = section(v, TOP_KEYS)?;
        let mut policy = Policy::default();
        let host = &mut policy.host;
        if let Some(Word(floor)) = take(doc.floor, "floor")? {
            host.min_isolation = floor;
        }
        if let Some(Word(scope)) = take(doc.min_isolation_scope, "min_isolation_scope")? {
            host.min_isolation_scope = scope;
        }
        if let Some(WordSet(denied)) = take(doc.denied_capabilities, "denied_capabilities")? {
            host.denied_capabilities = denied;
        }
        if let Some(WordSet(denied)) = take(doc.denied_identities, "denied_identities")? {
            host.denied_identities = denied;
        }
        if let Some(Word(reclaim)) = take(doc.failed_reclaim, "failed_reclaim")? {
            policy.failed_reclaim = reclaim;
        }
        if let Some(limits) = take(doc.limits, "limits")? {
            policy.limits = limits.run;
            policy.host.files_in_ceiling = limits.files_in;
            policy.host.files_out_ceiling = limits.files_out;
        }
        policy.server = take(doc.server, "server")?.unwrap_or_default();
        policy.restricted = take(doc.restricted_profile, "restricted_profile")?.unwrap_or_default();
        policy.tenants = take(doc.tenants, "tenants")?
            .map(|t| t.0)
            .unwrap_or_default();
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_table_lists_the_keys_serde_takes() {
        crate::checked::assert_keys::<PolicyDoc>(TOP_KEYS);
    }
}
