//! Construction, fixed selection and per-spec routing.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns; clippy.toml allows unwrap in tests"
)]

use std::sync::Arc;

use airlock_policy::{
    BackendDeclarations, Capability, Isolation, OsFamily, Policy, Refusal, SandboxKey, SandboxSpec,
};
use airlock_router::fake::{fake_declarations, FakeBackend};
use airlock_router::{Router, RouterConfigError, Selection};

fn fake(name: &str, iso: Isolation) -> Arc<FakeBackend> {
    Arc::new(FakeBackend::new().with_name(name).with_isolation(iso))
}

fn dyns(bs: &[&Arc<FakeBackend>]) -> Vec<Arc<FakeBackend>> {
    bs.iter().map(|b| Arc::clone(b)).collect()
}

#[test]
fn default_floor_is_microvm_and_refuses_the_fake() {
    let err = Router::builder(dyns(&[&Arc::new(FakeBackend::new())]))
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        RouterConfigError::NotPermitted(Refusal::BackendNotPermitted {
            backend: "none".into(),
            isolation: Isolation::None,
            floor: Isolation::Microvm
        })
    );
}

#[test]
fn opting_down_explicitly_admits_it() {
    let r = Router::builder(dyns(&[&Arc::new(FakeBackend::new())]))
        .min_isolation(Isolation::None)
        .build()
        .unwrap();
    assert_eq!(
        r.ensure_can_serve(&SandboxSpec::builder("k").build().unwrap()),
        Ok("none")
    );
}

#[test]
fn construction_errors() {
    assert_eq!(
        Router::<FakeBackend>::builder(vec![]).build().unwrap_err(),
        RouterConfigError::NoBackends
    );
    let a = fake("a", Isolation::Vm);
    let a2 = fake("a", Isolation::Vm);
    assert_eq!(
        Router::builder(dyns(&[&a, &a2])).build().unwrap_err(),
        RouterConfigError::DuplicateName("a".into())
    );
    assert_eq!(
        Router::builder(dyns(&[&a]))
            .selected("zz")
            .build()
            .unwrap_err(),
        RouterConfigError::UnknownSelected("zz".into())
    );
    assert_eq!(
        Router::builder(dyns(&[&a]))
            .selected("a")
            .selection(Selection::PerSpec)
            .build()
            .unwrap_err(),
        RouterConfigError::SelectedWithPerSpec
    );
}

#[test]
fn fixed_selection_is_first_registered_or_selected_and_never_moves() {
    let a = Arc::new(
        FakeBackend::new()
            .with_name("a")
            .with_isolation(Isolation::Vm)
            .with_declarations(
                fake_declarations().with_capabilities([Capability::Exec, Capability::FilesIn]),
            ),
    );
    let b = fake("b", Isolation::Vm);
    let r = Router::builder(dyns(&[&a, &b])).build().unwrap();
    let plain = SandboxSpec::builder("k").build().unwrap();
    assert_eq!(r.ensure_can_serve(&plain), Ok("a"));
    // A spec "a" cannot serve is refused, with "b" untouched.
    let code = SandboxSpec::builder("k")
        .require(Capability::RunCode)
        .build()
        .unwrap();
    assert!(
        matches!(r.ensure_can_serve(&code), Err(Refusal::CapabilityNotSupported { ref backend, .. }) if backend == "a")
    );

    let r = Router::builder(dyns(&[&a, &b]))
        .selected("b")
        .build()
        .unwrap();
    assert_eq!(r.ensure_can_serve(&code), Ok("b"));
}

#[test]
fn fixed_selected_below_floor_is_refused_at_construction() {
    let a = fake("a", Isolation::Vm);
    let b = fake("b", Isolation::Container);
    let err = Router::builder(dyns(&[&a, &b]))
        .selected("b")
        .build()
        .unwrap_err();
    assert!(
        matches!(err, RouterConfigError::NotPermitted(Refusal::BackendNotPermitted { ref backend, .. }) if backend == "b")
    );
}

#[test]
fn per_spec_routes_to_the_first_passing_backend_deterministically() {
    let posix_only = Arc::new(
        FakeBackend::new()
            .with_name("posix")
            .with_isolation(Isolation::Vm),
    );
    let windows = Arc::new(
        FakeBackend::new()
            .with_name("windows")
            .with_isolation(Isolation::Vm)
            .with_declarations(fake_declarations().with_os_families([OsFamily::Windows])),
    );
    let also_windows = Arc::new(
        FakeBackend::new()
            .with_name("windows2")
            .with_isolation(Isolation::Vm)
            .with_declarations(fake_declarations().with_os_families([OsFamily::Windows])),
    );
    let r = Router::builder(dyns(&[&posix_only, &windows, &also_windows]))
        .selection(Selection::PerSpec)
        .build()
        .unwrap();
    let win = SandboxSpec::builder("k")
        .requires_os_family(OsFamily::Windows)
        .build()
        .unwrap();
    let plain = SandboxSpec::builder("k").build().unwrap();
    for _ in 0..50 {
        assert_eq!(r.ensure_can_serve(&win), Ok("windows"));
        assert_eq!(r.ensure_can_serve(&plain), Ok("posix"));
    }
}

#[test]
fn per_spec_refusal_names_every_backend_in_order() {
    let a = fake("a", Isolation::Vm);
    let b = Arc::new(
        FakeBackend::new()
            .with_name("b")
            .with_isolation(Isolation::Vm)
            .with_declarations(BackendDeclarations::silent()),
    );
    let r = Router::builder(dyns(&[&a, &b]))
        .selection(Selection::PerSpec)
        .build()
        .unwrap();
    let snap = SandboxSpec::builder("k")
        .require(Capability::Snapshot)
        .build()
        .unwrap();
    match r.ensure_can_serve(&snap) {
        Err(Refusal::NoBackendServes { refusals, .. }) => {
            assert_eq!(refusals.len(), 2);
            assert!(
                matches!(&refusals[0], Refusal::CapabilityNotSupported { backend, .. } if backend == "a")
            );
            assert!(
                matches!(&refusals[1], Refusal::CapabilityNotSupported { backend, .. } if backend == "b")
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn per_spec_warns_about_below_floor_registrations_and_never_routes_to_them() {
    let weak = fake("weak", Isolation::Container);
    let strong = fake("strong", Isolation::Microvm);
    let r = Router::builder(dyns(&[&weak, &strong]))
        .selection(Selection::PerSpec)
        .build()
        .unwrap();
    assert_eq!(r.warnings().len(), 1);
    assert!(r.warnings()[0].contains("\"weak\""));
    assert_eq!(
        r.ensure_can_serve(&SandboxSpec::builder("k").build().unwrap()),
        Ok("strong")
    );

    let err = Router::builder(dyns(&[&weak]))
        .selection(Selection::PerSpec)
        .build()
        .unwrap_err();
    assert!(matches!(
        err,
        RouterConfigError::NotPermitted(Refusal::NoBackendServes { .. })
    ));
}

#[tokio::test]
async fn acquire_refuses_before_touching_a_backend() {
    let a = Arc::new(FakeBackend::new());
    let r = Router::builder(dyns(&[&a]))
        .min_isolation(Isolation::None)
        .build()
        .unwrap();
    let key = SandboxKey::new("s", "t", "k").unwrap();
    let snap = SandboxSpec::builder("k")
        .require(Capability::Snapshot)
        .build()
        .unwrap();
    let err = r.acquire(&key, &snap).await.unwrap_err();
    assert!(matches!(
        err,
        airlock_router::AcquireError::Refused(Refusal::CapabilityNotSupported { .. })
    ));
    let raised = SandboxSpec::builder("k")
        .min_isolation(Isolation::Vm)
        .build()
        .unwrap();
    assert!(r.acquire(&key, &raised).await.is_err());
    assert!(a.acquires().is_empty());
}

#[tokio::test]
async fn policy_file_feeds_the_router() {
    let a = Arc::new(FakeBackend::new());
    let p =
        Policy::from_toml_str("floor = \"none\"\ndenied_capabilities = [\"host_tools\"]").unwrap();
    let r = Router::builder(dyns(&[&a])).policy(&p).build().unwrap();
    let tools = SandboxSpec::builder("k")
        .require(Capability::HostTools)
        .build()
        .unwrap();
    assert!(matches!(
        r.ensure_can_serve(&tools),
        Err(Refusal::CapabilityDenied { .. })
    ));
}
