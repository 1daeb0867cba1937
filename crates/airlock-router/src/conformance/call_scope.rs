//! The call-scope suite: two calls of one conversation never meet in one filesystem.

use airlock_policy::{GuestRelPath, IsolationScope, SandboxKey, SandboxSpec};

use super::report::{check, ConformanceReport};
use crate::backend::{Backend, Origin};
use crate::sandbox::{ExecOptions, Sandbox};

/// Acquires two call keys of one conversation from `backend` under `spec` (which must be
/// call-scoped), writes a marker in the first and looks for it from the second, then disposes
/// both and checks a re-acquired first call starts clean.
pub async fn call_scope_suite<B: Backend>(
    backend: &B,
    spec: &SandboxSpec,
    conversation: &SandboxKey,
) -> ConformanceReport {
    let mut r = ConformanceReport::new("call_scope");
    let scope_ok = spec.isolation_scope() == IsolationScope::Call;
    r.record(
        "spec_is_call_scoped",
        "the suite probes call scope and needs a call-scoped spec",
        check(scope_ok, || {
            format!("spec scope is {}", spec.isolation_scope())
        }),
    );
    if !scope_ok {
        return r;
    }
    let res = probe(backend, spec, conversation).await;
    match res {
        Ok((separate, fresh)) => {
            r.record(
                "calls_do_not_share",
                "a backend serving call scope folds the call id into what names a sandbox",
                separate,
            );
            r.record(
                "disposed_call_is_gone",
                "a call's sandbox is deleted when the call returns; nothing of it answers a later acquire",
                fresh,
            );
        }
        Err(e) => r.record("acquire", "the suite needs two call sandboxes", Err(e)),
    }
    r
}

type Probes = (Result<(), String>, Result<(), String>);

async fn probe<B: Backend>(
    backend: &B,
    spec: &SandboxSpec,
    conversation: &SandboxKey,
) -> Result<Probes, String> {
    let id = crate::ids::fresh_id().map_err(|e| e.to_string())?;
    let k1 = conversation
        .clone()
        .with_call_id(format!("{id}-1"))
        .map_err(|e| e.to_string())?;
    let k2 = conversation
        .clone()
        .with_call_id(format!("{id}-2"))
        .map_err(|e| e.to_string())?;
    let marker =
        GuestRelPath::parse(&format!("call-scope-marker-{id}")).map_err(|e| e.to_string())?;
    let wd = spec.work_dir();
    let seen = |sb: std::sync::Arc<B::Sandbox>| {
        // Relative to the guest's working directory (the work dir): a backend whose guest sees
        // its work dir at another absolute path is still probed for real.
        let argv = vec!["cat".to_owned(), marker.to_string()];
        async move {
            let o = sb
                .exec(&argv, &ExecOptions::default())
                .await
                .map_err(|e| e.to_string())?;
            Ok::<bool, String>(o.exit_code == Some(0))
        }
    };

    let s1 = backend
        .acquire(&k1, spec, Origin::Fresh)
        .await
        .map_err(|e| e.to_string())?;
    s1.write_file(wd, &marker, b"call one")
        .await
        .map_err(|e| e.to_string())?;
    let s2 = backend
        .acquire(&k2, spec, Origin::Fresh)
        .await
        .map_err(|e| e.to_string())?;
    let leaked = seen(s2).await?;
    let separate = check(!leaked, || {
        "the second call read the first call's file".to_owned()
    });

    drop(s1);
    let d1 = backend.dispose(&k1).await;
    let d2 = backend.dispose(&k2).await;
    let again = backend
        .acquire(&k1, spec, Origin::Fresh)
        .await
        .map_err(|e| e.to_string())?;
    let fresh_seen = seen(again).await?;
    let _ = backend.dispose(&k1).await;
    let fresh = check(d1.is_none() && d2.is_none() && !fresh_seen, || {
        format!("dispose reported {d1:?}/{d2:?}; marker visible after re-acquire: {fresh_seen}")
    });
    Ok((separate, fresh))
}
