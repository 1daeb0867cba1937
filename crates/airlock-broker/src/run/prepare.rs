//! Everything decided before a process exists: size check, interpreter, work dir, executor
//! config. A failure here is a result (`refused` or `error`), never a spawn.
use std::path::PathBuf;

use airlock_executor::{ExecutorConfig, Mode, RlimitSpec};
use airlock_protocol::{ErrorCode, DEFAULT_MAX_MESSAGE_BYTES};

use super::{RunSpec, Workload};
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
    /// Keeps a fresh work dir alive for the run; removed on drop.
    pub _work_dir: Option<tempfile::TempDir>,
}

/// Why nothing was spawned.
#[derive(Debug)]
pub struct NotStarted {
    /// The error code to report.
    pub code: ErrorCode,
    /// What happened and how to fix it.
    pub message: String,
}

fn not_started(code: ErrorCode, message: impl Into<String>) -> NotStarted {
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

pub(crate) async fn prepare(spec: &RunSpec) -> Result<Prepared, NotStarted> {
    let (work_dir, keep) = match &spec.work_dir {
        Some(dir) => {
            let dir = std::fs::canonicalize(dir).map_err(|e| {
                not_started(
                    ErrorCode::SandboxRefused,
                    format!("work dir {}: {e}", dir.display()),
                )
            })?;
            if !dir.is_dir() {
                let msg = format!("work dir {} is not a directory", dir.display());
                return Err(not_started(ErrorCode::SandboxRefused, msg));
            }
            (dir, None)
        }
        None => {
            let tmp = tempfile::Builder::new()
                .prefix("airlock-run-")
                .tempdir()
                .map_err(|e| {
                    not_started(
                        ErrorCode::SandboxRefused,
                        format!("cannot create a work dir: {e}"),
                    )
                })?;
            let dir = std::fs::canonicalize(tmp.path())
                .map_err(|e| not_started(ErrorCode::SandboxRefused, e.to_string()))?;
            (dir, Some(tmp))
        }
    };
    let mut sys_path = Vec::new();
    let (mode, fs, code) = match &spec.workload {
        Workload::Python { code, interpreter } => {
            if !program_fits(code) {
                let msg = format!(
                    "program too large: {} bytes does not fit the {} byte message cap",
                    code.len(),
                    DEFAULT_MAX_MESSAGE_BYTES
                );
                return Err(not_started(ErrorCode::ProgramTooLarge, msg));
            }
            let interp = interpreter::discover(interpreter.as_deref())
                .await
                .map_err(|e| not_started(ErrorCode::SandboxRefused, e.to_string()))?;
            let fs = fs_policy::for_python(&interp, &work_dir);
            sys_path = interp
                .path
                .iter()
                .filter(|p| p.is_absolute())
                .cloned()
                .collect();
            (
                Mode::Python {
                    interpreter: interp.executable,
                    bootstrap: Some(interp.bootstrap),
                },
                fs,
                Some(code.clone()),
            )
        }
        Workload::Command { argv } => {
            let first = argv
                .first()
                .ok_or_else(|| not_started(ErrorCode::InvalidParams, "empty command"))?;
            let program = interpreter::which(first)
                .and_then(|p| std::fs::canonicalize(p).ok())
                .ok_or_else(|| {
                    not_started(
                        ErrorCode::SandboxRefused,
                        format!("command not found: {first}"),
                    )
                })?;
            let fs = fs_policy::for_command(&program, &work_dir);
            (
                Mode::Command {
                    program,
                    argv: argv.clone(),
                },
                fs,
                None,
            )
        }
    };
    let limits = &spec.limits;
    let config = ExecutorConfig {
        mode,
        work_dir,
        env: super::egress::guest_env(&spec.env, &limits.egress),
        rlimits: RlimitSpec {
            address_space: Some(limits.address_space_backstop()),
            file_size: Some(limits.max_file_bytes),
            open_files: Some(limits.max_open_files),
            processes: Some(limits.max_processes),
        },
        fs,
        hostname: "airlock".into(),
        egress_proxy_port: super::egress::proxy_port(&limits.egress)?,
    };
    Ok(Prepared {
        config,
        code,
        sys_path,
        executor: spec.executor.clone(),
        _work_dir: keep,
    })
}
