//! `policy.toml`: the host policy the CLI and the server read.
//!
//! Parsing is strict: an unknown key, a wrong type or an out-of-range value is an error that
//! names the key and the value. The text is bounded before it is parsed.

use std::collections::BTreeSet;
use std::str::FromStr;

use toml::{Table, Value};

use crate::decide::HostPolicy;
use crate::isolation::Isolation;
use crate::limits::TransferLimits;
use crate::reclaim::FailedReclaimPolicy;
pub use crate::run_limits::RunLimits;
use crate::scope::IsolationScope;
use crate::toml_fields::{as_table, known, set_int};
pub use crate::toml_fields::{PolicyFileError, MAX_POLICY_BYTES};

/// Server-wide ceilings for `airlock serve` (the server serves one token, so per token and per
/// server are the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Live sandboxes held at once (1..=10000); one more is refused `over_capacity`.
    pub max_sandboxes: u64,
    /// Runs executing at once (1..=4096); `None` is two per core. A session run over it is
    /// refused `over_capacity`, never queued.
    pub max_concurrent_runs: Option<u64>,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_sandboxes: 64,
            max_concurrent_runs: None,
        }
    }
}

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
    pub restricted: crate::restricted::RestrictedProfile,
    /// Per-tenant quotas (`[tenants.NAME]`); a tenant with no section has the server's limits.
    pub tenants: std::collections::BTreeMap<String, crate::tenant_quota::TenantQuota>,
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
const RESTRICTED_KEYS: &[&str] = &["builtins", "blocked_imports"];
const SERVER_KEYS: &[&str] = &["max_sandboxes", "max_concurrent_runs"];
const LIMIT_KEYS: &[&str] = &[
    "timeout_seconds",
    "memory_mb",
    "max_tool_calls",
    "max_output_bytes",
    "disk_mb",
    "files_in",
    "files_out",
];
const TRANSFER_KEYS: &[&str] = &["max_bytes_per_file", "max_total_bytes", "max_files"];

impl Policy {
    /// Parses `policy.toml` text.
    pub fn from_toml_str(text: &str) -> Result<Policy, PolicyFileError> {
        if text.len() > MAX_POLICY_BYTES {
            return Err(PolicyFileError::TooLarge { len: text.len() });
        }
        let table: Table = text
            .parse()
            .map_err(|e: toml::de::Error| PolicyFileError::Syntax {
                message: e.message().to_owned(),
            })?;
        let mut policy = Policy::default();
        known(&table, "", TOP_KEYS)?;
        if let Some(v) = table.get("floor") {
            policy.host.min_isolation = vocab::<Isolation>("floor", v)?;
        }
        if let Some(v) = table.get("min_isolation_scope") {
            policy.host.min_isolation_scope = vocab::<IsolationScope>("min_isolation_scope", v)?;
        }
        if let Some(v) = table.get("denied_capabilities") {
            policy.host.denied_capabilities = vocab_set("denied_capabilities", v)?;
        }
        if let Some(v) = table.get("denied_identities") {
            policy.host.denied_identities = vocab_set("denied_identities", v)?;
        }
        if let Some(v) = table.get("failed_reclaim") {
            policy.failed_reclaim = vocab::<FailedReclaimPolicy>("failed_reclaim", v)?;
        }
        if let Some(v) = table.get("limits") {
            let limits = as_table("limits", v)?;
            known(limits, "limits.", LIMIT_KEYS)?;
            let l = &mut policy.limits;
            set_int(
                limits,
                "limits",
                "timeout_seconds",
                1,
                86_400,
                &mut l.timeout_seconds,
            )?;
            set_int(
                limits,
                "limits",
                "memory_mb",
                16,
                1_048_576,
                &mut l.memory_mb,
            )?;
            set_int(
                limits,
                "limits",
                "max_tool_calls",
                0,
                100_000,
                &mut l.max_tool_calls,
            )?;
            set_int(
                limits,
                "limits",
                "max_output_bytes",
                1,
                16 * 1024 * 1024,
                &mut l.max_output_bytes,
            )?;
            set_int(limits, "limits", "disk_mb", 1, 1_048_576, &mut l.disk_mb)?;
            if let Some(v) = limits.get("files_in") {
                policy.host.files_in_ceiling = Some(transfer("limits.files_in", v)?);
            }
            if let Some(v) = limits.get("files_out") {
                policy.host.files_out_ceiling = Some(transfer("limits.files_out", v)?);
            }
        }
        if let Some(v) = table.get("server") {
            let server = as_table("server", v)?;
            known(server, "server.", SERVER_KEYS)?;
            let sv = &mut policy.server;
            set_int(
                server,
                "server",
                "max_sandboxes",
                1,
                10_000,
                &mut sv.max_sandboxes,
            )?;
            if server.contains_key("max_concurrent_runs") {
                let mut n = 0;
                set_int(server, "server", "max_concurrent_runs", 1, 4096, &mut n)?;
                sv.max_concurrent_runs = Some(n);
            }
        }
        if let Some(v) = table.get("restricted_profile") {
            let t = as_table("restricted_profile", v)?;
            known(t, "restricted_profile.", RESTRICTED_KEYS)?;
            let p = &mut policy.restricted;
            if let Some(v) = t.get("builtins") {
                p.builtins = names("restricted_profile.builtins", v, false)?;
            }
            if let Some(v) = t.get("blocked_imports") {
                p.blocked_imports = names("restricted_profile.blocked_imports", v, true)?;
            }
        }
        if let Some(v) = table.get("tenants") {
            policy.tenants = crate::tenant_quota::parse_tenants(v)?;
        }
        Ok(policy)
    }
}

/// A list of Python names (dotted module names when `dotted`), at most 1024.
fn names(key: &str, v: &Value, dotted: bool) -> Result<BTreeSet<String>, PolicyFileError> {
    let wrong = || PolicyFileError::WrongType {
        key: key.to_owned(),
        value: v.to_string(),
        expected: "an array of strings",
    };
    let items = v.as_array().ok_or_else(wrong)?;
    if items.len() > 1024 {
        return Err(PolicyFileError::InvalidValue {
            key: key.to_owned(),
            value: format!("[{} items]", items.len()),
            reason: "at most 1024 names".into(),
        });
    }
    let mut out = BTreeSet::new();
    for item in items {
        let name = item.as_str().ok_or_else(wrong)?;
        if !crate::restricted::valid_name(name, dotted) {
            return Err(PolicyFileError::InvalidValue {
                key: key.to_owned(),
                value: item.to_string(),
                reason: "not a Python name".into(),
            });
        }
        out.insert(name.to_owned());
    }
    Ok(out)
}

impl FromStr for Policy {
    type Err = PolicyFileError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Policy::from_toml_str(s)
    }
}

fn vocab<T>(key: &str, v: &Value) -> Result<T, PolicyFileError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    let s = v.as_str().ok_or_else(|| PolicyFileError::WrongType {
        key: key.to_owned(),
        value: v.to_string(),
        expected: "a string",
    })?;
    s.parse()
        .map_err(|e: T::Err| PolicyFileError::InvalidValue {
            key: key.to_owned(),
            value: v.to_string(),
            reason: e.to_string(),
        })
}

fn vocab_set<T>(key: &str, v: &Value) -> Result<BTreeSet<T>, PolicyFileError>
where
    T: FromStr + Ord,
    T::Err: std::fmt::Display,
{
    let items = v.as_array().ok_or_else(|| PolicyFileError::WrongType {
        key: key.to_owned(),
        value: v.to_string(),
        expected: "an array of strings",
    })?;
    let mut out = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        let parsed = vocab::<T>(&format!("{key}[{i}]"), item)?;
        if !out.insert(parsed) {
            return Err(PolicyFileError::InvalidValue {
                key: format!("{key}[{i}]"),
                value: item.to_string(),
                reason: "listed twice".to_owned(),
            });
        }
    }
    Ok(out)
}

fn transfer(key: &str, v: &Value) -> Result<TransferLimits, PolicyFileError> {
    let t = as_table(key, v)?;
    let prefix = format!("{key}.");
    known(t, &prefix, TRANSFER_KEYS)?;
    let mut limits = TransferLimits::DEFAULT;
    set_int(
        t,
        key,
        "max_bytes_per_file",
        1,
        u64::MAX,
        &mut limits.max_bytes_per_file,
    )?;
    set_int(
        t,
        key,
        "max_total_bytes",
        1,
        u64::MAX,
        &mut limits.max_total_bytes,
    )?;
    set_int(t, key, "max_files", 1, u64::MAX, &mut limits.max_files)?;
    if limits.max_bytes_per_file > limits.max_total_bytes {
        return Err(PolicyFileError::InvalidValue {
            key: format!("{key}.max_bytes_per_file"),
            value: limits.max_bytes_per_file.to_string(),
            reason: format!(
                "must not exceed {key}.max_total_bytes ({})",
                limits.max_total_bytes
            ),
        });
    }
    Ok(limits)
}
