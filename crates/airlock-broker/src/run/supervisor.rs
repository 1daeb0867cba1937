//! One supervised run's state — its stage, its phase, what the guest reported, what was
//! measured — and one handler per event of the supervision loop but the guest's messages
//! (`inbound.rs`). Each handler says whether the run goes on ([`ControlFlow::Continue`]) or
//! how it ended ([`ControlFlow::Break`] with an [`End`]).
use std::collections::BTreeMap;
use std::io;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Instant;

use airlock_executor::attest::own_namespaces;
use airlock_jail::cgroup::RunCgroup;
use airlock_jail::procfs;
use airlock_protocol::Message;
use serde_json::{Map, Value};
use tokio::sync::oneshot::error::RecvError;

use super::launched::Launched;
use super::spawn::Spawned;
use super::spec::Restricted;
use super::tool_relay::ToolRelay;
use super::verdict::{End, Hint};
use crate::limits::Limits;
use crate::sandbox_fs::SandboxFs;
use crate::stage_cgroup::Attach;
use crate::tools::ToolHandler;

/// Where supervision starts.
pub(crate) enum Start<'a> {
    /// A fresh stage: wait for its attestation, then send `execute` (or `start`).
    Cold {
        /// The program (Python mode), or None to send `start` (exec mode).
        code: Option<&'a str>,
        /// The interpreter's `sys.path`, sent with the program.
        sys_path: &'a [PathBuf],
        /// The restricted language profile, when the run has one.
        restricted: Option<&'a Restricted>,
        /// The run's environment, when the interpreter did not get it at `execve` (a zygote's
        /// child); the bootstrap applies it before the program.
        env: Option<&'a Map<String, Value>>,
    },
    /// A stage whose attestation the broker already verified and whose `execute` it already
    /// sent (the warm pool, `crate::pool`).
    Attested,
}

/// What a handler decided: go on, or the run ended so.
pub(super) type Flow = ControlFlow<End>;

/// Where the run is.
pub(super) enum Phase {
    /// The stage has not proven its isolation yet; no code was sent.
    AwaitReady,
    /// The program (or command) was sent and runs.
    Running,
    /// The guest reported its result; it must exit `by` then.
    Reported { by: Instant },
}

/// What is sent once the stage proved its isolation (see [`Start::Cold`]); nothing for a
/// stage that already got its program ([`Start::Attested`]).
#[derive(Default)]
pub(super) struct Program<'a> {
    pub(super) code: Option<&'a str>,
    pub(super) sys_path: &'a [PathBuf],
    pub(super) restricted: Option<&'a Restricted>,
    pub(super) env: Option<&'a Map<String, Value>>,
}

/// One run under supervision.
pub(super) struct Supervisor<'a> {
    pub(super) s: Spawned,
    pub(super) stage_pid: i32,
    pub(super) cgroup: Option<RunCgroup>,
    /// The cgroup being set up, settled before any code is sent.
    pub(super) attach: Option<Attach>,
    pub(super) enforcement: Vec<&'static str>,
    pub(super) python: bool,
    /// The sandbox the run is in (its filesystem's usage is watched), kept to the end.
    pub(super) sandbox: Arc<SandboxFs>,
    pub(super) program: Program<'a>,
    pub(super) limits: &'a Limits,
    pub(super) started: Instant,
    /// When the run's wall-clock budget ends.
    pub(super) deadline: tokio::time::Instant,
    /// The broker's own namespaces, which the attestation must differ from.
    pub(super) broker_ns: BTreeMap<String, String>,
    pub(super) phase: Phase,
    /// The guest's self-reported result.
    pub(super) hint: Option<Hint>,
    /// A layer trusted code said it could not apply.
    pub(super) refusal: Option<String>,
    pub(super) relay: ToolRelay<'a>,
    pub(super) peak_rss: u64,
    pub(super) exit: Option<ExitStatus>,
    /// False once the disk watcher is gone (it could not watch).
    pub(super) disk_watching: bool,
}

impl<'a> Supervisor<'a> {
    /// A launched stage's supervision, starting as `start` says, its clock started at `started`.
    pub(super) fn new(
        launched: Launched,
        start: Start<'a>,
        limits: &'a Limits,
        tools: &'a dyn ToolHandler,
        started: Instant,
    ) -> Self {
        let Launched {
            s,
            stage_pid,
            cgroup,
            attach,
            enforcement,
            python,
            sandbox,
        } = launched;
        let broker_ns = own_namespaces();
        let (program, phase) = match start {
            Start::Cold {
                code,
                sys_path,
                restricted,
                env,
            } => (
                Program {
                    code,
                    sys_path,
                    restricted,
                    env,
                },
                Phase::AwaitReady,
            ),
            Start::Attested => (Program::default(), Phase::Running),
        };
        Supervisor {
            s,
            stage_pid,
            cgroup,
            attach,
            enforcement,
            python,
            sandbox,
            program,
            limits,
            started,
            deadline: tokio::time::Instant::from_std(started + limits.timeout),
            broker_ns,
            phase,
            hint: None,
            refusal: None,
            relay: ToolRelay::new(tools),
            peak_rss: 0,
            exit: None,
            disk_watching: true,
        }
    }

    /// True once the guest reported its result.
    pub(super) fn reported(&self) -> bool {
        matches!(self.phase, Phase::Reported { .. })
    }

    /// When a guest that reported must have exited (the deadline while it has not reported).
    pub(super) fn reported_by(&self) -> tokio::time::Instant {
        match self.phase {
            Phase::Reported { by } => tokio::time::Instant::from_std(by),
            _ => self.deadline,
        }
    }

    /// The stage exited (it is reaped).
    pub(super) fn on_exited(&mut self, status: io::Result<ExitStatus>) -> Flow {
        self.exit = status.ok();
        ControlFlow::Break(End::Exited)
    }

    /// The disk watcher saw the work dir over its limits, or is gone.
    pub(super) fn on_disk(&mut self, over: Result<String, RecvError>) -> Flow {
        match over {
            Ok(why) => ControlFlow::Break(End::Disk(why)),
            Err(_) => {
                self.disk_watching = false;
                ControlFlow::Continue(())
            }
        }
    }

    /// The watchdog's period: sample the tree's resident memory against the ceiling.
    pub(super) fn on_watchdog_tick(&mut self) -> Flow {
        let rss = procfs::tree_rss_bytes(self.stage_pid);
        self.peak_rss = self.peak_rss.max(rss);
        if rss > self.limits.memory_bytes {
            return ControlFlow::Break(End::Memory);
        }
        ControlFlow::Continue(())
    }

    /// The tool call in flight finished: send its answer to the guest.
    pub(super) fn on_tool_answer(&mut self, reply: Message) -> Flow {
        if self.s.outbox.try_send(reply).is_err() {
            let why = "executor stopped reading its socket";
            return ControlFlow::Break(End::Protocol(why.into()));
        }
        ControlFlow::Continue(())
    }
}

/// The wall-clock budget ran out.
pub(super) fn on_timeout() -> Flow {
    ControlFlow::Break(End::Timeout)
}

impl Supervisor<'_> {
    /// The grace after the guest's report ran out. Only a guest still running after it
    /// reported has not exited: a stage that exited meanwhile (its exit and the grace became
    /// ready together, the broker's task late under load) ended as it should, and a guest that
    /// is gone while its stage still tears the run's namespaces down (which a busy host
    /// stretches) gets another grace, within the run's deadline.
    pub(super) fn on_grace_elapsed(&mut self) -> Flow {
        if let Ok(Some(status)) = self.s.child.try_wait() {
            return self.on_exited(Ok(status));
        }
        if guest_gone(self.stage_pid) {
            self.phase = Phase::Reported {
                by: Instant::now() + self.limits.grace,
            };
            return ControlFlow::Continue(());
        }
        ControlFlow::Break(End::NoExitAfterResult)
    }
}

/// Whether the guest under the stage `stage_pid` (its child, pid 1 of the run's pid
/// namespace) has exited: no child of the stage is alive (each is gone or a zombie).
fn guest_gone(stage_pid: i32) -> bool {
    procfs::children_of(stage_pid).into_iter().all(|pid| {
        procfs::stat_fields(pid)
            .and_then(|f| f.into_iter().next())
            .is_none_or(|state| state == "Z" || state == "X")
    })
}

/// The caller cancelled the run.
pub(super) fn on_cancel() -> Flow {
    ControlFlow::Break(End::Cancelled)
}

#[cfg(test)]
mod tests {
    use super::guest_gone;

    /// A stage whose child still runs has a guest; once the child has exited (a zombie its
    /// parent has not reaped yet) it has none.
    #[test]
    fn the_guest_is_gone_once_the_stages_child_exited() {
        let mut stage = std::process::Command::new("sh")
            .args(["-c", "sleep 1 & exec sleep 30"])
            .spawn()
            .unwrap_or_else(|e| panic!("sh: {e}"));
        let pid = i32::try_from(stage.id()).unwrap_or(0);
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!guest_gone(pid), "its child sleeps yet");
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !guest_gone(pid) && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(guest_gone(pid), "its child exited a while ago");
        let _ = stage.kill();
        let _ = stage.wait();
    }
}
