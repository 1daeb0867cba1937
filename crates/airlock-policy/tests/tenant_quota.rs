//! policy.toml `[tenants.NAME]`: every quota parses, an absent one is the server's, and a bad
//! key, type or value is refused naming `tenants.NAME.key` and the value.

use std::collections::BTreeSet;

use airlock_policy::{Policy, PolicyFileError, TenantQuota};

fn err(text: &str) -> PolicyFileError {
    match Policy::from_toml_str(text) {
        Ok(p) => panic!("{text:?} parsed to {p:?}"),
        Err(e) => e,
    }
}

#[test]
fn every_tenant_quota_parses() {
    let p = Policy::from_toml_str(
        r#"
[tenants.team-a]
max_sandboxes = 2
max_concurrent_runs = 3
disk_mb = 512
memory_budget_mb = 2048
max_snapshots = 5
egress_allow = ["PyPI.org", "api.example.com:443"]

[tenants.team-b]
"#,
    )
    .unwrap();
    assert_eq!(
        p.tenants["team-a"],
        TenantQuota {
            max_sandboxes: Some(2),
            max_concurrent_runs: Some(3),
            disk_mb: Some(512),
            memory_budget_mb: Some(2048),
            max_snapshots: Some(5),
            egress_allow: Some(BTreeSet::from([
                "pypi.org".to_owned(),
                "api.example.com:443".to_owned()
            ])),
        }
    );
    // A section with no keys, and a tenant with no section: the server's limits.
    assert_eq!(p.tenants["team-b"], TenantQuota::default());
    assert!(!p.tenants.contains_key("team-c"));
    assert!(Policy::from_toml_str("").unwrap().tenants.is_empty());
}

#[test]
fn an_unknown_tenant_key_is_refused_naming_it() {
    let e = err("[tenants.a]\nmax_sandbox = 2");
    assert!(matches!(e, PolicyFileError::UnknownKey { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("`tenants.a.max_sandbox`"), "{msg}");
    assert!(
        msg.contains("max_sandboxes"),
        "the expected keys are listed: {msg}"
    );
}

#[test]
fn each_quota_out_of_range_or_of_the_wrong_type_is_refused_naming_key_and_value() {
    for (text, key, value) in [
        (
            "[tenants.a]\nmax_sandboxes = 0",
            "tenants.a.max_sandboxes",
            "0",
        ),
        (
            "[tenants.a]\nmax_sandboxes = 10001",
            "tenants.a.max_sandboxes",
            "10001",
        ),
        (
            "[tenants.a]\nmax_concurrent_runs = 0",
            "tenants.a.max_concurrent_runs",
            "0",
        ),
        ("[tenants.a]\ndisk_mb = -1", "tenants.a.disk_mb", "-1"),
        (
            "[tenants.a]\nmemory_budget_mb = 0",
            "tenants.a.memory_budget_mb",
            "0",
        ),
        (
            "[tenants.a]\nmax_snapshots = 0",
            "tenants.a.max_snapshots",
            "0",
        ),
        (
            "[tenants.a]\negress_allow = [\"a b\"]",
            "tenants.a.egress_allow[0]",
            "a b",
        ),
        ("[tenants.\"a b\"]\nmax_sandboxes = 1", "tenants.a b", "a b"),
    ] {
        let e = err(text);
        assert!(
            matches!(e, PolicyFileError::InvalidValue { .. }),
            "{text}: {e:?}"
        );
        let msg = e.to_string();
        assert!(msg.contains(&format!("`{key}`")), "{text}: {msg}");
        assert!(msg.contains(value), "{text}: {msg}");
    }
    for (text, key) in [
        (
            "[tenants.a]\nmax_sandboxes = \"2\"",
            "tenants.a.max_sandboxes",
        ),
        (
            "[tenants.a]\negress_allow = \"pypi.org\"",
            "tenants.a.egress_allow",
        ),
        ("tenants = 3", "tenants"),
        ("[tenants]\na = 3", "tenants.a"),
    ] {
        let e = err(text);
        assert!(
            matches!(e, PolicyFileError::WrongType { .. }),
            "{text}: {e:?}"
        );
        assert!(e.to_string().contains(&format!("`{key}`")), "{text}: {e}");
    }
}
