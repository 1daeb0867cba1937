//! The plan of a run on an image's root: the interpreter is found inside the image (guest
//! paths only), a bare command on the image's `PATH`, the image's environment sits under the
//! caller's, and its working directory is where the run starts unless the caller names one.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use airlock_executor::Mode;
use airlock_image::Image;
use airlock_jail::dirfd::FileKind;
use airlock_protocol::ErrorCode;

use super::plan::{absolute, check_size, command_path, guest_cwd, Plan};
use super::prepared::{interpreter_missing, not_started, NotStarted};
use super::spec::{RunSpec, Workload};
use crate::fs_policy;
use crate::image_env::{merged, search_path};
use crate::interpreter_image::{self, RunProbe};
use crate::sandbox_fs::SandboxFs;

/// The plan of `spec` on `image` (whose root `sandbox` has); `probe` runs the interpreter probe.
pub(super) async fn plan(
    spec: &RunSpec,
    image: &Arc<Image>,
    sandbox: &SandboxFs,
    probe: RunProbe,
) -> Result<Plan, NotStarted> {
    let image_dir = working_dir(image, sandbox).filter(|_| spec.cwd.is_none());
    let cwd = match &image_dir {
        Some(d) => d.clone(),
        None => guest_cwd(spec.cwd.as_deref())?,
    };
    let env = merged(&image.config.env, &spec.env);
    let (mode, mut fs, code, sys_path) = match &spec.workload {
        Workload::Python { code, interpreter } => {
            check_size(code)?;
            let mut interp =
                interpreter_image::discover(image, interpreter.as_deref(), &spec.executor, probe)
                    .await
                    .map_err(interpreter_missing)?;
            // The probe's answer is the image's: `/` (or a link to it) as a prefix or a
            // sys.path entry would make the whole root readable.
            interp.prefixes.retain(|p| !sandbox.is_image_root(p));
            interp.path.retain(|p| !sandbox.is_image_root(p));
            if !sandbox.has_executable(&interp.executable) {
                let msg = format!(
                    "the interpreter {} is not in image {}",
                    interp.executable.display(),
                    image.name
                );
                return Err(not_started(ErrorCode::SandboxRefused, msg));
            }
            let mode = Mode::Python {
                interpreter: interp.executable.clone(),
                bootstrap: Some(interp.bootstrap.clone()).filter(|b| !b.is_empty()),
            };
            let fs = fs_policy::for_python(&interp);
            (mode, fs, Some(code.clone()), absolute(&interp.path))
        }
        Workload::Command { argv } => {
            let first = argv
                .first()
                .ok_or_else(|| not_started(ErrorCode::InvalidParams, "empty command"))?;
            let program = command_path(first, &cwd, Some(sandbox), &search_path(&env))?;
            let fs = fs_policy::for_command(&program);
            let mode = Mode::Command {
                program,
                argv: argv.clone(),
            };
            (mode, fs, None, Vec::new())
        }
    };
    if let Some(d) = image_dir {
        fs.read_only.push(d);
    }
    Ok(Plan {
        mode,
        fs,
        code,
        sys_path,
        cwd,
        env,
        untrusted_interpreter: true,
    })
}

/// The image's working directory, when it names a directory of the image other than its root
/// (a `WorkingDir` that is a link to `/` would make the whole root readable).
fn working_dir(image: &Image, sandbox: &SandboxFs) -> Option<PathBuf> {
    let d = Path::new(image.config.working_dir.as_deref()?);
    let dir = sandbox
        .in_image(d)
        .is_some_and(|m| m.kind == FileKind::Directory);
    (dir && !sandbox.is_image_root(d)).then(|| d.to_path_buf())
}
