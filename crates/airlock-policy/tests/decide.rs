//! One test per refusal, per silence rule, and for the check order.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns; clippy.toml allows unwrap in tests"
)]

use std::collections::BTreeSet;

use airlock_policy::{
    decide, BackendDeclarations, BackendProfile, Capability, CeilingOwner, Direction, Egress,
    HostPolicy, Identity, Isolation, IsolationScope, OsFamily, Refusal, SandboxLimits, SandboxSpec,
    TransferField, TransferLimits,
};

fn permissive() -> BackendDeclarations {
    BackendDeclarations::silent()
        .with_capabilities(Capability::ALL.iter().copied())
        .with_egress_modes([Egress::Closed, Egress::Allowlist])
        .with_os_families([OsFamily::Posix])
        .with_isolation_scopes([IsolationScope::Conversation, IsolationScope::Call])
}

fn host() -> HostPolicy {
    HostPolicy {
        min_isolation: Isolation::None,
        ..HostPolicy::default()
    }
}

fn run(
    host: &HostPolicy,
    iso: Isolation,
    decl: &BackendDeclarations,
    spec: &SandboxSpec,
) -> Result<airlock_policy::Decision, Refusal> {
    decide(
        host,
        BackendProfile {
            name: "b",
            isolation: iso,
            declarations: decl,
        },
        spec,
    )
}

fn spec() -> airlock_policy::SandboxSpecBuilder {
    SandboxSpec::builder("k")
}

#[test]
fn a_permissive_backend_serves_the_default_spec() {
    let d = run(
        &host(),
        Isolation::None,
        &permissive(),
        &spec().build().unwrap(),
    )
    .unwrap();
    assert_eq!(d.floor, Isolation::None);
    assert_eq!(d.scope, IsolationScope::Conversation);
}

#[test]
fn default_floor_is_microvm_and_refuses_a_container() {
    let err = run(
        &HostPolicy::default(),
        Isolation::Container,
        &permissive(),
        &spec().build().unwrap(),
    )
    .unwrap_err();
    assert_eq!(
        err,
        Refusal::BackendNotPermitted {
            backend: "b".into(),
            isolation: Isolation::Container,
            floor: Isolation::Microvm
        }
    );
    assert!(run(
        &HostPolicy::default(),
        Isolation::Microvm,
        &permissive(),
        &spec().build().unwrap()
    )
    .is_ok());
}

#[test]
fn spec_may_raise_the_floor_never_lower_it() {
    let raised = spec().min_isolation(Isolation::Vm).build().unwrap();
    let err = run(&host(), Isolation::Microvm, &permissive(), &raised).unwrap_err();
    assert!(matches!(
        err,
        Refusal::BackendNotPermitted {
            floor: Isolation::Vm,
            ..
        }
    ));

    let lowered = spec().min_isolation(Isolation::None).build().unwrap();
    let err = run(
        &HostPolicy::default(),
        Isolation::Container,
        &permissive(),
        &lowered,
    )
    .unwrap_err();
    assert!(matches!(
        err,
        Refusal::BackendNotPermitted {
            floor: Isolation::Microvm,
            ..
        }
    ));
}

#[test]
fn capability_denied_by_host() {
    let h = HostPolicy {
        denied_capabilities: BTreeSet::from([Capability::HostTools]),
        ..host()
    };
    let s = spec().require(Capability::HostTools).build().unwrap();
    let err = run(&h, Isolation::None, &permissive(), &s).unwrap_err();
    assert_eq!(
        err,
        Refusal::CapabilityDenied {
            kind: "k".into(),
            denied: BTreeSet::from([Capability::HostTools])
        }
    );
}

#[test]
fn capability_not_supported_names_what_is_missing() {
    let decl = permissive().with_capabilities([Capability::Exec, Capability::FilesIn]);
    let s = spec()
        .require(Capability::FilesOut)
        .require(Capability::RunCode)
        .build()
        .unwrap();
    let err = run(&host(), Isolation::None, &decl, &s).unwrap_err();
    assert_eq!(
        err,
        Refusal::CapabilityNotSupported {
            backend: "b".into(),
            kind: "k".into(),
            missing: BTreeSet::from([Capability::FilesOut, Capability::RunCode])
        }
    );
}

#[test]
fn silent_capabilities_read_as_exec_and_files_in() {
    let mut decl = permissive();
    decl.capabilities = None;
    assert!(run(&host(), Isolation::None, &decl, &spec().build().unwrap()).is_ok());
    let s = spec().require(Capability::RunCode).build().unwrap();
    assert!(matches!(
        run(&host(), Isolation::None, &decl, &s),
        Err(Refusal::CapabilityNotSupported { .. })
    ));
}

#[test]
fn identity_denied_by_host() {
    let h = HostPolicy {
        denied_identities: BTreeSet::from([Identity::User]),
        ..host()
    };
    let s = spec()
        .identities([Identity::App, Identity::User])
        .build()
        .unwrap();
    let err = run(&h, Isolation::None, &permissive(), &s).unwrap_err();
    assert_eq!(
        err,
        Refusal::IdentityDenied {
            kind: "k".into(),
            denied: BTreeSet::from([Identity::User])
        }
    );
    let app_only = spec().identities([Identity::App]).build().unwrap();
    assert!(run(&h, Isolation::None, &permissive(), &app_only).is_ok());
}

#[test]
fn os_family_mismatch_and_its_silence_rule() {
    let s = spec()
        .requires_os_family(OsFamily::Windows)
        .build()
        .unwrap();
    let err = run(&host(), Isolation::None, &permissive(), &s).unwrap_err();
    assert!(matches!(
        err,
        Refusal::OsFamilyNotSupported {
            asked: OsFamily::Windows,
            ..
        }
    ));

    // Silence: refuses a spec that asks, leaves one that does not alone.
    let mut decl = permissive();
    decl.os_families = None;
    let posix = spec().requires_os_family(OsFamily::Posix).build().unwrap();
    assert!(matches!(
        run(&host(), Isolation::None, &decl, &posix),
        Err(Refusal::OsFamilyNotSupported { .. })
    ));
    assert!(run(&host(), Isolation::None, &decl, &spec().build().unwrap()).is_ok());
}

#[test]
fn transfer_limits_above_backend_ceiling_are_refused_not_clamped() {
    let ceiling = TransferLimits {
        max_bytes_per_file: 10,
        max_total_bytes: 100,
        max_files: 3,
    };
    let decl = permissive().with_limits(SandboxLimits {
        files_in: TransferLimits::DEFAULT,
        files_out: ceiling,
    });
    let s = spec()
        .files_in(TransferLimits {
            max_bytes_per_file: 1,
            max_total_bytes: 1,
            max_files: 1,
        })
        .files_out(TransferLimits {
            max_bytes_per_file: 10,
            max_total_bytes: 100,
            max_files: 4,
        })
        .build()
        .unwrap();
    let err = run(&host(), Isolation::None, &decl, &s).unwrap_err();
    assert_eq!(
        err,
        Refusal::TransferLimitsNotPermitted {
            backend: "b".into(),
            kind: "k".into(),
            direction: Direction::FilesOut,
            field: TransferField::MaxFiles,
            asked: 4,
            ceiling: 3,
            owner: CeilingOwner::Backend,
        }
    );
}

#[test]
fn silent_limits_are_the_default_ceiling() {
    let mut decl = permissive();
    decl.limits = None;
    let at = spec().files_in(TransferLimits::DEFAULT).build().unwrap();
    assert!(run(&host(), Isolation::None, &decl, &at).is_ok());
    let above = spec()
        .files_in(TransferLimits {
            max_files: TransferLimits::DEFAULT.max_files + 1,
            ..TransferLimits::DEFAULT
        })
        .build()
        .unwrap();
    assert!(matches!(
        run(&host(), Isolation::None, &decl, &above),
        Err(Refusal::TransferLimitsNotPermitted {
            direction: Direction::FilesIn,
            field: TransferField::MaxFiles,
            ..
        })
    ));
}

#[test]
fn host_transfer_ceiling_is_checked_before_the_backend() {
    let h = HostPolicy {
        files_in_ceiling: Some(TransferLimits {
            max_bytes_per_file: 1,
            ..TransferLimits::DEFAULT
        }),
        ..host()
    };
    let err = run(&h, Isolation::None, &permissive(), &spec().build().unwrap()).unwrap_err();
    assert!(matches!(
        err,
        Refusal::TransferLimitsNotPermitted {
            owner: CeilingOwner::Host,
            field: TransferField::MaxBytesPerFile,
            ..
        }
    ));
}

#[test]
fn egress_must_match_exactly_in_both_directions() {
    let closed_only = permissive().with_egress_modes([Egress::Closed]);
    let allow = spec()
        .egress(Egress::Allowlist)
        .egress_allow(["pypi.org"])
        .build()
        .unwrap();
    assert!(matches!(
        run(&host(), Isolation::None, &closed_only, &allow),
        Err(Refusal::EgressNotEnforced {
            asked: Egress::Allowlist,
            ..
        })
    ));
    let allow_only = permissive().with_egress_modes([Egress::Allowlist]);
    assert!(matches!(
        run(
            &host(),
            Isolation::None,
            &allow_only,
            &spec().build().unwrap()
        ),
        Err(Refusal::EgressNotEnforced {
            asked: Egress::Closed,
            ..
        })
    ));
}

#[test]
fn silent_egress_refuses_every_ask() {
    let mut decl = permissive();
    decl.egress_modes = None;
    let err = run(&host(), Isolation::None, &decl, &spec().build().unwrap()).unwrap_err();
    assert_eq!(
        err,
        Refusal::EgressNotEnforced {
            backend: "b".into(),
            kind: "k".into(),
            asked: Egress::Closed,
            enforces: BTreeSet::new()
        }
    );
}

#[test]
fn unrestricted_is_never_served_even_when_declared() {
    let decl = permissive().with_egress_modes(Egress::ALL.iter().copied());
    let s = spec().egress(Egress::Unrestricted).build().unwrap();
    assert!(matches!(
        run(&host(), Isolation::None, &decl, &s),
        Err(Refusal::EgressNotEnforced {
            asked: Egress::Unrestricted,
            ..
        })
    ));
}

#[test]
fn scope_not_enforced_and_the_stricter_scope_wins() {
    let conv_only = permissive().with_isolation_scopes([IsolationScope::Conversation]);
    let call = spec()
        .isolation_scope(IsolationScope::Call)
        .build()
        .unwrap();
    assert!(matches!(
        run(&host(), Isolation::None, &conv_only, &call),
        Err(Refusal::ScopeNotEnforced {
            scope: IsolationScope::Call,
            ..
        })
    ));
    // The host's floor raises a conversation spec to call scope.
    let h = HostPolicy {
        min_isolation_scope: IsolationScope::Call,
        ..host()
    };
    assert!(matches!(
        run(&h, Isolation::None, &conv_only, &spec().build().unwrap()),
        Err(Refusal::ScopeNotEnforced {
            scope: IsolationScope::Call,
            ..
        })
    ));
    let d = run(&h, Isolation::None, &permissive(), &spec().build().unwrap()).unwrap();
    assert_eq!(d.scope, IsolationScope::Call);
}

#[test]
fn silent_scopes_claim_conversation_only() {
    let mut decl = permissive();
    decl.isolation_scopes = None;
    assert!(run(&host(), Isolation::None, &decl, &spec().build().unwrap()).is_ok());
    let call = spec()
        .isolation_scope(IsolationScope::Call)
        .build()
        .unwrap();
    assert!(matches!(
        run(&host(), Isolation::None, &decl, &call),
        Err(Refusal::ScopeNotEnforced { .. })
    ));
}

#[test]
fn check_order_first_failure_wins() {
    // A totally silent backend under the default floor, and a spec failing every check.
    let h = HostPolicy {
        denied_capabilities: BTreeSet::from([Capability::HostTools]),
        denied_identities: BTreeSet::from([Identity::User]),
        files_in_ceiling: Some(TransferLimits {
            max_files: 1,
            ..TransferLimits::DEFAULT
        }),
        min_isolation_scope: IsolationScope::Call,
        ..HostPolicy::default()
    };
    let s = spec()
        .require(Capability::HostTools)
        .require(Capability::Snapshot)
        .identities([Identity::User])
        .requires_os_family(OsFamily::Windows)
        .egress(Egress::Allowlist)
        .build()
        .unwrap();
    let silent = BackendDeclarations::silent();
    let order = [
        "SandboxBackendNotPermitted",
        "SandboxCapabilityDenied",
        "SandboxCapabilityNotSupported",
        "SandboxIdentityDenied",
        "SandboxOsFamilyNotSupported",
        "SandboxTransferLimitsNotPermitted",
        "SandboxEgressNotEnforced",
        "SandboxScopeNotEnforced",
    ];
    // Peel one failure at a time and check the next one in line is reported.
    let mut h = h;
    let mut iso = Isolation::Container;
    let mut decl = silent;
    for (step, expected) in order.iter().enumerate() {
        let err = run(&h, iso, &decl, &s).unwrap_err();
        assert_eq!(err.kind(), *expected, "step {step}: {err}");
        match step {
            0 => iso = Isolation::Microvm,
            1 => h.denied_capabilities.clear(),
            2 => decl = decl.with_capabilities(Capability::ALL.iter().copied()),
            3 => h.denied_identities.clear(),
            4 => decl = decl.with_os_families([OsFamily::Windows]),
            5 => h.files_in_ceiling = None,
            6 => decl = decl.with_egress_modes([Egress::Allowlist]),
            7 => decl = decl.with_isolation_scopes([IsolationScope::Call]),
            _ => unreachable!(),
        }
    }
    assert!(run(&h, iso, &decl, &s).is_ok());
}
