//! `[tenants.NAME]` in `policy.toml`: one tenant's quotas on a multi-tenant `airlock serve`.
//!
//! Each key is optional; an absent key (or a tenant with no section) is the server-wide limit.
//! Read as strictly as the rest of the file (serde structs of checked fields, see `checked`):
//! an unknown key, a wrong type or an out-of-range value is an error that names
//! `tenants.NAME.key` and the value.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use toml::Value;

use crate::checked::{
    from_table, section, take, take_int, Bounded, Checked, Fault, Field, FromValue,
};

/// Most `[tenants.*]` sections a policy may have.
pub const MAX_TENANTS: usize = 1024;
/// Most hosts in one tenant's egress ceiling (a spec's allowlist holds at most 64).
pub const MAX_EGRESS_CEILING: usize = 256;

const TENANT_KEYS: &[&str] = &[
    "max_sandboxes",
    "max_concurrent_runs",
    "disk_mb",
    "memory_budget_mb",
    "max_snapshots",
    "egress_allow",
    "max_requests_per_s",
];

/// One tenant's quotas; `None` is the server-wide limit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TenantQuota {
    /// Live sandboxes the tenant may hold at once.
    pub max_sandboxes: Option<u64>,
    /// Session runs of the tenant's sandboxes executing at once.
    pub max_concurrent_runs: Option<u64>,
    /// MiB: the sum of the disk bounds of the tenant's live sandboxes.
    pub disk_mb: Option<u64>,
    /// MiB: the tenant's share of the server's admission budget (disk + memory bounds).
    pub memory_budget_mb: Option<u64>,
    /// Snapshots the tenant may keep (`sandbox.snapshot`) and pauses it may hold at once.
    pub max_snapshots: Option<u64>,
    /// The hosts (`host[:port]`, `*.suffix[:port]`) the tenant's sandboxes may ever be allowed
    /// to reach; `None` sets no ceiling beyond the server's own rules.
    pub egress_allow: Option<BTreeSet<String>>,
    /// Requests per second the tenant's connections are read at, together (bursts of twice
    /// that); past it the server stops reading them until the rate allows.
    pub max_requests_per_s: Option<u64>,
}

/// Whether `name` may name a tenant, as a tenants file names them (`airlock token add`):
/// 1 to 64 of `a-z`, `0-9`, `-`, `_`, starting with a letter or digit.
#[must_use]
pub fn valid_tenant_name(name: &str) -> bool {
    let plain = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (1..=64).contains(&name.len())
        && name.bytes().next().is_some_and(plain)
        && name.bytes().all(|b| plain(b) || matches!(b, b'-' | b'_'))
}

/// `[tenants]`: every tenant's quotas, by name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tenants(pub(crate) BTreeMap<String, TenantQuota>);

impl FromValue for Tenants {
    fn from_value(v: &Value) -> Result<Self, Fault> {
        let table = v
            .as_table()
            .ok_or_else(|| Fault::wrong_type(v, "a table"))?;
        if table.len() > MAX_TENANTS {
            let value = format!("[{} tenants]", table.len());
            return Err(Fault::invalid(
                value,
                format!("at most {MAX_TENANTS} tenants"),
            ));
        }
        let sections: BTreeMap<String, Checked<TenantQuota>> =
            from_table(table).map_err(|message| Fault::invalid(v.to_string(), message))?;
        let mut out = BTreeMap::new();
        for (name, section) in sections {
            if !valid_tenant_name(&name) {
                return Err(
                    Fault::invalid(format!("{name:?}"), BAD_NAME).below(&format!(".{name}"))
                );
            }
            let quota = section.0.map_err(|f| f.below(&format!(".{name}")))?;
            out.insert(name, quota);
        }
        Ok(Tenants(out))
    }
}

const BAD_NAME: &str =
    "a tenant name is 1 to 64 of a-z, 0-9, '-', '_', starting with a letter or digit";

/// `[tenants.NAME]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TenantDoc {
    max_sandboxes: Field<Bounded<1, 10_000>>,
    max_concurrent_runs: Field<Bounded<1, 4096>>,
    disk_mb: Field<Bounded<1, { 1 << 30 }>>,
    memory_budget_mb: Field<Bounded<1, { 1 << 30 }>>,
    max_snapshots: Field<Bounded<1, 1_000_000>>,
    egress_allow: Field<Hosts>,
    max_requests_per_s: Field<Bounded<1, 1_000_000>>,
}

impl FromValue for TenantQuota {
    fn from_value(v: &Value) -> Result<Self, Fault> {
        let doc: TenantDoc = section(v, TENANT_KEYS)?;
        Ok(TenantQuota {
            max_sandboxes: take_int(doc.max_sandboxes, "max_sandboxes")?,
            max_concurrent_runs: take_int(doc.max_concurrent_runs, "max_concurrent_runs")?,
            disk_mb: take_int(doc.disk_mb, "disk_mb")?,
            memory_budget_mb: take_int(doc.memory_budget_mb, "memory_budget_mb")?,
            max_snapshots: take_int(doc.max_snapshots, "max_snapshots")?,
            egress_allow: take(doc.egress_allow, "egress_allow")?.map(|h| h.0),
            max_requests_per_s: take_int(doc.max_requests_per_s, "max_requests_per_s")?,
        })
    }
}

/// A list of `host[:port]` entries: lower-cased, no spaces or scheme, each at most 261 bytes.
struct Hosts(BTreeSet<String>);

impl FromValue for Hosts {
    fn from_value(v: &Value) -> Result<Self, Fault> {
        let wrong = || Fault::wrong_type(v, "an array of \"host[:port]\" strings");
        let items = v.as_array().ok_or_else(wrong)?;
        if items.len() > MAX_EGRESS_CEILING {
            return Err(Fault::invalid(
                format!("[{} hosts]", items.len()),
                format!("at most {MAX_EGRESS_CEILING} hosts"),
            ));
        }
        let mut out = BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            let host = item.as_str().ok_or_else(wrong)?;
            let plausible = !host.is_empty()
                && host.len() <= 261
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'*'));
            if !plausible {
                let f = Fault::invalid(item.to_string(), "not a host[:port]");
                return Err(f.below(&format!("[{i}]")));
            }
            out.insert(host.to_ascii_lowercase());
        }
        Ok(Hosts(out))
    }
}

/// Whether `asked` (a spec's `host[:port]` or `*.suffix[:port]`) is within `ceiling`: an
/// entry without a port covers every port of its host; `*.suffix` covers every name below
/// `suffix` (not `suffix` itself), the egress rules' own meaning.
#[must_use]
pub fn within_ceiling(asked: &str, ceiling: &BTreeSet<String>) -> bool {
    let asked = asked.to_ascii_lowercase();
    let (host, port) = split_port(&asked);
    ceiling.iter().any(|entry| {
        let (c_host, c_port) = split_port(entry);
        let port_ok = c_port.is_none() || c_port == port;
        let host_ok = match c_host.strip_prefix("*.") {
            None => c_host == host,
            Some(suffix) => {
                let below =
                    |h: &str| h.len() > suffix.len() + 1 && h.ends_with(&format!(".{suffix}"));
                match host.strip_prefix("*.") {
                    Some(asked_suffix) => asked_suffix == suffix || below(asked_suffix),
                    None => below(host),
                }
            }
        };
        port_ok && host_ok
    })
}

/// `host[:port]` split at a numeric port.
fn split_port(entry: &str) -> (&str, Option<&str>) {
    match entry.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            (host, Some(port))
        }
        _ => (entry, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ceiling_entry_without_a_port_allows_every_port_of_that_host_only() {
        let c = BTreeSet::from(["pypi.org".to_owned(), "api.example.com:443".to_owned()]);
        assert!(within_ceiling("pypi.org", &c));
        assert!(within_ceiling("PyPI.org:443", &c));
        assert!(within_ceiling("api.example.com:443", &c));
        assert!(!within_ceiling("api.example.com:80", &c));
        assert!(!within_ceiling("api.example.com", &c));
        assert!(!within_ceiling("evil.pypi.org", &c));
        assert!(!within_ceiling("*.pypi.org", &c));
    }

    #[test]
    fn a_wildcard_ceiling_covers_names_below_its_suffix_never_the_apex_or_a_lookalike() {
        let c = BTreeSet::from(["*.pythonhosted.org:443".to_owned()]);
        assert!(within_ceiling("files.pythonhosted.org:443", &c));
        assert!(within_ceiling("a.b.pythonhosted.org:443", &c));
        assert!(within_ceiling("*.pythonhosted.org:443", &c));
        assert!(within_ceiling("*.x.pythonhosted.org:443", &c));
        assert!(
            !within_ceiling("files.pythonhosted.org", &c),
            "any port is more"
        );
        assert!(!within_ceiling("files.pythonhosted.org:80", &c));
        assert!(!within_ceiling("pythonhosted.org:443", &c));
        assert!(!within_ceiling("evilpythonhosted.org:443", &c));
        assert!(!within_ceiling("*.org:443", &c));
    }

    #[test]
    fn a_tenant_section_lists_the_keys_serde_takes() {
        crate::checked::assert_keys::<TenantDoc>(TENANT_KEYS);
    }

    #[test]
    fn tenant_names_are_bounded_and_plain() {
        assert!(valid_tenant_name("team-a_prod1"));
        assert!(valid_tenant_name("default"));
        assert!(!valid_tenant_name(""));
        assert!(!valid_tenant_name("Team"));
        assert!(!valid_tenant_name("-a"));
        assert!(!valid_tenant_name("a.b"));
        assert!(!valid_tenant_name("a b"));
        assert!(!valid_tenant_name(&"x".repeat(65)));
    }
}
