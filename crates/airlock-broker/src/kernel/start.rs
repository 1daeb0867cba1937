//! Starting a kernel: the same preparation, stage, attestation check and cgroup as a cold run;
//! no code is sent here (the first cell is).
use std::collections::BTreeMap;
use std::time::Instant;

use airlock_executor::attest::own_namespaces;
use airlock_protocol::Message;

use super::live::Live;
use crate::result::RunResult;
use crate::run::cold::run_probe;
use crate::run::guest_messages::{check_ready, describe, refusal_of};
use crate::run::launch::launch_with;
use crate::run::launched::Launched;
use crate::run::spec::{Cancel, RunSpec, Workload};
use crate::run::verdict::{self, End, Observed};
use crate::run::{prepare, teardown};

/// Start a kernel for `cell`; Err is the cell's result (refused, timed out, cancelled).
pub(super) async fn start(
    cell: &RunSpec,
    cancel: &mut Cancel,
    started: Instant,
) -> Result<Live, RunResult> {
    let interpreter = match &cell.workload {
        Workload::Python { interpreter, .. } => interpreter.clone(),
        Workload::Command { .. } => None,
    };
    let spec = RunSpec {
        workload: Workload::Python {
            code: String::new(),
            interpreter,
        },
        output: None,
        ..cell.clone()
    };
    let prepared = prepare::prepare(&spec, run_probe)
        .await
        .map_err(|r| verdict::before_spawn(r, started))?;
    let mut launched = launch_with(&prepared, &cell.limits, true)
        .map_err(|r| verdict::before_spawn(r, started))?;
    let deadline = tokio::time::Instant::from_std(started + cell.limits.timeout);
    let end = tokio::select! {
        r = attest(&mut launched, cell.limits.cpu_millicores.is_some()) => r,
        () = tokio::time::sleep_until(deadline) => Err(End::Timeout),
        () = cancel => Err(End::Cancelled),
    };
    match end {
        Ok(()) => Ok(Live {
            launched,
            sys_path: prepared.sys_path,
            limits: cell.limits.clone(),
            guard: None,
        }),
        Err(end) => Err(failed(launched, end, cell, started).await),
    }
}

/// Wait for the guest's `ready`, check its attestation, settle the cgroup.
async fn attest(l: &mut Launched, cpu: bool) -> Result<(), End> {
    let broker_ns: BTreeMap<String, String> = own_namespaces();
    match l.recv().await {
        Some(Message::Notification(n)) if n.method == "ready" => {
            check_ready(n.params, &broker_ns).map_err(|why| {
                End::Refused(format!("the sandbox could not prove its isolation: {why}"))
            })?;
            l.attached(cpu).await.map_err(End::Refused)
        }
        Some(Message::Notification(n)) if n.method == "refused" => {
            Err(End::Refused(refusal_of(n.params)))
        }
        Some(other) => {
            let what = describe(&other);
            Err(End::Protocol(format!("unexpected message: {what}")))
        }
        None => Err(End::Refused(
            "the executor exited before proving its isolation (see stderr)".into(),
        )),
    }
}

/// The result of a kernel that never came up; every process of it is gone.
async fn failed(mut l: Launched, end: End, cell: &RunSpec, started: Instant) -> RunResult {
    let exit = teardown::kill(&mut l.s.child, l.cgroup.as_ref()).await;
    let (stdout, stderr) = l.readers_end().await;
    let enforcement = std::mem::take(&mut l.enforcement);
    l.discard().await;
    verdict::result(Observed {
        end,
        exit,
        hint: None,
        python: true,
        oom_killed: false,
        stdout,
        stderr,
        started,
        peak_rss: 0,
        tool_calls: 0,
        memory_limit: cell.limits.memory_bytes,
        enforcement,
        before_program: true,
    })
}
