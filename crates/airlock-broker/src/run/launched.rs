//! A launched stage: spawned, in its cgroup where possible (or on its way there), its `setup`
//! frame sent; what supervision, the kernel and the warm pool take over.
use std::sync::Arc;

use airlock_jail::cgroup::RunCgroup;
use airlock_protocol::Message;

use super::spawn::{Readers, Spawned};
use super::teardown;
use crate::output::{Captured, OutputTap};
use crate::sandbox_fs::SandboxFs;
use crate::stage_cgroup::{self, Attach};

/// A spawned stage (in its cgroup where possible, its `setup` frame sent), not yet supervised.
pub(crate) struct Launched {
    pub(crate) s: Spawned,
    pub(crate) stage_pid: i32,
    pub(crate) cgroup: Option<RunCgroup>,
    /// The cgroup being set up (see `stage_cgroup`), settled before any code is sent.
    pub(crate) attach: Option<Attach>,
    pub(crate) enforcement: Vec<&'static str>,
    pub(crate) python: bool,
    /// The sandbox the run is in (its filesystem's usage is watched).
    pub(crate) sandbox: Arc<SandboxFs>,
}

impl Launched {
    /// The stage's pid (0 if unknown).
    pub(crate) fn stage_pid(&self) -> i32 {
        self.stage_pid
    }

    /// The next message from the executor; None once its socket is closed or broken.
    pub(crate) async fn recv(&mut self) -> Option<Message> {
        match self.s.inbox.recv().await {
            Some(Ok(Some(m))) => Some(m),
            _ => None,
        }
    }

    /// Queue a message to the executor; false when the socket is gone.
    pub(crate) fn send(&self, msg: Message) -> bool {
        self.s.outbox.try_send(msg).is_ok()
    }

    /// True once the stage has exited (it is reaped by this call).
    pub(crate) fn exited(&mut self) -> bool {
        !matches!(self.s.child.try_wait(), Ok(None))
    }

    /// Wait until the tree is in its cgroup (see `stage_cgroup`); Err is a refusal.
    pub(crate) async fn attached(&mut self, cpu_requested: bool) -> Result<(), String> {
        stage_cgroup::settle(
            &mut self.attach,
            &mut self.cgroup,
            &mut self.enforcement,
            cpu_requested,
        )
        .await
    }

    /// A kernel's cell begins: its output goes to fresh captures (no-op for a one-shot run).
    pub(crate) async fn readers_begin(&self, cap: usize, tap: Option<OutputTap>) {
        if let Readers::Cells(out, err) = &self.s.readers {
            tokio::join!(out.begin(cap, tap.clone()), err.begin(cap, tap));
        }
    }

    /// A kernel's cell ended: what it wrote (empty for a one-shot run, read at its end).
    pub(crate) async fn readers_end(&self) -> (Captured, Captured) {
        match &self.s.readers {
            Readers::Cells(out, err) => tokio::join!(out.end(), err.end()),
            Readers::Whole(_) => Default::default(),
        }
    }

    /// Kill the whole tree and reap it, for a stage that will never run anything.
    pub(crate) async fn discard(mut self) {
        let _ = teardown::kill(&mut self.s.child, self.cgroup.as_ref()).await;
        stage_cgroup::abandon(self.attach.take()).await;
        for t in &self.s.io_tasks {
            t.abort();
        }
        self.s.readers.abort();
    }
}
