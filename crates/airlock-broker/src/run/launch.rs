//! Launching a run's stage: spawn it (or have the zygote fork it), put it in its cgroup where
//! the machine allows, send its `setup` frame, and, for a one-shot run, receive the root its
//! stage built. What comes out is a [`Launched`] stage, not yet supervised.
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use airlock_executor::config::SETUP_METHOD;
use airlock_protocol::{ErrorCode, Message};
use serde_json::Value;

use super::guest_messages::drain_refusal;
use super::launched::Launched;
use super::prepared::{NotStarted, Prepared, RunRoot};
use super::spawn::{spawn, HandOver, Spawned, Via};
use super::teardown;
use crate::limits::Limits;
use crate::sandbox_fs::{receive_hand_over, SandboxFs};
use crate::stage_cgroup::{self, Attach};

/// How long a one-shot run's stage may take to build its root.
const HAND_OVER_TIMEOUT: Duration = Duration::from_secs(20);

/// Spawn the stage, put it in a cgroup where the machine allows, and send its `setup` frame;
/// a one-shot run's stage builds its own root, which is waited for here (it comes before the
/// stage's attestation in any case).
pub(crate) async fn launch(p: &Prepared, limits: &Limits) -> Result<Launched, NotStarted> {
    launch_via(p, limits, Via::Spawn).await
}

/// [`launch`], the stage started `via` the given way.
pub(crate) async fn launch_via(
    p: &Prepared,
    limits: &Limits,
    via: Via<'_>,
) -> Result<Launched, NotStarted> {
    let RunRoot::Own { owner, binds } = &p.sandbox else {
        return launch_shared(p, limits, false, via);
    };
    let (mut s, stage_pid, attach, hand_over) = start_stage(p, limits, false, via)?;
    let received = match hand_over {
        Some(sock) => tokio::task::spawn_blocking(move || receive_root(&sock))
            .await
            .unwrap_or_else(|e| Err(e.to_string())),
        None => Err("no hand-over socket".into()),
    };
    let sandbox = match received.and_then(|fds| {
        SandboxFs::from_hand_over(fds, *owner, binds.clone(), None).map_err(|e| e.to_string())
    }) {
        Ok(sb) => Arc::new(sb),
        Err(why) => {
            // The stage says why on its socket before it exits.
            let refusal = drain_refusal(&mut s.inbox).await.unwrap_or(why);
            let _ = teardown::kill(&mut s.child, None).await;
            stage_cgroup::abandon(Some(attach)).await;
            for t in &s.io_tasks {
                t.abort();
            }
            s.readers.abort();
            return Err(NotStarted {
                code: ErrorCode::SandboxRefused,
                message: refusal,
            });
        }
    };
    Ok(launched(s, stage_pid, attach, p, sandbox))
}

/// The one-shot run's sandbox as its stage handed it over.
fn receive_root(sock: &HandOver) -> Result<[OwnedFd; 3], String> {
    sock.set_read_timeout(Some(HAND_OVER_TIMEOUT))
        .map_err(|e| e.to_string())?;
    match receive_hand_over(sock) {
        Ok(Some(fds)) => Ok(fds),
        Ok(None) => Err(
            "the sandbox root could not be assembled (the stage exited without a reason)".into(),
        ),
        Err(e) => Err(format!("cannot receive the sandbox root: {e}")),
    }
}

/// [`launch`] for a run in a sandbox that outlives it; `cells` reads the output one capture
/// per cell (a stateful kernel).
pub(crate) fn launch_with(
    p: &Prepared,
    limits: &Limits,
    cells: bool,
) -> Result<Launched, NotStarted> {
    launch_shared(p, limits, cells, Via::Spawn)
}

/// [`launch_via`] for a run in a sandbox that outlives it.
fn launch_shared(
    p: &Prepared,
    limits: &Limits,
    cells: bool,
    via: Via<'_>,
) -> Result<Launched, NotStarted> {
    let RunRoot::Shared(sandbox) = &p.sandbox else {
        return Err(NotStarted {
            code: ErrorCode::InternalError,
            message: "a one-shot run is launched with its own root".into(),
        });
    };
    let (s, stage_pid, attach, _) = start_stage(p, limits, cells, via)?;
    Ok(launched(s, stage_pid, attach, p, Arc::clone(sandbox)))
}

/// Spawn the stage `via` the given way, start putting it in its cgroup and send its `setup`
/// frame: the stage, its pid, the cgroup being set up and a one-shot run's hand-over socket.
#[allow(
    clippy::type_complexity,
    reason = "a private tuple of what a start produced"
)]
fn start_stage(
    p: &Prepared,
    limits: &Limits,
    cells: bool,
    via: Via<'_>,
) -> Result<(Spawned, i32, Attach, Option<HandOver>), NotStarted> {
    // A zygote's child enters its cgroups by itself as it is born (see `stage_cgroup`): they
    // exist before it. A spawned stage is moved in beside its start.
    let made = match via {
        Via::Spawn => None,
        Via::Zygote(_) => Some(stage_cgroup::create(limits)),
    };
    let entry = match &made {
        Some(Ok(cg)) => cg.entry_handles().ok(),
        _ => None,
    };
    let (s, hand_over) = spawn(p, limits, cells, via, entry).map_err(|e| NotStarted {
        code: ErrorCode::SandboxRefused,
        message: format!("cannot start the executor {}: {e}", p.executor.display()),
    })?;
    let stage_pid = s
        .child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .unwrap_or(0);
    let attach = match made {
        Some(made) => stage_cgroup::adopt(made, stage_pid),
        None => {
            let (name, cg_limits) = stage_cgroup::cgroup_for(stage_pid, limits);
            stage_cgroup::start(name, cg_limits, stage_pid)
        }
    };
    let setup = serde_json::to_value(&p.config).unwrap_or(Value::Null);
    let _ = s
        .outbox
        .try_send(Message::notification(SETUP_METHOD, Some(setup)));
    Ok((s, stage_pid, attach, hand_over))
}

/// A started stage as a [`Launched`] one, in `sandbox`, its enforcement so far listed.
fn launched(
    s: Spawned,
    stage_pid: i32,
    attach: Attach,
    p: &Prepared,
    sandbox: Arc<SandboxFs>,
) -> Launched {
    let enforcement = vec![
        "rlimits",
        "rss_watchdog",
        "sandbox_root",
        "tmpfs_disk_bound",
    ];
    Launched {
        s,
        stage_pid,
        cgroup: None,
        attach: Some(attach),
        enforcement,
        python: p.code.is_some(),
        sandbox,
    }
}
