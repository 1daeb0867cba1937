//! What preparing a run yields: a run ready to spawn, and where its root comes from; or why
//! nothing was spawned.
use std::path::PathBuf;
use std::sync::Arc;

use airlock_executor::{ExecutorConfig, HostId};
use airlock_protocol::ErrorCode;

use super::spec::Restricted;
use crate::interpreter::InterpreterError;
use crate::output::OutputTap;
use crate::sandbox_fs::SandboxFs;

/// A run ready to spawn.
#[derive(Debug)]
pub struct Prepared {
    /// The first frame the stage receives.
    pub config: ExecutorConfig,
    /// The program text (Python mode).
    pub code: Option<String>,
    /// The interpreter's `sys.path` as discovered with `site` (Python mode): the guest starts
    /// with `-S` and the bootstrap adds these before the program runs.
    pub sys_path: Vec<PathBuf>,
    /// The `airlock` binary.
    pub executor: PathBuf,
    /// The sandbox the run joins, or the one it builds for itself.
    pub sandbox: RunRoot,
    /// A live copy of the output, when someone listens.
    pub output: Option<OutputTap>,
    /// The restricted language profile (Python mode).
    pub restricted: Option<Restricted>,
    /// A paused kernel's image to restore ([`ExecutorConfig::restore_image`]), handed to the
    /// stage on `KERNEL_IMAGE_FD`.
    pub kernel_image: Option<std::os::fd::OwnedFd>,
}

/// Where a run's root comes from.
#[derive(Debug)]
pub enum RunRoot {
    /// A sandbox that outlives the run (the spec's): the stage joins its namespaces.
    Shared(Arc<SandboxFs>),
    /// A one-shot run: its stage builds the root itself ([`ExecutorConfig::root`]) and hands
    /// the namespaces and the work dir back; these are what the run's `SandboxFs` will hold.
    Own {
        /// The host identity the sandbox runs as.
        owner: Option<HostId>,
        /// The canonical bound paths.
        binds: Vec<PathBuf>,
    },
}

impl RunRoot {
    /// The host identity the run's sandbox has.
    pub(super) fn owner(&self) -> Option<HostId> {
        match self {
            RunRoot::Shared(sb) => sb.owner(),
            RunRoot::Own { owner, .. } => *owner,
        }
    }
}

/// Why nothing was spawned.
#[derive(Debug)]
pub struct NotStarted {
    /// The error code to report.
    pub code: ErrorCode,
    /// What happened and how to fix it.
    pub message: String,
}

pub(crate) fn not_started(code: ErrorCode, message: impl Into<String>) -> NotStarted {
    NotStarted {
        code,
        message: message.into(),
    }
}

/// A missing interpreter (on the host or in an image) is the request's problem (`not_found`,
/// which the CLI exits 127 on); one that is there but is not a usable CPython cannot start a
/// sandbox (`refused`).
pub(crate) fn interpreter_missing(e: InterpreterError) -> NotStarted {
    let code = match e {
        InterpreterError::NotFound(_) | InterpreterError::NotFoundInImage { .. } => {
            ErrorCode::NotFound
        }
        InterpreterError::NotCpython { .. } => ErrorCode::SandboxRefused,
    };
    not_started(code, e.to_string())
}
