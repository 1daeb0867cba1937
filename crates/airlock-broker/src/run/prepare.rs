//! Everything decided before a process exists: size check, interpreter, work dir, executor
//! config. A failure here is a result (`refused` or `error`), never a spawn.
use std::path::PathBuf;
use std::sync::Arc;

use airlock_executor::config::Joining;
use airlock_executor::{AssembleConfig, DataBounds, ExecutorConfig, Mode, RlimitSpec};
use airlock_protocol::ErrorCode;

use super::plan::{absolute, check_size, command_path, guest_cwd, Plan, GUEST_SEARCH};
use super::prepared::{interpreter_missing, not_started, NotStarted, Prepared, RunRoot};
use super::spec::{RunSpec, Workload};
use super::{egress, prepare_image};
use crate::interpreter_facts::Interpreter;
use crate::interpreter_image::RunProbe;
use crate::sandbox_fs::{sandbox_identity, RootSpec, SandboxFs};
use crate::{fs_policy, interpreter};

/// Everything `spec` needs decided before its stage exists; `probe` runs the probe that finds
/// an image's interpreter (a whole run of its own, passed in so that preparing does not name
/// the run that prepares).
pub(crate) async fn prepare(spec: &RunSpec, probe: RunProbe) -> Result<Prepared, NotStarted> {
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
            let plan = prepare_image::plan(spec, &image, &sandbox, probe).await?;
            (plan, RunRoot::Shared(sandbox), None)
        }
    };
    let limits = &spec.limits;
    let config = ExecutorConfig {
        mode: plan.mode,
        cwd: plan.cwd,
        identity: sandbox.owner(),
        env: egress::guest_env(&plan.env, &limits.egress),
        rlimits: RlimitSpec {
            address_space: Some(limits.address_space_backstop()),
            file_size: Some(limits.max_file_bytes),
            open_files: Some(limits.max_open_files),
            processes: Some(limits.max_processes),
        },
        fs: plan.fs,
        hostname: "airlock".into(),
        egress_proxy_port: egress::proxy_port(&limits.egress)?,
        untrusted_interpreter: plan.untrusted_interpreter,
        root,
        machine: match &sandbox {
            RunRoot::Shared(sb) if sb.machine().is_some() => Some(Joining::Run),
            _ => None,
        },
        forkable: false,
        restore_image: false,
    };
    if config.machine.is_some() && config.egress_proxy_port.is_some() {
        return Err(not_started(
            ErrorCode::SandboxRefused,
            "a sandbox with background processes has no allowlist egress yet: its runs share \
             one network namespace; use closed egress",
        ));
    }
    Ok(Prepared {
        config,
        code: plan.code,
        sys_path: plan.sys_path,
        executor: spec.executor.clone(),
        sandbox,
        output: spec.output.clone(),
        restricted: spec.restricted.clone(),
        kernel_image: None,
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
        branch_of: None,
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
