//! A run request: what to run ([`Workload`]), under which limits, where, and the restricted
//! language profile; and how a caller cancels it.
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use airlock_image::Image;

use crate::limits::Limits;
use crate::output::OutputTap;
use crate::sandbox_fs::SandboxFs;

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workload {
    /// A Python program, run by CPython with `call_tool` available.
    Python {
        /// The program text.
        code: String,
        /// The interpreter; `python3` on PATH when None. With an image, a name on the image's
        /// PATH or a guest path.
        interpreter: Option<PathBuf>,
    },
    /// A command (argv[0] resolved on the broker's PATH).
    Command {
        /// The command and its arguments.
        argv: Vec<String>,
    },
}

/// A complete run request.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The workload.
    pub workload: Workload,
    /// Its limits.
    pub limits: Limits,
    /// The sandbox to run in (its filesystem persists across runs); a fresh one, dropped
    /// after the run, when None.
    pub sandbox: Option<Arc<SandboxFs>>,
    /// The image a fresh sandbox's root comes from (the host's system directories when None);
    /// a given `sandbox` brings its own.
    pub image: Option<Arc<Image>>,
    /// The guest working directory, relative to /work (None: /work itself).
    pub cwd: Option<String>,
    /// The guest's entire environment.
    pub env: Vec<(String, String)>,
    /// The `airlock` binary, whose hidden `__executor` subcommand is the stage.
    pub executor: PathBuf,
    /// A live copy of the captured output (streamed to a client), when someone listens.
    pub output: Option<OutputTap>,
    /// Python programs run under this restricted language profile (a guard inside the OS
    /// layers, not a boundary).
    pub restricted: Option<Restricted>,
}

/// The restricted language profile as the guest applies it: the builtins a program keeps
/// (exception classes always stay) and the modules it may not import (with their submodules).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Restricted {
    /// Builtin names a program may use.
    pub builtins: Vec<String>,
    /// Module names a program may not import.
    pub blocked_imports: Vec<String>,
}

/// A future that, when it resolves, cancels the run.
pub type Cancel = Pin<Box<dyn Future<Output = ()> + Send>>;
