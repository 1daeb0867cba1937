//! Starting a kernel: the same preparation, stage, attestation check and cgroup as a cold run;
//! no code is sent here (the first cell is).
use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::Instant;

use airlock_executor::attest::own_namespaces;
use airlock_protocol::Message;

use super::door::Door;
use super::image::Fill;
use super::live::Live;
use crate::result::RunResult;
use crate::run::{
    check_ready, describe, kill_stage, launch_with, prepare, refusal_of, refused_before_spawn,
    run_probe, verdict, Cancel, End, Launched, Observed, RunSpec, Workload,
};
use airlock_executor::kernel_image::{FILLED, MAPPED, RESTORED};

/// Start a kernel for `cell`; Err is the cell's result (refused, timed out, cancelled).
pub(super) async fn start(
    cell: &RunSpec,
    cancel: &mut Cancel,
    started: Instant,
    forkable: bool,
    image: Option<(std::os::fd::OwnedFd, Fill)>,
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
    let mut prepared = prepare(&spec, run_probe)
        .await
        .map_err(|r| refused_before_spawn(r, started))?;
    let restoring = image.is_some();
    let (pipe, mut fill) = image.unzip();
    prepared.config.restore_image = restoring;
    prepared.kernel_image = pipe;
    let forkable = forkable
        && !restoring
        && prepared.config.machine.is_none()
        && prepared.config.egress_proxy_port.is_none();
    if forkable {
        prepared.config.forkable = true;
        prepared.config.fs.data = vec![PathBuf::from("/")];
    }
    let mut launched =
        launch_with(&prepared, &cell.limits, true).map_err(|r| refused_before_spawn(r, started))?;
    let deadline = tokio::time::Instant::from_std(started + cell.limits.timeout);
    let end = tokio::select! {
        r = attest(&mut launched, cell.limits.cpu_millicores.is_some(), forkable, fill.take()) => r,
        () = tokio::time::sleep_until(deadline) => Err(End::Timeout),
        () = cancel => Err(End::Cancelled),
    };
    match end {
        Ok(door) => Ok(Live {
            procs: super::procs::Procs::Stage(launched.stage_pid),
            launched,
            sys_path: prepared.sys_path,
            limits: cell.limits.clone(),
            guard: None,
            door,
            template: None,
        }),
        Err(end) => Err(failed(launched, end, cell, started).await),
    }
}

/// Wait for the guest's `ready`, check its attestation, settle the cgroup; a forkable
/// kernel's door, its listener taken from the guest.
async fn attest(
    l: &mut Launched,
    cpu: bool,
    forkable: bool,
    fill: Option<Fill>,
) -> Result<Option<Door>, End> {
    let broker_ns: BTreeMap<String, String> = own_namespaces();
    match l.recv().await {
        Some(Message::Notification(n)) if n.method == "ready" => {
            let listener = n.params.as_ref().and_then(|p| p.get("listener")?.as_i64());
            check_ready(n.params, &broker_ns).map_err(|why| {
                End::Refused(format!("the sandbox could not prove its isolation: {why}"))
            })?;
            l.attached(cpu).await.map_err(End::Refused)?;
            if let Some(fill) = fill {
                return restored(l, fill).await.map(|()| None);
            }
            match (forkable, listener) {
                (false, None) => Ok(None),
                (true, Some(fd)) => take_door(l, fd).map(Some).map_err(End::Refused),
                (true, None) => Err(End::Refused(
                    "the forkable kernel did not name its seccomp listener".into(),
                )),
                (false, Some(_)) => Err(End::Protocol(
                    "a kernel named a seccomp listener it was not to have".into(),
                )),
            }
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

/// Let an attested restoring stage go on: once it has mapped the image's regions, write their
/// bytes in, let it finish, and wait until it has become the paused kernel (its first words
/// as the kernel are `restored`).
async fn restored(l: &mut Launched, fill: Fill) -> Result<(), End> {
    if !l.send(Message::notification("start", None)) {
        return Err(End::Refused("the restoring stage's socket closed".into()));
    }
    expect(l, MAPPED).await?;
    let stage = l.stage_pid();
    let pid = airlock_jail::procfs::descendants(stage)
        .first()
        .copied()
        .ok_or_else(|| End::Refused("the restoring process was not found".into()))?;
    tokio::task::spawn_blocking(move || fill.write_into(pid, stage))
        .await
        .map_err(|e| End::Internal(e.to_string()))?
        .map_err(|e| {
            End::Refused(format!(
                "the paused kernel's memory could not be written: {e}"
            ))
        })?;
    if !l.send(Message::notification(FILLED, None)) {
        return Err(End::Refused("the restoring stage's socket closed".into()));
    }
    expect(l, RESTORED).await
}

/// The restoring stage's next word must be `method`.
async fn expect(l: &mut Launched, method: &str) -> Result<(), End> {
    match l.recv().await {
        Some(Message::Notification(n)) if n.method == method => Ok(()),
        Some(Message::Notification(n)) if n.method == "refused" => Err(End::Refused(format!(
            "the paused kernel could not be restored: {}",
            refusal_of(n.params)
        ))),
        Some(other) => Err(End::Protocol(format!(
            "unexpected message: {}",
            describe(&other)
        ))),
        None => Err(End::Refused(
            "the paused kernel could not be restored (its process ended; see stderr)".into(),
        )),
    }
}

/// Take the guest's listener (fd `fd` in it) and open the door on it.
fn take_door(l: &Launched, fd: i64) -> Result<Door, String> {
    let fd = i32::try_from(fd).map_err(|_| format!("a listener fd out of range: {fd}"))?;
    let guest = airlock_jail::procfs::descendants(l.stage_pid())
        .first()
        .copied()
        .ok_or("the kernel's process was not found")?;
    let pidfd = airlock_jail::pidfd::open(guest).map_err(|e| e.to_string())?;
    let listener = airlock_jail::pidfd::take_fd(pidfd.as_fd(), fd)
        .map_err(|e| format!("the kernel's seccomp listener could not be taken: {e}"))?;
    Door::open(airlock_jail::seccomp::notify::Listener::from_fd(listener))
        .map_err(|e| format!("the kernel's door could not be opened: {e}"))
}

/// The result of a kernel that never came up; every process of it is gone.
async fn failed(mut l: Launched, end: End, cell: &RunSpec, started: Instant) -> RunResult {
    let exit = kill_stage(&mut l.s.child, l.cgroup.as_ref()).await;
    let (stdout, stderr) = l.readers_end().await;
    let enforcement = std::mem::take(&mut l.enforcement);
    l.discard().await;
    verdict(Observed {
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
