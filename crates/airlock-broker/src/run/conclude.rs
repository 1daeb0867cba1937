//! The end of supervision: whatever is still queued from a stage that exited, the ending with
//! a refusal (or the memory cgroup's OOM kill) taken into account, every process of the run
//! gone, and the one result.
use std::os::unix::process::ExitStatusExt;

use airlock_jail::cgroup::RunCgroup;

use super::egress::Egress;
use super::guest_messages::{drain_hint, drain_refusal};
use super::supervisor::{Phase, Supervisor};
use super::teardown;
use super::verdict::{self, End, Observed};
use crate::result::RunResult;
use crate::stage_cgroup;

const SIGKILL: i32 = 9;

impl Supervisor<'_> {
    /// The one result of a run whose supervision ended with `end`; returns after every process
    /// of the run is gone.
    pub(super) async fn conclude(mut self, end: End) -> RunResult {
        let tool_calls = self.relay.calls;
        // The call in flight, if any, is dropped (its handler cancelled); nothing is sent.
        let _ = self.relay.abandon("the run ended");
        let end = self.drain_after_exit(end).await;
        let end = self.final_end(end).await;
        self.reap(&end).await;
        self.observed(end, tool_calls).await
    }

    /// What a stage that exited may have left on its socket; the ending it makes.
    async fn drain_after_exit(&mut self, end: End) -> End {
        let running = matches!(self.phase, Phase::Running);
        // The guest writes its result and then exits: the exit can be seen before the result was
        // read. Every writer is gone once the stage exited, so this drain ends at EOF promptly.
        // A message the loop would have refused is refused here too, whichever it saw first.
        if end == End::Exited && self.python && self.hint.is_none() && running {
            let left = drain_hint(&mut self.s.inbox).await;
            self.hint = left.hint;
            if let Some(stray) = left.stray {
                return End::Protocol(format!("unexpected message: {stray}"));
            }
        }
        // Likewise a stage that refused and exited: its refusal may still be in the inbox.
        let awaiting = matches!(self.phase, Phase::AwaitReady);
        if end == End::Exited && self.refusal.is_none() && awaiting {
            self.refusal = drain_refusal(&mut self.s.inbox).await;
        }
        end
    }

    /// How the run ended, a refusal from trusted code taken into account.
    async fn final_end(&mut self, end: End) -> End {
        match (end, self.refusal.take()) {
            (End::Exited, Some(r)) => End::Refused(r),
            (End::Protocol(_), Some(r)) => End::Refused(r),
            // Killed by the kernel for the run's memory limit while still starting (the run's
            // cgroups hold a zygote's child from its first instruction): the limit ended it.
            (End::Exited, None)
                if matches!(self.phase, Phase::AwaitReady) && self.oom_killed_stage().await =>
            {
                End::Memory
            }
            // No code was ever sent: whatever else ended the executor, the sandbox did not
            // come up.
            (End::Exited, None) if matches!(self.phase, Phase::AwaitReady) => {
                End::Refused("the executor exited before proving its isolation (see stderr)".into())
            }
            (end, _) => end,
        }
    }

    /// Whether the stage died by `SIGKILL` (its own, or pid 1's that it passed on) and the
    /// run's memory cgroup counts an OOM kill: the kernel killed the run for its memory limit.
    /// A stage that exits before `ready` has its cgroup still being set up (settled only at
    /// `ready`); it is taken here to be read, and goes the way of a settled one.
    async fn oom_killed_stage(&mut self) -> bool {
        if self.exit.and_then(|s| s.signal()) != Some(SIGKILL) {
            return false;
        }
        if self.cgroup.is_none() {
            if let Some(handle) = self.attach.take() {
                self.cgroup = handle.await.ok().and_then(Result::ok);
            }
        }
        self.cgroup.as_ref().is_some_and(RunCgroup::oom_killed)
    }

    /// Every process of the run gone: the stage ended (gently first after a timeout or a
    /// cancel) and reaped, no descendant left, the cgroup set-up abandoned.
    async fn reap(&mut self, end: &End) {
        if self.exit.is_none() {
            if matches!(end, End::Timeout | End::Cancelled) {
                self.exit = teardown::terminate(&mut self.s.child, self.limits.grace).await;
            }
            if self.exit.is_none() {
                self.exit = teardown::kill(&mut self.s.child, self.cgroup.as_ref()).await;
            }
        }
        // The stage is reaped; make sure no descendant lingers (cgroup members included).
        let _ = teardown::kill(&mut self.s.child, self.cgroup.as_ref()).await;
        stage_cgroup::abandon(self.attach.take()).await;
    }

    /// Everything observed about the finished run, as its result.
    async fn observed(self, end: End, tool_calls: u32) -> RunResult {
        let Supervisor {
            mut s,
            cgroup,
            mut peak_rss,
            limits,
            phase,
            exit,
            hint,
            python,
            started,
            enforcement,
            sandbox,
            ..
        } = self;
        let oom_killed = cgroup.as_ref().is_some_and(RunCgroup::oom_killed);
        if let Some(cg) = &cgroup {
            peak_rss = peak_rss.max(cg.peak_memory_bytes().unwrap_or(0));
        }
        for t in &s.io_tasks {
            t.abort();
        }
        let (stdout, stderr) = s.readers.finish().await;
        teardown::release(cgroup);
        let egress = s.egress.take().map(Egress::finish);
        let mut result = verdict::result(Observed {
            end,
            exit,
            hint,
            python,
            oom_killed,
            stdout,
            stderr,
            started,
            peak_rss,
            tool_calls,
            memory_limit: limits.memory_bytes,
            enforcement,
            before_program: matches!(phase, Phase::AwaitReady),
        });
        result.egress = egress.unwrap_or_default();
        // The run's sandbox (a one-shot run's goes with it) outlives everything else of the run.
        drop(sandbox);
        result
    }
}
