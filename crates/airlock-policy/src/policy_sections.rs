//! `policy.toml`'s `[limits]` (with `[limits.files_in]`, `[limits.files_out]`), `[server]` and
//! `[restricted_profile]`: each a serde struct of checked fields, read into its typed value.
//! An absent key keeps the default.

use std::collections::BTreeSet;

use serde::Deserialize;
use toml::Value;

use crate::checked::{section, take, take_int, Bounded, Fault, Field, FromValue};
use crate::limits::TransferLimits;
use crate::restricted::{valid_name, RestrictedProfile};
use crate::run_limits::RunLimits;

/// `[limits]`: the run limits and the host's transfer ceilings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) run: RunLimits,
    pub(crate) files_in: Option<TransferLimits>,
    pub(crate) files_out: Option<TransferLimits>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsDoc {
    timeout_seconds: Field<Bounded<1, 86_400>>,
    memory_mb: Field<Bounded<16, 1_048_576>>,
    max_tool_calls: Field<Bounded<0, 100_000>>,
    max_output_bytes: Field<Bounded<1, { 16 * 1024 * 1024 }>>,
    disk_mb: Field<Bounded<1, 1_048_576>>,
    files_in: Field<TransferLimits>,
    files_out: Field<TransferLimits>,
}

const LIMIT_KEYS: &[&str] = &[
    "timeout_seconds",
    "memory_mb",
    "max_tool_calls",
    "max_output_bytes",
    "disk_mb",
    "files_in",
    "files_out",
];

/// Sets `slot` to the field's value when it has one.
fn set<const MIN: u64, const MAX: u64>(
    slot: &mut u64,
    field: Field<Bounded<MIN, MAX>>,
    name: &str,
) -> Result<(), Fault> {
    if let Some(Bounded(n)) = take(field, name)? {
        *slot = n;
    }
    Ok(())
}

impl FromValue for Limits {
    fn from_value(v: &Value) -> Result<Self, Fault> {
        let doc: LimitsDoc = section(v, LIMIT_KEYS)?;
        let mut run = RunLimits::DEFAULT;
        set(
            &mut run.timeout_seconds,
            doc.timeout_seconds,
            "timeout_seconds",
        )?;
        set(&mut run.memory_mb, doc.memory_mb, "memory_mb")?;
        set(
            &mut run.max_tool_calls,
            doc.max_tool_calls,
            "max_tool_calls",
        )?;
        set(
            &mut run.max_output_bytes,
            doc.max_output_bytes,
            "max_output_bytes",
        )?;
        set(&mut run.disk_mb, doc.disk_mb, "disk_mb")?;
        Ok(Limits {
            run,
            files_in: take(doc.files_in, "files_in")?,
            files_out: take(doc.files_out, "files_out")?,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TransferDoc {
    max_bytes_per_file: Field<Bounded<1, { u64::MAX }>>,
    max_total_bytes: Field<Bounded<1, { u64::MAX }>>,
    max_files: Field<Bounded<1, { u64::MAX }>>,
}

const TRANSFER_KEYS: &[&str] = &["max_bytes_per_file", "max_total_bytes", "max_files"];

/// `[limits.files_in]`, `[limits.files_out]`: the defaults where a key is absent, one file
/// no larger than the whole.
impl FromValue for TransferLimits {
    fn from_value(v: &Value) -> Result<Self, Fault> {
        let doc: TransferDoc = section(v, TRANSFER_KEYS)?;
        let mut t = TransferLimits::DEFAULT;
        set(
            &mut t.max_bytes_per_file,
            doc.max_bytes_per_file,
            "max_bytes_per_file",
        )?;
        set(
            &mut t.max_total_bytes,
            doc.max_total_bytes,
            "max_total_bytes",
        )?;
        set(&mut t.max_files, doc.max_files, "max_files")?;
        if t.max_bytes_per_file > t.max_total_bytes {
            let f = Fault::exceeds(t.max_bytes_per_file, "max_total_bytes", t.max_total_bytes);
            return Err(f.below(".max_bytes_per_file"));
        }
        Ok(t)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerDoc {
    max_sandboxes: Field<Bounded<1, 10_000>>,
    max_concurrent_runs: Field<Bounded<1, 4096>>,
}

const SERVER_KEYS: &[&str] = &["max_sandboxes", "max_concurrent_runs"];

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

/// `[server]`.
impl FromValue for ServerLimits {
    fn from_value(v: &Value) -> Result<Self, Fault> {
        let doc: ServerDoc = section(v, SERVER_KEYS)?;
        let mut limits = ServerLimits::default();
        set(
            &mut limits.max_sandboxes,
            doc.max_sandboxes,
            "max_sandboxes",
        )?;
        limits.max_concurrent_runs = take_int(doc.max_concurrent_runs, "max_concurrent_runs")?;
        Ok(limits)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RestrictedDoc {
    builtins: Field<Names<false>>,
    blocked_imports: Field<Names<true>>,
}

const RESTRICTED_KEYS: &[&str] = &["builtins", "blocked_imports"];

/// `[restricted_profile]`: a list given replaces the default one.
impl FromValue for RestrictedProfile {
    fn from_value(v: &Value) -> Result<Self, Fault> {
        let doc: RestrictedDoc = section(v, RESTRICTED_KEYS)?;
        let mut profile = RestrictedProfile::default();
        if let Some(Names(names)) = take(doc.builtins, "builtins")? {
            profile.builtins = names;
        }
        if let Some(Names(names)) = take(doc.blocked_imports, "blocked_imports")? {
            profile.blocked_imports = names;
        }
        Ok(profile)
    }
}

/// A list of Python names (dotted module names when `DOTTED`), at most 1024.
struct Names<const DOTTED: bool>(BTreeSet<String>);

impl<const DOTTED: bool> FromValue for Names<DOTTED> {
    fn from_value(v: &Value) -> Result<Self, Fault> {
        let wrong = || Fault::wrong_type(v, "an array of strings");
        let items = v.as_array().ok_or_else(wrong)?;
        if items.len() > 1024 {
            return Err(Fault::invalid(
                format!("[{} items]", items.len()),
                "at most 1024 names",
            ));
        }
        let mut out = BTreeSet::new();
        for item in items {
            let name = item.as_str().ok_or_else(wrong)?;
            if !valid_name(name, DOTTED) {
                return Err(Fault::invalid(item.to_string(), "not a Python name"));
            }
            out.insert(name.to_owned());
        }
        Ok(Names(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checked::assert_keys;

    #[test]
    fn each_section_lists_the_keys_serde_takes() {
        assert_keys::<LimitsDoc>(LIMIT_KEYS);
        assert_keys::<TransferDoc>(TRANSFER_KEYS);
        assert_keys::<ServerDoc>(SERVER_KEYS);
        assert_keys::<RestrictedDoc>(RESTRICTED_KEYS);
    }
}
