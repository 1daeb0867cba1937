//! Finding the real CPython binary and the directories it reads, so Landlock can allow exactly
//! those (and numpy from site-packages keeps working) and nothing else of the host.
//!
//! Discovery runs the interpreter once, outside the sandbox, with a fixed probe script (no
//! untrusted code), and caches the answer per path: in memory, and on disk where the caller
//! asked for it ([`use_disk_cache`], see [`crate::interpreter_cache`]).
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde::Deserialize;
use tokio::io::AsyncReadExt;

use crate::interpreter_cache::DiskCache;
pub use crate::interpreter_facts::Interpreter;

/// Also compiles the guest bootstrap (read from stdin) with this very interpreter, so a run
/// hands it over as a code object instead of paying for its compilation every time.
const PROBE: &str = "import sys, json, marshal; src = sys.stdin.read(); \
code = marshal.dumps(compile(src, '<airlock-bootstrap>', 'exec', dont_inherit=True)); \
import site; sites = getattr(site, 'getsitepackages', list)(); \
print(json.dumps({'executable': sys.executable, 'site': sites, \
'prefixes': sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}), \
'path': [p for p in sys.path if p], 'version': list(sys.version_info[:3]), \
'bootstrap': code.hex()}))";

/// The probe prints a few hundred bytes; anything past this is not a CPython answering.
const PROBE_OUTPUT_CAP: u64 = 1024 * 1024;

/// The probe's answer: the interpreter, and the candidate site directories (present or not).
#[derive(Deserialize)]
struct Answer {
    #[serde(flatten)]
    found: Interpreter,
    #[serde(default)]
    site: Vec<PathBuf>,
}

static DISK_CACHE: OnceLock<DiskCache> = OnceLock::new();

/// Keep discovery answers on disk in `dir` as well (a short-lived process, such as the CLI,
/// then probes an interpreter once, not on every start). Only the first call counts.
pub fn use_disk_cache(dir: PathBuf) {
    let _ = DISK_CACHE.set(DiskCache::new(dir, PROBE, airlock_executor::BOOTSTRAP_PY));
}

/// What the probe's stderr may say that is kept (its last line is reported).
const PROBE_STDERR_CAP: u64 = 64 * 1024;

/// The last non-empty line of `bytes`, bounded, if any.
fn last_line(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let line = text.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    Some(line.chars().take(300).collect())
}

/// Why an interpreter could not be used.
#[derive(Debug, thiserror::Error)]
pub enum InterpreterError {
    /// Not found on PATH or not executable.
    #[error("python interpreter {0:?} not found (install python3 or pass --python PATH)")]
    NotFound(String),
    /// Not on the image's PATH, or no such file in the image (the same answer as on the host:
    /// `not_found`, exit 127).
    #[error(
        "python interpreter {name:?} not found in image {image} (pass --python with a name on \
         the image's PATH or a path inside it)"
    )]
    NotFoundInImage {
        /// The interpreter asked.
        name: String,
        /// The image's name.
        image: String,
    },
    /// It ran but did not answer like CPython 3.
    #[error("{path} does not look like CPython 3: {detail}")]
    NotCpython {
        /// The interpreter asked.
        path: String,
        /// What went wrong.
        detail: String,
    },
}

type CacheKey = (PathBuf, Option<(u64, u64, i64, i64)>);

fn cache() -> &'static Mutex<HashMap<CacheKey, Interpreter>> {
    static CACHE: OnceLock<Mutex<HashMap<CacheKey, Interpreter>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Device, inode, size and mtime of what `path` resolves to.
fn identity(path: &Path) -> Option<(u64, u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((
        m.dev(),
        m.ino(),
        i64::try_from(m.size()).unwrap_or(i64::MAX),
        m.mtime_nsec() + m.mtime() * 1_000_000_000,
    ))
}

/// Resolve a command name against PATH (a path with a slash is taken as given).
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Find and probe an interpreter (`python3` on PATH when `requested` is None).
pub async fn discover(requested: Option<&Path>) -> Result<Interpreter, InterpreterError> {
    let name = requested
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or("python3".into());
    let path = which(&name).ok_or_else(|| InterpreterError::NotFound(name.clone()))?;
    // Keyed by the binary's identity too: an upgraded interpreter must not get code objects
    // compiled by its predecessor.
    let key = (path.clone(), identity(&path));
    if let Ok(c) = cache().lock() {
        if let Some(found) = c.get(&key) {
            return Ok(found.clone());
        }
    }
    let disk = DISK_CACHE.get();
    if let Some(found) = disk.and_then(|d| d.get(&path)) {
        remember(key, &found);
        return Ok(found);
    }
    let answer = probe(&path, &name).await?;
    let found = answer.found;
    // Only the interpreter itself is kept on disk: a wrapper (a pyenv shim, a script) may pick
    // another interpreter tomorrow with nothing of its own changed.
    if let Some(d) =
        disk.filter(|_| std::fs::canonicalize(&path).ok() == Some(found.executable.clone()))
    {
        d.put(&path, &found, &answer.site);
    }
    remember(key, &found);
    Ok(found)
}

fn remember(key: CacheKey, found: &Interpreter) {
    if let Ok(mut c) = cache().lock() {
        c.insert(key, found.clone());
    }
}

/// Run the probe (no untrusted code) with the interpreter at `path`.
async fn probe(path: &Path, name: &str) -> Result<Answer, InterpreterError> {
    let not_cpython = |detail: String| InterpreterError::NotCpython {
        path: name.to_string(),
        detail,
    };
    let mut child = tokio::process::Command::new(path)
        .args(["-I", "-c", PROBE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| not_cpython(e.to_string()))?;
    if let Some(mut stdin) = child.stdin.take() {
        use tokio::io::AsyncWriteExt;
        let _ = stdin
            .write_all(airlock_executor::BOOTSTRAP_PY.as_bytes())
            .await;
    }
    let (stdout, stderr) = match (child.stdout.take(), child.stderr.take()) {
        (Some(o), Some(e)) => (o, e),
        _ => return Err(not_cpython("no stdout".into())),
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let read = async {
        let mut o = stdout.take(PROBE_OUTPUT_CAP);
        let mut e = stderr.take(PROBE_STDERR_CAP);
        tokio::try_join!(o.read_to_end(&mut out), e.read_to_end(&mut err))
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .map_err(|_| not_cpython("probe timed out".into()))?
        .map_err(|e| not_cpython(e.to_string()))?;
    let _ = child.wait().await;
    let mut answer: Answer = serde_json::from_slice(&out).map_err(|e| {
        not_cpython(match last_line(&err) {
            // A Python missing part of its standard library (Debian's python3-minimal alone
            // has no json) fails the probe before it prints: say what it said.
            Some(why) => format!("its probe failed: {why} (a minimal Python? install python3)"),
            None => e.to_string(),
        })
    })?;
    let found = &mut answer.found;
    if found.version.first() != Some(&3) {
        return Err(not_cpython(format!("version {:?}", found.version)));
    }
    found.executable = std::fs::canonicalize(&found.executable)
        .map_err(|e| not_cpython(format!("{}: {e}", found.executable.display())))?;
    Ok(answer)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, reason = "tests")]
    use super::*;

    /// An "interpreter" that fails its probe the way Debian's python3-minimal does.
    #[tokio::test]
    async fn a_failing_probe_reports_what_the_interpreter_said() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = dir.path().join("python3");
        let script = "#!/bin/sh\ncat >/dev/null\necho 'Traceback (most recent call last):' >&2\n\
                      echo \"ModuleNotFoundError: No module named 'json'\" >&2\nexit 1\n";
        std::fs::write(&fake, script).expect("write");
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let err = discover(Some(&fake)).await.expect_err("not a CPython");
        let msg = err.to_string();
        assert!(
            msg.contains("No module named 'json'") && !msg.contains("EOF"),
            "{msg}"
        );
    }
}
