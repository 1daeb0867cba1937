//! A live kernel process, and one cell given to it.
use std::path::PathBuf;

use super::door::Door;
use super::guard::Guard;
use super::procs::Procs;
use crate::limits::Limits;
use crate::run::{Launched, RunSpec};

/// One cell: its code and the spec it came with.
pub(super) struct Cell<'a> {
    pub(super) code: String,
    pub(super) spec: &'a RunSpec,
}

/// A live kernel process.
pub(super) struct Live {
    pub(super) launched: Launched,
    pub(super) sys_path: Vec<PathBuf>,
    /// Its memory ceiling (fixed at start).
    pub(super) limits: Limits,
    /// Watches it while it is stopped between cells.
    pub(super) guard: Option<Guard>,
    /// A forkable kernel's door (its seccomp listener, answered by the broker).
    pub(super) door: Option<Door>,
    /// Its processes.
    pub(super) procs: Procs,
    /// A branch's frozen kernel (held while any of its branches lives).
    pub(super) template: Option<std::sync::Arc<Template>>,
}

impl Live {
    /// The kernel's processes.
    pub(super) fn procs(&self) -> Procs {
        self.procs
    }
}

impl Live {
    /// Kill the kernel's tree and reap it.
    pub(super) async fn end(self) {
        let Live {
            launched,
            guard,
            door,
            ..
        } = self;
        if let Some(refused) = door.map(|d| d.shut()).filter(|n| *n > 0) {
            tracing::warn!(
                refused,
                "a forkable kernel asked for clones nobody asked it for"
            );
        }
        if let Some(g) = guard {
            g.stop().await;
        }
        let mut l = launched;
        let _ = crate::run::kill_stage(&mut l.s.child, l.cgroup.as_ref()).await;
        l.discard().await;
    }
}

/// The frozen kernel a fork's branches were cloned from: it holds their pid namespaces and
/// the pages they share, and ends with the last of them.
pub(crate) struct Template {
    live: Option<Live>,
}

impl Template {
    pub(super) fn new(live: Live) -> Template {
        Template { live: Some(live) }
    }

    /// The kernel (its limits, its sys.path, its layers), for its branches.
    pub(super) fn live(&self) -> Option<&Live> {
        self.live.as_ref()
    }
}

impl Drop for Template {
    fn drop(&mut self) {
        let Some(live) = self.live.take() else { return };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(live.end());
        } else {
            for pid in live.procs().pids() {
                let _ = airlock_jail::process::kill(pid, 9);
            }
        }
    }
}
