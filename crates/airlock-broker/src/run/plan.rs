//! What a run needs decided before its stage exists ([`Plan`]), and the checks and paths the
//! host's plan and an image's plan share: program size, guest working directory, command path.
use std::path::{Component, Path, PathBuf};

use airlock_executor::config::GUEST_WORK_DIR;
use airlock_executor::{FsSpec, Mode};
use airlock_protocol::{ErrorCode, DEFAULT_MAX_MESSAGE_BYTES};

use super::prepared::{not_started, NotStarted};
use crate::sandbox_fs::SandboxFs;
use crate::{fs_policy, interpreter};

/// Envelope headroom kept under the frame cap for an `execute` request around a program.
const EXECUTE_ENVELOPE_BYTES: usize = 1024;

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

/// The absolute entries of a `sys.path`.
pub(super) fn absolute(path: &[PathBuf]) -> Vec<PathBuf> {
    path.iter().filter(|p| p.is_absolute()).cloned().collect()
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

/// The guest's default `PATH` directories.
pub(super) static GUEST_SEARCH: std::sync::LazyLock<Vec<PathBuf>> =
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
