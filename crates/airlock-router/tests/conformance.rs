//! The conformance suites against the fake: an honest fake passes every suite, and each fault
//! fails the probe written to catch it (so no suite is a check that cannot fail).

#![allow(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns; clippy.toml allows unwrap in tests"
)]

use std::sync::Arc;

use airlock_policy::{Egress, IsolationScope, SandboxKey, SandboxSpec};
use airlock_router::conformance::{
    call_scope_suite, egress_suite, exec_suite, files_delete_suite, files_in_suite,
    files_out_suite, run_code_suite, ConformanceReport, EgressProbe, Fetch, Outcome,
};
use airlock_router::fake::{FakeBackend, Fault};
use airlock_router::{Backend, Origin, Sandbox};

const WD: &str = "/work";

fn key() -> SandboxKey {
    SandboxKey::new("tenant", "thread", "conformance").unwrap()
}

fn allowlist_spec() -> SandboxSpec {
    SandboxSpec::builder("k")
        .egress(Egress::Allowlist)
        .egress_allow(["pypi.org"])
        .build()
        .unwrap()
}

async fn sandbox(faults: &[Fault]) -> Arc<dyn Sandbox> {
    let mut b = FakeBackend::new();
    for f in faults {
        b = b.with_fault(*f);
    }
    b.acquire(&key(), &allowlist_spec(), Origin::Fresh)
        .await
        .unwrap()
}

fn probe() -> EgressProbe {
    EgressProbe {
        allowed_url: "https://pypi.org/simple/".into(),
        denied_url: "https://example.com/".into(),
        fetch: Fetch::Curl,
    }
}

async fn all(sb: &dyn Sandbox) -> Vec<ConformanceReport> {
    vec![
        exec_suite(sb, WD).await,
        run_code_suite(sb).await,
        files_in_suite(sb, WD).await,
        files_out_suite(sb, WD).await,
        files_delete_suite(sb, WD).await,
        egress_suite(sb, &probe()).await,
    ]
}

fn failed(reports: &[ConformanceReport]) -> Vec<(&'static str, &'static str)> {
    reports
        .iter()
        .flat_map(|r| r.failures().into_iter().map(move |p| (r.suite, p.name)))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn the_honest_fake_passes_every_suite() {
    let sb = sandbox(&[]).await;
    let reports = all(sb.as_ref()).await;
    for r in &reports {
        r.assert_passed();
        assert!(r.probes.iter().all(|p| !p.reason.is_empty()));
    }
    let call = SandboxSpec::builder("k")
        .isolation_scope(IsolationScope::Call)
        .build()
        .unwrap();
    call_scope_suite(&FakeBackend::new(), &call, &key())
        .await
        .assert_passed();
    // The suites clean up after themselves.
    let fake = FakeBackend::new();
    let sb = fake
        .acquire(&key(), &allowlist_spec(), Origin::Fresh)
        .await
        .unwrap();
    let _ = all(sb.as_ref()).await;
    assert!(fake.sandbox(&key()).unwrap().files().is_empty());
}

#[tokio::test(start_paused = true)]
async fn each_fault_fails_its_probe() {
    let cases: &[(Fault, &[(&str, &str)])] = &[
        (Fault::LeakEgress, &[("egress", "denied_host_blocked")]),
        (
            Fault::MergeStderr,
            &[("exec", "stderr_separate"), ("run_code", "stderr_separate")],
        ),
        (
            Fault::DropExitCode,
            &[
                ("exec", "exit_code_preserved"),
                ("exec", "stderr_separate"),
                ("exec", "unknown_command_fails"),
                ("run_code", "failure_reported"),
                // Every check made through `cat`'s exit code is fooled too.
                ("files_delete", "remove_deletes"),
                ("files_delete", "reclaim_removes_tree_only"),
                ("egress", "denied_host_blocked"),
            ],
        ),
        (
            Fault::LossyOutput,
            &[("files_in", "every_byte_value_exact")],
        ),
        (
            Fault::TruncateReads,
            &[("files_out", "read_over_bound_refused")],
        ),
        (
            Fault::IgnoreRemove,
            &[
                ("files_delete", "remove_deletes"),
                ("files_delete", "reclaim_removes_tree_only"),
            ],
        ),
        (
            Fault::StrictRemove,
            &[("files_delete", "remove_missing_is_success")],
        ),
        (
            Fault::FailReclaim,
            &[
                ("files_delete", "reclaim_removes_tree_only"),
                ("files_delete", "reclaim_missing_is_success"),
            ],
        ),
    ];
    for (fault, expected) in cases {
        let sb = sandbox(&[*fault]).await;
        let got = failed(&all(sb.as_ref()).await);
        assert_eq!(&got, expected, "fault {fault:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn ignored_timeouts_fail_the_timeout_probes() {
    let sb = sandbox(&[Fault::IgnoreTimeout]).await;
    let e = exec_suite(sb.as_ref(), WD).await;
    let r = run_code_suite(sb.as_ref()).await;
    assert!(
        matches!(e.outcome("timeout_enforced"), Some(Outcome::Fail(_))),
        "{e}"
    );
    assert!(
        matches!(r.outcome("timeout_enforced"), Some(Outcome::Fail(_))),
        "{r}"
    );
    assert_eq!(e.failures().len(), 1);
    assert_eq!(r.failures().len(), 1);
}

#[tokio::test]
async fn a_shared_call_scope_fails_the_call_scope_suite() {
    let call = SandboxSpec::builder("k")
        .isolation_scope(IsolationScope::Call)
        .build()
        .unwrap();
    let leaky = FakeBackend::new().with_fault(Fault::ShareCallScope);
    let r = call_scope_suite(&leaky, &call, &key()).await;
    assert!(
        matches!(r.outcome("calls_do_not_share"), Some(Outcome::Fail(_))),
        "{r}"
    );
    // A conversation spec is refused by the suite itself.
    let conv = SandboxSpec::builder("k").build().unwrap();
    let r = call_scope_suite(&FakeBackend::new(), &conv, &key()).await;
    assert!(!r.passed());
}

#[tokio::test]
async fn closed_egress_blocks_even_allowlisted_hosts() {
    let b = FakeBackend::new();
    let sb = b
        .acquire(
            &key(),
            &SandboxSpec::builder("k").build().unwrap(),
            Origin::Fresh,
        )
        .await
        .unwrap();
    let r = egress_suite(sb.as_ref(), &probe()).await;
    assert!(matches!(
        r.outcome("allowed_host_answers"),
        Some(Outcome::Fail(_))
    ));
    assert_eq!(r.outcome("denied_host_blocked"), Some(&Outcome::Pass));
}

#[tokio::test]
async fn the_fake_records_commands_and_programs_separately() {
    let b = FakeBackend::new();
    let sb = b
        .acquire(&key(), &allowlist_spec(), Origin::Fresh)
        .await
        .unwrap();
    sb.exec(&["echo".into(), "print(\"x\")".into()], &Default::default())
        .await
        .unwrap();
    sb.run_code("print(\"y\")", &Default::default())
        .await
        .unwrap();
    let fake = b.sandbox(&key()).unwrap();
    assert_eq!(
        fake.commands(),
        vec![vec!["echo".to_owned(), "print(\"x\")".to_owned()]]
    );
    assert_eq!(fake.programs(), vec!["print(\"y\")".to_owned()]);
}
