//! Finding the interpreter inside an image.
//!
//! An image's interpreter is not trusted: it never runs on the host. Discovery runs the probe
//! as a command in a throwaway sandbox on the image (the same isolation as any run, exec
//! filter included), reads its answer with the run's output cap, and keeps only guest paths
//! that are plain and absolute: a lying probe can describe only its own sandbox. The answer is
//! cached in memory and as a note in the image store, keyed by the image's root (which never
//! changes) and the probe and bootstrap it was made with.
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use airlock_image::digest::Digest;
use airlock_image::Image;
use serde::{Deserialize, Serialize};

use airlock_executor::DataBounds;
use futures_util::future::BoxFuture;

use crate::image_env::merged;
use crate::interpreter::InterpreterError;
use crate::interpreter_facts::Interpreter;
use crate::limits::Limits;
use crate::result::{RunResult, RunStatus};
use crate::run::spec::{RunSpec, Workload};
use crate::sandbox_fs::{RootSpec, SandboxFs};

/// How the probe runs: a whole run of a command, without tools, to its one result (the run
/// itself, `airlock_broker::run`). A function value, passed in by whoever prepares a run, because
/// preparing a run on an image needs this answer first.
pub type RunProbe = fn(RunSpec) -> BoxFuture<'static, RunResult>;

/// The probe: the same facts as the host probe, the bootstrap source from argv (an exec-mode
/// run has no stdin), the executable with its links resolved inside the sandbox.
const PROBE: &str = "import sys, os, json, marshal; src = sys.argv[1]; \
code = marshal.dumps(compile(src, '<airlock-bootstrap>', 'exec', dont_inherit=True)); \
print(json.dumps({'executable': os.path.realpath(sys.executable), \
'prefixes': sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}), \
'path': [p for p in sys.path if p], 'version': list(sys.version_info[:3]), \
'bootstrap': code.hex()}))";

/// The probe prints a few tens of KiB (the compiled bootstrap, hex).
const PROBE_OUTPUT_CAP: usize = 512 * 1024;
/// A compiled bootstrap larger than this (hex digits) is not used; the source runs instead.
const MAX_BOOTSTRAP_HEX: usize = 120 * 1024;

/// What a note holds: the answer, and what it was made with.
#[derive(Debug, Serialize, Deserialize)]
struct Note {
    made_with: String,
    interpreter: Interpreter,
}

type Key = (String, String);

fn cache() -> &'static Mutex<HashMap<Key, Interpreter>> {
    static CACHE: OnceLock<Mutex<HashMap<Key, Interpreter>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The digest of what an answer depends on besides the image.
fn made_with() -> String {
    Digest::of(format!("{PROBE}\n{}", airlock_executor::BOOTSTRAP_PY).as_bytes()).to_string()
}

fn note_key(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(100)
        .collect();
    format!("interpreter-{clean}")
}

/// The interpreter `requested` (a name on the image's PATH or a guest path; `python3` when
/// None) of `image`, probed in a throwaway sandbox run by `executor`, the run made by `run`.
pub async fn discover(
    image: &Arc<Image>,
    requested: Option<&Path>,
    executor: &Path,
    run: RunProbe,
) -> Result<Interpreter, InterpreterError> {
    let name = requested.map_or("python3".into(), |p| p.to_string_lossy().into_owned());
    let key = (image.id.clone(), name.clone());
    if let Some(found) = cache().lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(found);
    }
    let made = made_with();
    let noted = image
        .note(&note_key(&name))
        .and_then(|b| serde_json::from_slice::<Note>(&b).ok())
        .filter(|n| n.made_with == made)
        .and_then(|n| checked(n.interpreter).ok());
    let found = match noted {
        Some(i) => i,
        None => {
            let i = probe(image, &name, executor, run).await?;
            let note = serde_json::to_vec(&Note {
                made_with: made,
                interpreter: i.clone(),
            });
            if let Ok(bytes) = note {
                let _ = image.keep_note(&note_key(&name), &bytes);
            }
            i
        }
    };
    if let Ok(mut c) = cache().lock() {
        c.insert(key, found.clone());
    }
    Ok(found)
}

async fn probe(
    image: &Arc<Image>,
    name: &str,
    executor: &Path,
    run: RunProbe,
) -> Result<Interpreter, InterpreterError> {
    let not_cpython = |detail: String| InterpreterError::NotCpython {
        path: format!("{name} in image {}", image.name),
        detail,
    };
    let limits = Limits {
        timeout: Duration::from_secs(20),
        max_output_bytes: PROBE_OUTPUT_CAP,
        ..Limits::default()
    };
    let data = DataBounds {
        bytes: 16 << 20,
        inodes: 1024,
    };
    let fs = SandboxFs::create(executor, RootSpec::of_image(Arc::clone(image), data))
        .await
        .map_err(|e| not_cpython(e.to_string()))?;
    let spec = RunSpec {
        workload: Workload::Command {
            argv: vec![
                name.to_owned(),
                "-I".into(),
                "-c".into(),
                PROBE.into(),
                airlock_executor::BOOTSTRAP_PY.into(),
            ],
        },
        limits,
        sandbox: Some(Arc::new(fs)),
        image: None,
        cwd: None,
        env: merged(&image.config.env, &[]),
        executor: executor.to_path_buf(),
        output: None,
        restricted: None,
    };
    let r = run(spec).await;
    if r.status != RunStatus::Completed || r.exit_code != Some(0) || r.stdout_truncated {
        if command_not_found(&r) {
            return Err(InterpreterError::NotFoundInImage {
                name: name.to_owned(),
                image: image.name.clone(),
            });
        }
        let why = r
            .error
            .as_ref()
            .map_or(r.stderr.as_str(), |e| e.message.as_str());
        let why: String = why.chars().take(500).collect();
        return Err(not_cpython(format!(
            "the probe ended {}: {why}",
            r.status.as_str()
        )));
    }
    let found: Interpreter =
        serde_json::from_str(&r.stdout).map_err(|e| not_cpython(e.to_string()))?;
    checked(found).map_err(not_cpython)
}

/// Whether the probe never started because its command is not in the image (the run's
/// `not_found`, before any process).
fn command_not_found(r: &RunResult) -> bool {
    let not_started = r.exit_code.is_none() && r.signal.is_none();
    not_started
        && r.error
            .as_ref()
            .is_some_and(|e| e.code == airlock_protocol::ErrorCode::NotFound.code())
}

/// Keeps an answer only when every path in it is a plain absolute guest path.
fn checked(mut i: Interpreter) -> Result<Interpreter, String> {
    let plain = |p: &PathBuf| airlock_image::config::is_plain_absolute(&p.to_string_lossy());
    if !plain(&i.executable) || !i.prefixes.iter().all(plain) {
        return Err("the probe named a path that is not a plain absolute guest path".into());
    }
    i.path.retain(plain);
    if i.version.first() != Some(&3) {
        return Err(format!("version {:?}", i.version));
    }
    let hex_ok = i.bootstrap.len() <= MAX_BOOTSTRAP_HEX
        && i.bootstrap.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex_ok {
        i.bootstrap.clear();
    }
    Ok(i)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn a_lying_probe_is_refused_or_trimmed() {
        let good = Interpreter {
            executable: "/usr/bin/python3.11".into(),
            prefixes: vec!["/usr".into()],
            path: vec![
                "/usr/lib/python3.11".into(),
                "relative".into(),
                "/a/../b".into(),
            ],
            version: vec![3, 11, 2],
            bootstrap: "zz".into(),
        };
        let c = checked(good.clone()).unwrap();
        assert_eq!(c.path, vec![PathBuf::from("/usr/lib/python3.11")]);
        assert_eq!(c.bootstrap, "");
        let mut bad = good.clone();
        bad.executable = "/usr/../../etc".into();
        assert!(checked(bad).is_err());
        let mut bad = good;
        bad.version = vec![2, 7];
        assert!(checked(bad).is_err());
    }
}
