//! A live kernel process, and one cell given to it.
use std::path::PathBuf;

use super::door::Door;
use super::guard::Guard;
use super::procs::Procs;
use crate::limits::Limits;
use crate::run::launched::Launched;
use crate::run::spec::RunSpec;

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
    pub(super) template: Option<std::sync::Arc<super::fork::Template>>,
}

impl Live {
    /// The kernel's processes.
    pub(super) fn procs(&self) -> Procs {
        self.procs
    }
}
