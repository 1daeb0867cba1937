//! policy.toml's error messages, word for word: an unknown key in every table is refused
//! naming it, a wrong type names the field, a datetime is never taken for a string.

use airlock_policy::{Policy, PolicyFileError};

fn err(text: &str) -> PolicyFileError {
    match Policy::from_toml_str(text) {
        Ok(p) => panic!("{text:?} parsed to {p:?}"),
        Err(e) => e,
    }
}

#[test]
fn an_unknown_key_in_every_table_is_refused_naming_it() {
    for (text, key) in [
        ("floors = 1", "floors"),
        ("[limits]\ntimeout = 3", "limits.timeout"),
        (
            "[limits.files_in]\nmax_size = 3",
            "limits.files_in.max_size",
        ),
        ("[limits.files_out]\nfiles = 3", "limits.files_out.files"),
        ("[server]\nfoo = 1", "server.foo"),
        (
            "[restricted_profile]\nallowed = []",
            "restricted_profile.allowed",
        ),
        ("[tenants.a]\nmax_sandbox = 2", "tenants.a.max_sandbox"),
    ] {
        let e = err(text);
        assert!(
            matches!(e, PolicyFileError::UnknownKey { key: ref k, .. } if k == key),
            "{text}: {e:?}"
        );
    }
    assert_eq!(
        err("[limits]\ntimeout = 3").to_string(),
        "policy key `limits.timeout` is not recognised (expected one of: timeout_seconds, \
         memory_mb, max_tool_calls, max_output_bytes, disk_mb, files_in, files_out)"
    );
    assert_eq!(
        err("[server]\nfoo = 1").to_string(),
        "policy key `server.foo` is not recognised (expected one of: max_sandboxes, \
         max_concurrent_runs)"
    );
}

#[test]
fn an_unknown_key_is_named_before_a_bad_value_of_its_table() {
    let e = err("[limits]\ntimeout_seconds = 0\nzz = 1");
    assert!(
        matches!(e, PolicyFileError::UnknownKey { ref key, .. } if key == "limits.zz"),
        "{e:?}"
    );
}

#[test]
fn a_wrong_type_names_the_field_and_what_it_must_be() {
    for (text, message) in [
        ("floor = 3", "policy key `floor` = 3 must be a string"),
        (
            "min_isolation_scope = [\"call\"]",
            "policy key `min_isolation_scope` = [\"call\"] must be a string",
        ),
        (
            "denied_identities = [1]",
            "policy key `denied_identities[0]` = 1 must be a string",
        ),
        (
            "[limits]\nfiles_out = 2",
            "policy key `limits.files_out` = 2 must be a table",
        ),
        (
            "[server]\nmax_concurrent_runs = 1.5",
            "policy key `server.max_concurrent_runs` = 1.5 must be an integer",
        ),
        (
            "[restricted_profile]\nbuiltins = [\"print\", 3]",
            "policy key `restricted_profile.builtins` = [\"print\", 3] must be an array of strings",
        ),
        (
            "[tenants.a]\nmax_requests_per_s = true",
            "policy key `tenants.a.max_requests_per_s` = true must be an integer",
        ),
        (
            "[tenants.a]\negress_allow = [1]",
            "policy key `tenants.a.egress_allow` = [1] must be an array of \"host[:port]\" strings",
        ),
    ] {
        let e = err(text);
        assert!(
            matches!(e, PolicyFileError::WrongType { .. }),
            "{text}: {e:?}"
        );
        assert_eq!(e.to_string(), message, "{text}");
    }
}

#[test]
fn a_bad_value_keeps_its_message() {
    for (text, message) in [
        (
            "denied_identities = [\"user\", \"user\"]",
            "policy key `denied_identities[1]` = \"user\" is invalid: listed twice",
        ),
        (
            "[limits.files_in]\nmax_bytes_per_file = 100\nmax_total_bytes = 10",
            "policy key `limits.files_in.max_bytes_per_file` = 100 is invalid: must not exceed \
             limits.files_in.max_total_bytes (10)",
        ),
        (
            "[tenants.a]\negress_allow = [\"a b\"]",
            "policy key `tenants.a.egress_allow[0]` = \"a b\" is invalid: not a host[:port]",
        ),
        (
            "[tenants.\"a b\"]\nmax_sandboxes = 1",
            "policy key `tenants.a b` = \"a b\" is invalid: a tenant name is 1 to 64 of a-z, \
             0-9, '-', '_', starting with a letter or digit",
        ),
    ] {
        let e = err(text);
        assert!(
            matches!(e, PolicyFileError::InvalidValue { .. }),
            "{text}: {e:?}"
        );
        assert_eq!(e.to_string(), message, "{text}");
    }
}

#[test]
fn a_datetime_is_never_taken_for_a_string() {
    for (text, key) in [
        ("floor = 1979-05-27", "floor"),
        ("denied_capabilities = [07:32:00]", "denied_capabilities[0]"),
        (
            "[tenants.a]\negress_allow = [1979-05-27T07:32:00Z]",
            "tenants.a.egress_allow",
        ),
        (
            "[restricted_profile]\nbuiltins = [1979-05-27]",
            "restricted_profile.builtins",
        ),
    ] {
        let e = err(text);
        assert!(
            matches!(e, PolicyFileError::WrongType { key: ref k, .. } if k == key),
            "{text}: {e:?}"
        );
    }
}
