//! policy.toml: good and bad cases, each bad one naming key and value.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns; clippy.toml allows unwrap in tests"
)]

use std::collections::BTreeSet;

use airlock_policy::{
    Capability, FailedReclaimPolicy, Identity, Isolation, IsolationScope, Policy, PolicyFileError,
    RunLimits, ServerLimits, TransferLimits, MAX_POLICY_BYTES,
};

const FULL: &str = r#"
floor = "container"
min_isolation_scope = "call"
denied_capabilities = ["host_tools", "snapshot"]
denied_identities = ["user"]
failed_reclaim = "keep"

[limits]
timeout_seconds = 60
memory_mb = 1024
max_tool_calls = 16
max_output_bytes = 65536
disk_mb = 256

[limits.files_in]
max_bytes_per_file = 1048576
max_total_bytes = 4194304
max_files = 8

[limits.files_out]
max_files = 2

[server]
max_sandboxes = 8
max_concurrent_runs = 3
"#;

#[test]
fn empty_file_is_the_production_posture() {
    let p = Policy::from_toml_str("").unwrap();
    assert_eq!(p.host.min_isolation, Isolation::Microvm);
    assert_eq!(p.host.min_isolation_scope, IsolationScope::Conversation);
    assert!(p.host.denied_capabilities.is_empty());
    assert_eq!(p.limits, RunLimits::DEFAULT);
    assert_eq!(p.failed_reclaim, FailedReclaimPolicy::Dispose);
    assert_eq!(p.host.files_in_ceiling, None);
}

#[test]
fn full_file_parses_every_key() {
    let p: Policy = FULL.parse().unwrap();
    assert_eq!(p.host.min_isolation, Isolation::Container);
    assert_eq!(p.host.min_isolation_scope, IsolationScope::Call);
    assert_eq!(
        p.host.denied_capabilities,
        BTreeSet::from([Capability::HostTools, Capability::Snapshot])
    );
    assert_eq!(p.host.denied_identities, BTreeSet::from([Identity::User]));
    assert_eq!(p.failed_reclaim, FailedReclaimPolicy::Keep);
    assert_eq!(
        p.server,
        ServerLimits {
            max_sandboxes: 8,
            max_concurrent_runs: Some(3)
        }
    );
    assert_eq!(
        p.limits,
        RunLimits {
            timeout_seconds: 60,
            memory_mb: 1024,
            max_tool_calls: 16,
            max_output_bytes: 65536,
            disk_mb: 256
        }
    );
    assert_eq!(
        p.host.files_in_ceiling,
        Some(TransferLimits {
            max_bytes_per_file: 1_048_576,
            max_total_bytes: 4_194_304,
            max_files: 8
        })
    );
    assert_eq!(
        p.host.files_out_ceiling,
        Some(TransferLimits {
            max_files: 2,
            ..TransferLimits::DEFAULT
        })
    );
}

fn err(text: &str) -> PolicyFileError {
    match Policy::from_toml_str(text) {
        Ok(p) => panic!("{text:?} parsed to {p:?}"),
        Err(e) => e,
    }
}

fn assert_names(e: &PolicyFileError, key: &str, value: &str) {
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("`{key}`")),
        "{msg:?} should name key {key}"
    );
    assert!(msg.contains(value), "{msg:?} should quote value {value}");
}

#[test]
fn legacy_process_floor_is_refused_with_key_and_value() {
    let e = err(r#"floor = "process""#);
    assert!(
        matches!(e, PolicyFileError::InvalidValue { ref key, .. } if key == "floor"),
        "{e:?}"
    );
    assert_names(&e, "floor", "\"process\"");
}

#[test]
fn unknown_rung_is_refused() {
    assert_names(&err(r#"floor = "gvisor""#), "floor", "\"gvisor\"");
}

#[test]
fn wrong_types_name_the_key() {
    let e = err("floor = 3");
    assert!(matches!(e, PolicyFileError::WrongType { .. }));
    assert_names(&e, "floor", "3");
    assert_names(
        &err(r#"denied_capabilities = "exec""#),
        "denied_capabilities",
        "\"exec\"",
    );
    assert_names(
        &err("[limits]\ntimeout_seconds = \"30\""),
        "limits.timeout_seconds",
        "\"30\"",
    );
    assert_names(&err("limits = 5"), "limits", "5");
}

#[test]
fn bad_array_members_name_their_index() {
    let e = err(r#"denied_capabilities = ["exec", "network"]"#);
    assert_names(&e, "denied_capabilities[1]", "\"network\"");
    let e = err(r#"denied_identities = ["user", "user"]"#);
    assert_names(&e, "denied_identities[1]", "\"user\"");
    assert!(e.to_string().contains("twice"));
}

#[test]
fn out_of_range_limits_are_refused() {
    for (text, key, value) in [
        (
            "[limits]\ntimeout_seconds = 0",
            "limits.timeout_seconds",
            "0",
        ),
        (
            "[limits]\ntimeout_seconds = -5",
            "limits.timeout_seconds",
            "-5",
        ),
        ("[limits]\nmemory_mb = 8", "limits.memory_mb", "8"),
        ("[limits]\ndisk_mb = 0", "limits.disk_mb", "0"),
        ("[server]\nmax_sandboxes = 0", "server.max_sandboxes", "0"),
        (
            "[server]\nmax_concurrent_runs = 5000",
            "server.max_concurrent_runs",
            "5000",
        ),
        (
            "[limits]\nmax_output_bytes = 99999999999",
            "limits.max_output_bytes",
            "99999999999",
        ),
        (
            "[limits.files_out]\nmax_files = 0",
            "limits.files_out.max_files",
            "0",
        ),
    ] {
        let e = err(text);
        assert!(
            matches!(e, PolicyFileError::InvalidValue { .. }),
            "{text}: {e:?}"
        );
        assert_names(&e, key, value);
    }
}

#[test]
fn per_file_above_total_is_refused() {
    let e = err("[limits.files_in]\nmax_bytes_per_file = 100\nmax_total_bytes = 10");
    assert_names(&e, "limits.files_in.max_bytes_per_file", "100");
}

#[test]
fn unknown_keys_are_refused_at_every_level() {
    for (text, key) in [
        ("min_isolation = \"vm\"", "min_isolation"),
        ("[limits]\ntimeout = 3", "limits.timeout"),
        (
            "[limits.files_in]\nmax_size = 3",
            "limits.files_in.max_size",
        ),
    ] {
        let e = err(text);
        assert!(
            matches!(e, PolicyFileError::UnknownKey { key: ref k, .. } if k == key),
            "{e:?}"
        );
    }
}

#[test]
fn syntax_errors_and_oversize_text() {
    assert!(matches!(err("floor = "), PolicyFileError::Syntax { .. }));
    let big = format!("# {}", "x".repeat(MAX_POLICY_BYTES));
    assert!(matches!(err(&big), PolicyFileError::TooLarge { .. }));
}

#[test]
fn the_restricted_profile_is_configurable_and_checked() {
    let p = Policy::from_toml_str("").unwrap();
    assert_eq!(p.restricted, airlock_policy::RestrictedProfile::default());
    let p = Policy::from_toml_str(
        "[restricted_profile]\nbuiltins = [\"print\", \"len\"]\nblocked_imports = [\"json\", \"os.path\"]\n",
    )
    .unwrap();
    let set = |xs: &[&str]| xs.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
    assert_eq!(p.restricted.builtins, set(&["len", "print"]));
    assert_eq!(p.restricted.blocked_imports, set(&["json", "os.path"]));
    let e = err("[restricted_profile]\nbuiltins = [\"os.path\"]\n");
    assert!(e.to_string().contains("restricted_profile.builtins"), "{e}");
    let e = err("[restricted_profile]\nblocked_imports = [\"a-b\"]\n");
    assert!(e.to_string().contains("not a Python name"), "{e}");
    let e = err("[restricted_profile]\nallowed = []\n");
    assert!(e.to_string().contains("restricted_profile.allowed"), "{e}");
    let e = err("[restricted_profile]\nbuiltins = \"print\"\n");
    assert!(e.to_string().contains("an array of strings"), "{e}");
}
