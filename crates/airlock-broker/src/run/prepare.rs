//! Everything decided before a process exists: size check, interpreter, work dir, executor
//! config. A failure here is a result (`refused` or `error`), never a spawn.
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use airlock_executor::config::GUEST_WORK_DIR;
use airlock_executor::{
    AssembleConfig, DataBounds, ExecutorConfig, FsSpec, HostId, Mode, RlimitSpec,
};
use airlock_protocol::{ErrorCode, DEFAULT_MAX_MESSAGE_BYTES};

use super::{RunSpec, Workload};
use crate::interpreter::Interpreter;
use crate::sandbox_fs::{sandbox_identity, RootSpec, SandboxFs};
use crate::{fs_policy, interpreter};

/// Envelope headroom kept under the frame cap for an `execute` request around a program.
const EXECUTE_ENVELOPE_BYTES: usize = 1024;

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
    pub output: Option<crate::output::OutputTap>,
    /// The restricted language profile (Python mode).
    pub restricted: Option<super::Restricted>,
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
    fn owner(&self) -> Option<HostId> {
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

/// Largest program accepted: what fits one frame with its JSON escaping and envelope.
pub fn program_fits(code: &str) -> bool {
    let escaped = serde_json::to_string(code)
        .map(|s| s.len())
        .unwrap_or(usize::MAX);
    escaped.saturating_add(EXECUTE_ENVELOPE_BYTES) <= DEFAULT_MAX_MESSAGE_BYTES
}

/// What a run needs, decided before its stage exists.
pub(super) struct Plan {
    pub(super) mode: Mode,
    pub(super) fs: FsSpec,
    pub(super) code: Option<String>,
    pub(super) sys_path: Vec<PathBuf>,
    pub(super) cwd: PathBuf,
    pub(super) env: Vec<(String, String)>,
    /// The interpreter comes from an image (see [`ExecutorConfig::untrusted_interpreter`]).
    pub(super) untrusted_interpreter: bool,
}

pub(crate) async fn prepare(spec: &RunSpec) -> Result<Prepared, NotStarted> {
    cwd_exists(spec).await?;
    let image = match &spec.sandbox {
        Some(sb) => sb.image().cloned(),
        None => spec.image.clone(),
    };
    let (plan, sandbox, root) = match image {
        None => {
            let (plan, interp, extra_binds) = plan_on_host(spec).await?;
            match &spec.sandbox {
                Some(sb) => (plan, RunRoot::Shared(Arc::clone(sb)), None),
                None => {
                    let binds = fs_policy::root_binds(interp.as_ref(), &extra_binds);
                    let (own, root) = own_root(binds, data_bounds(spec));
                    (plan, own, Some(root))
                }
            }
        }
        Some(image) => {
            let root = RootSpec::of_image(Arc::clone(&image), data_bounds(spec));
            let sandbox = sandbox_or_new(spec, root).await?;
            let plan = super::prepare_image::plan(spec, &image, &sandbox).await?;
            (plan, RunRoot::Shared(sandbox), None)
        }
    };
    let limits = &spec.limits;
    let config = ExecutorConfig {
        mode: plan.mode,
        cwd: plan.cwd,
        identity: sandbox.owner(),
        env: super::egress::guest_env(&plan.env, &limits.egress),
        rlimits: RlimitSpec {
            address_space: Some(limits.address_space_backstop()),
            file_size: Some(limits.max_file_bytes),
            open_files: Some(limits.max_open_files),
            processes: Some(limits.max_processes),
        },
        fs: plan.fs,
        hostname: "airlock".into(),
        egress_proxy_port: super::egress::proxy_port(&limits.egress)?,
        untrusted_interpreter: plan.untrusted_interpreter,
        root,
    };
    Ok(Prepared {
        config,
        code: plan.code,
        sys_path: plan.sys_path,
        executor: spec.executor.clone(),
        sandbox,
        output: spec.output.clone(),
        restricted: spec.restricted.clone(),
    })
}

fn data_bounds(spec: &RunSpec) -> DataBounds {
    DataBounds {
        bytes: spec.limits.max_disk_bytes,
        inodes: spec.limits.max_disk_entries,
    }
}

/// A one-shot run's root on the host's system directories, built by its own stage.
fn own_root(binds: Vec<PathBuf>, data: DataBounds) -> (RunRoot, AssembleConfig) {
    let owner = sandbox_identity();
    let canonical = crate::sandbox_fs::canonical(&binds);
    let root = AssembleConfig {
        identity: owner,
        binds,
        data,
        image: None,
    };
    let own = RunRoot::Own {
        owner,
        binds: canonical,
    };
    (own, root)
}

/// The spec's sandbox, or a fresh one with `root`.
async fn sandbox_or_new(spec: &RunSpec, root: RootSpec) -> Result<Arc<SandboxFs>, NotStarted> {
    if let Some(sb) = &spec.sandbox {
        return Ok(Arc::clone(sb));
    }
    SandboxFs::create(&spec.executor, root)
        .await
        .map(Arc::new)
        .map_err(|e| not_started(ErrorCode::SandboxRefused, e.to_string()))
}

/// A refusal unless `code` fits one `execute` frame.
pub(super) fn check_size(code: &str) -> Result<(), NotStarted> {
    if program_fits(code) {
        return Ok(());
    }
    let msg = format!(
        "program too large: {} bytes does not fit the {} byte message cap",
        code.len(),
        DEFAULT_MAX_MESSAGE_BYTES
    );
    Err(not_started(ErrorCode::ProgramTooLarge, msg))
}

/// The plan of a run on the host's system directories, the interpreter it found, and the
/// extra host paths a fresh sandbox must bind.
#[allow(clippy::type_complexity, reason = "a private triple")]
async fn plan_on_host(
    spec: &RunSpec,
) -> Result<(Plan, Option<Interpreter>, Vec<PathBuf>), NotStarted> {
    let cwd = guest_cwd(spec.cwd.as_deref())?;
    let mut extra_binds = Vec::new();
    let (mode, fs, code, sys_path, interp) = match &spec.workload {
        Workload::Python { code, interpreter } => {
            check_size(code)?;
            let interp = interpreter::discover(interpreter.as_deref())
                .await
                .map_err(interpreter_missing)?;
            if let Some(sb) = &spec.sandbox {
                if !sb.holds(&interp.executable) {
                    let msg = format!(
                        "the interpreter {} is not in this sandbox's root",
                        interp.executable.display()
                    );
                    return Err(not_started(ErrorCode::SandboxRefused, msg));
                }
            }
            let fs = fs_policy::for_python(&interp);
            let mode = Mode::Python {
                interpreter: interp.executable.clone(),
                bootstrap: Some(interp.bootstrap.clone()),
            };
            let sys_path = absolute(&interp.path);
            (mode, fs, Some(code.clone()), sys_path, Some(interp))
        }
        Workload::Command { argv } => {
            let first = argv
                .first()
                .ok_or_else(|| not_started(ErrorCode::InvalidParams, "empty command"))?;
            let program = command_path(first, &cwd, spec.sandbox.as_deref(), &GUEST_SEARCH)?;
            if spec.sandbox.is_none() {
                extra_binds.push(program.clone());
            }
            let fs = fs_policy::for_command(&program);
            let mode = Mode::Command {
                program,
                argv: argv.clone(),
            };
            (mode, fs, None, Vec::new(), None)
        }
    };
    let plan = Plan {
        mode,
        fs,
        code,
        sys_path,
        cwd,
        env: spec.env.clone(),
        untrusted_interpreter: false,
    };
    Ok((plan, interp, extra_binds))
}

/// The absolute entries of a `sys.path`.
pub(super) fn absolute(path: &[PathBuf]) -> Vec<PathBuf> {
    path.iter().filter(|p| p.is_absolute()).cloned().collect()
}

/// The root a fresh sandbox for `spec` needs (the image's, or the host's system directories
/// with the interpreter's tree or the command), for a caller that creates the sandbox itself
/// to move files in before the run.
pub async fn root_for(spec: &RunSpec) -> Result<RootSpec, NotStarted> {
    if let Some(image) = &spec.image {
        return Ok(RootSpec::of_image(Arc::clone(image), data_bounds(spec)));
    }
    let mut extra = Vec::new();
    let interp = match &spec.workload {
        Workload::Python { interpreter, .. } => Some(
            interpreter::discover(interpreter.as_deref())
                .await
                .map_err(interpreter_missing)?,
        ),
        Workload::Command { argv } => {
            if let Some(first) = argv.first() {
                let cwd = guest_cwd(spec.cwd.as_deref())?;
                extra.push(command_path(first, &cwd, None, &GUEST_SEARCH)?);
            }
            None
        }
    };
    Ok(RootSpec {
        binds: fs_policy::root_binds(interp.as_ref(), &extra),
        data: data_bounds(spec),
        image: None,
    })
}

/// The guest working directory: /work, or a relative directory beneath it.
pub(super) fn guest_cwd(rel: Option<&str>) -> Result<PathBuf, NotStarted> {
    let base = PathBuf::from(GUEST_WORK_DIR);
    let Some(rel) = rel.filter(|r| !r.is_empty() && *r != ".") else {
        return Ok(base);
    };
    let plain = Path::new(rel)
        .components()
        .all(|c| matches!(c, Component::Normal(_)));
    if !plain {
        let msg = format!("working directory {rel:?} must be a relative path beneath the work dir");
        return Err(not_started(ErrorCode::InvalidParams, msg));
    }
    Ok(base.join(rel))
}

/// A missing interpreter is the request's problem (`not_found`); one that is there but is not
/// a usable CPython cannot start a sandbox (`refused`).
fn interpreter_missing(e: interpreter::InterpreterError) -> NotStarted {
    let code = match e {
        interpreter::InterpreterError::NotFound(_) => ErrorCode::NotFound,
        _ => ErrorCode::SandboxRefused,
    };
    not_started(code, e.to_string())
}

/// A working directory the run names must be a directory in the sandbox's /work already (a
/// fresh sandbox's /work is empty): otherwise `not_found`, before anything spawns.
async fn cwd_exists(spec: &RunSpec) -> Result<(), NotStarted> {
    let Some(rel) = spec.cwd.as_deref().filter(|r| !r.is_empty() && *r != ".") else {
        return Ok(());
    };
    let missing = || {
        let msg = format!("working directory {rel:?} does not exist in the sandbox's /work");
        not_started(ErrorCode::NotFound, msg)
    };
    let Some(sb) = spec.sandbox.clone() else {
        return Err(missing());
    };
    let rel_owned = rel.to_owned();
    let opened = tokio::task::spawn_blocking(move || {
        sb.as_owner(|work| work.open_dir(&rel_owned).map(drop))
    })
    .await;
    match opened {
        Ok(Err(e))
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Err(missing())
        }
        // Anything else (a link on the way, ...) the stage's chdir decides, in the sandbox.
        _ => Ok(()),
    }
}

/// The guest's default `PATH` directories.
static GUEST_SEARCH: std::sync::LazyLock<Vec<PathBuf>> =
    std::sync::LazyLock::new(|| fs_policy::GUEST_PATH.iter().map(PathBuf::from).collect());

/// The guest path of a command. A bare name is searched in `search` (guest directories) in
/// the sandbox's root (a one-shot sandbox on the host's directories, not yet built, binds what
/// the broker's PATH finds); a name with a `/` is a guest path, relative ones to the guest's
/// cwd, never resolved on the host.
pub(super) fn command_path(
    first: &str,
    cwd: &Path,
    sandbox: Option<&SandboxFs>,
    search: &[PathBuf],
) -> Result<PathBuf, NotStarted> {
    let missing = || not_started(ErrorCode::NotFound, format!("command not found: {first}"));
    if first.contains('/') {
        let p = Path::new(first);
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        };
        // Known before the sandbox runs: a fresh sandbox's /work is empty; a path in a kept
        // sandbox's /work is looked up there without following a link (the stage's execve
        // decides the rest); a system path is there or not.
        let there = match (p.strip_prefix(GUEST_WORK_DIR), sandbox) {
            (Ok(_), None) => false,
            (Ok(rel), Some(sb)) => !matches!(
                sb.work()
                    .open_path(&rel.to_string_lossy())
                    .map_err(|e| e.kind()),
                Err(std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory)
            ),
            (Err(_), Some(sb)) => sb.has_executable(&p),
            (Err(_), None) => interpreter::which(&p.to_string_lossy()).is_some(),
        };
        return if there { Ok(p) } else { Err(missing()) };
    }
    let found = match sandbox {
        Some(sb) => search
            .iter()
            .map(|d| d.join(first))
            .find(|p| sb.has_executable(p)),
        None => interpreter::which(first).and_then(|p| std::fs::canonicalize(p).ok()),
    };
    // Not a missing layer: the request names something that is not there (the CLI exits 127).
    found.ok_or_else(missing)
}
