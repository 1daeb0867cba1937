//! The plan of a run on an image's root: the interpreter is found inside the image (guest
//! paths only), a bare command on the image's `PATH`, the image's environment sits under the
//! caller's, and its working directory is where the run starts unless the caller names one.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use airlock_executor::Mode;
use airlock_image::Image;
use airlock_jail::dirfd::FileKind;
use airlock_protocol::ErrorCode;

use super::prepare::{
    absolute, check_size, command_path, guest_cwd, not_started, NotStarted, Plan,
};
use super::{RunSpec, Workload};
use crate::fs_policy;
use crate::interpreter_image;
use crate::sandbox_fs::SandboxFs;

/// The plan of `spec` on `image` (whose root `sandbox` has).
pub(super) async fn plan(
    spec: &RunSpec,
    image: &Arc<Image>,
    sandbox: &SandboxFs,
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
            let interp = interpreter_image::discover(image, interpreter.as_deref(), &spec.executor)
                .await
                .map_err(|e| not_started(ErrorCode::SandboxRefused, e.to_string()))?;
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

/// The image's working directory, when it names a directory of the image.
fn working_dir(image: &Image, sandbox: &SandboxFs) -> Option<PathBuf> {
    let d = Path::new(image.config.working_dir.as_deref()?);
    sandbox
        .in_image(d)
        .is_some_and(|m| m.kind == FileKind::Directory)
        .then(|| d.to_path_buf())
}

/// The image's environment with the caller's on top (a name the caller sets replaces the
/// image's), and the default guest `PATH` when neither sets one (as container runtimes do).
pub(crate) fn merged(
    image: &[(String, String)],
    caller: &[(String, String)],
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = image
        .iter()
        .filter(|(k, _)| !caller.iter().any(|(c, _)| c == k))
        .cloned()
        .collect();
    out.extend(caller.iter().cloned());
    if !out.iter().any(|(k, _)| k == "PATH") {
        out.insert(0, ("PATH".into(), fs_policy::GUEST_PATH.join(":")));
    }
    out
}

/// Where a bare command is looked for: the guest's `PATH` (its plain absolute entries), else
/// the default guest directories.
fn search_path(env: &[(String, String)]) -> Vec<PathBuf> {
    let from_env: Vec<PathBuf> = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| {
            v.split(':')
                .filter(|d| airlock_image::config::is_plain_absolute(d))
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default();
    if from_env.is_empty() {
        fs_policy::GUEST_PATH.iter().map(PathBuf::from).collect()
    } else {
        from_env
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caller_env_wins_and_path_is_searched_in_order() {
        let image = vec![
            ("PATH".into(), "/opt/venv/bin:/usr/bin".into()),
            ("A".into(), "1".into()),
        ];
        let caller = vec![("A".into(), "2".into())];
        let env = merged(&image, &caller);
        assert_eq!(
            env,
            vec![
                ("PATH".into(), "/opt/venv/bin:/usr/bin".into()),
                ("A".into(), "2".into())
            ]
        );
        assert_eq!(
            search_path(&env),
            vec![PathBuf::from("/opt/venv/bin"), PathBuf::from("/usr/bin")]
        );
        assert_eq!(search_path(&[]).len(), fs_policy::GUEST_PATH.len());
        assert_eq!(merged(&[], &[])[0].1, fs_policy::GUEST_PATH.join(":"));
        let odd = vec![("PATH".into(), "relative:/a/../b".to_string())];
        assert_eq!(search_path(&odd).len(), fs_policy::GUEST_PATH.len());
    }
}
