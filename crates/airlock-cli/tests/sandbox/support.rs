//! Driving the real binary, as root and as an unprivileged user.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failed unwrap is a failed test, with its location"
)]
use std::cell::Cell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{OnceLock, RwLock, RwLockWriteGuard};

use serde_json::Value;

/// The unprivileged account the suite runs as when it is started as root (created by
/// scripts/test.sh).
pub const TEST_USER: &str = "airlock-test";

/// Who runs the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum As {
    /// The user running the tests.
    Me,
    /// `airlock-test`, via runuser (only when the suite runs as root).
    User,
}

pub fn is_root() -> bool {
    // The effective uid, read without unsafe.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// Every identity a security test must hold for.
pub fn identities() -> Vec<As> {
    if !is_root() {
        return vec![As::Me];
    }
    let exists = Command::new("id")
        .arg(TEST_USER)
        .output()
        .map(|o| o.status.success());
    assert!(
        exists.unwrap_or(false),
        "running as root: the rootless path must be tested too; create the user with \
         `useradd -m {TEST_USER}` (scripts/test.sh does)"
    );
    vec![As::Me, As::User]
}

/// A copy of the binary every user can execute (the build dir may sit under /root). One copy
/// per build, shared by every test process (named by the build's size and time), so test runs
/// do not pile up copies; scripts/test.sh removes its temporary directory at the end.
pub fn binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let src = PathBuf::from(env!("CARGO_BIN_EXE_airlock"));
        let meta = std::fs::metadata(&src).unwrap();
        let build = format!("{}-{}-{}", meta.len(), meta.mtime(), meta.mtime_nsec());
        let dir = std::env::temp_dir().join(format!("airlock-test-bin-{build}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let dst = dir.join("airlock");
        copy_beside(&src, &dst);
        // The zygote's library ships beside the binary (the zygote pass needs it).
        let lib = src.with_file_name("libairlock_zygote.so");
        if lib.exists() {
            copy_beside(&lib, &dir.join("libairlock_zygote.so"));
        }
        dst
    })
}

/// Copy `src` to `dst` (mode 0755) unless a copy of its size is there: copied aside, then
/// renamed, so a concurrent test process sees all of it or none.
fn copy_beside(src: &Path, dst: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let len = std::fs::metadata(src).unwrap().len();
    if std::fs::metadata(dst).ok().map(|m| m.len()) == Some(len) {
        return;
    }
    let name = dst.file_name().unwrap().to_string_lossy();
    let part = dst.with_file_name(format!("{name}.{}", std::process::id()));
    std::fs::copy(src, &part).unwrap();
    std::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&part, dst).unwrap();
}

/// The interpreter each identity uses (the user cannot reach a pyenv under /root).
pub fn python_for(who: As) -> Option<&'static str> {
    match who {
        As::Me => None,
        As::User => Some("/usr/bin/python3"),
    }
}

pub fn command(who: As) -> Command {
    match who {
        As::Me => {
            let mut c = Command::new(binary());
            c.env("AIRLOCK_TEST_BROKER_SECRET", "broker-secret-7f3a");
            c
        }
        As::User => {
            let mut c = Command::new("runuser");
            c.args([
                "-u",
                TEST_USER,
                "--",
                "env",
                "-i",
                "PATH=/usr/local/bin:/usr/bin:/bin",
            ])
            .arg(format!("HOME=/home/{TEST_USER}"))
            .arg("AIRLOCK_TEST_BROKER_SECRET=broker-secret-7f3a")
            .arg(binary());
            c
        }
    }
}

static RUNS: RwLock<()> = RwLock::new(());
thread_local! {
    static EXCLUSIVE: Cell<bool> = const { Cell::new(false) };
}

/// Hold this to be the only test running sandboxes (so "no survivors" checks see only yours).
pub struct Exclusive(
    #[allow(dead_code, reason = "held for its drop")] RwLockWriteGuard<'static, ()>,
);

impl Drop for Exclusive {
    fn drop(&mut self) {
        EXCLUSIVE.with(|e| e.set(false));
    }
}

pub fn exclusive() -> Exclusive {
    let guard = RUNS.write().unwrap_or_else(|e| e.into_inner());
    EXCLUSIVE.with(|e| e.set(true));
    Exclusive(guard)
}

/// Whether this pass holds the zygote path to the suite: `AIRLOCK_TEST_ZYGOTE=1` makes every
/// `airlock run` fork its run from a zygote (`--zygote`, the path `serve` and `mcp` take by
/// default); the test command runs the suite once each way.
pub fn zygote_pass() -> bool {
    std::env::var_os("AIRLOCK_TEST_ZYGOTE").is_some_and(|v| v == "1")
}

/// Run `airlock <args>` with `stdin`, returning the raw output.
pub fn airlock(who: As, args: &[&str], stdin: &str) -> Output {
    let mut args = args.to_vec();
    if zygote_pass() && args.first() == Some(&"run") {
        args.insert(1, "--zygote");
    }
    let _shared = if EXCLUSIVE.with(Cell::get) {
        None
    } else {
        Some(RUNS.read().unwrap_or_else(|e| e.into_inner()))
    };
    let mut child = command(who)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn airlock");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `airlock run --json [extra] -` with `code`; returns the one JSON object it prints.
pub fn run_py(who: As, code: &str, extra: &[&str]) -> Value {
    let mut args = vec!["run", "--json"];
    if let Some(p) = python_for(who) {
        args.extend(["--python", p]);
    }
    args.extend_from_slice(extra);
    args.push("-");
    let out = airlock(who, &args, code);
    let v = parse_one(&out);
    // The zygote pass really takes the zygote path: a Python run on the host's interpreter
    // that got as far as running was forked.
    if zygote_pass() && !extra.contains(&"--image") && v["exit_code"].is_number() {
        assert_eq!(v["via"], "zygote", "the zygote pass exec'd a run: {v}");
    }
    v
}

/// `airlock exec --json [extra] -- argv...`.
pub fn exec(who: As, argv: &[&str], extra: &[&str]) -> Value {
    let mut args = vec!["exec", "--json"];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(argv);
    let out = airlock(who, &args, "");
    parse_one(&out)
}

fn parse_one(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "expected exactly one JSON line, got {stdout:?}; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(lines[0]).expect("valid JSON")
}

pub fn status(v: &Value) -> &str {
    v["status"].as_str().unwrap_or("<none>")
}

/// Assert the run completed, printing the whole result otherwise.
pub fn assert_completed(v: &Value) {
    assert_eq!(status(v), "completed", "run did not complete: {v:#}");
}

/// A unique marker to tag a run's processes with, and find survivors by.
pub fn marker(tag: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "airlock-marker-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// What a Python guest's command line holds: the loader that reads the bootstrap's code object
/// (`airlock-executor`'s interpreter argv).
pub const GUEST_MARK: &str = "_airlock_load()";

/// Pids of live (non-zombie) processes whose command line contains `marker`.
pub fn survivors(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(format!("{name}: {}", String::from_utf8_lossy(&cmdline)));
        }
    }
    found
}

/// Live Python guests of the binary under test: exec'd ones (their argv holds the loader) and,
/// on the zygote pass, forked ones (their command line is the zygote's, naming the library
/// beside the binary under test) — the zygote of an `airlock run --zygote` included, which
/// must be gone with its run too.
pub fn guests() -> Vec<String> {
    let mut all = survivors(GUEST_MARK);
    let zygote_lib = binary().with_file_name("libairlock_zygote.so");
    all.extend(survivors(&zygote_lib.display().to_string()));
    all
}

/// Any process of a sandbox run: a stage of the binary under test (another checkout's
/// `airlock` on the same machine is not ours), a guest interpreter, or something tagged
/// `marker`.
pub fn run_survivors(marker: &str) -> Vec<String> {
    let mut all = guests();
    all.extend(survivors(&format!("{}\0__executor", binary().display())));
    all.extend(survivors(marker));
    all
}

/// A file only `who` may read, holding `content`; returns its path.
pub fn private_file(who: As, content: &str) -> PathBuf {
    let dir = match who {
        As::Me if is_root() => PathBuf::from("/root"),
        As::Me => PathBuf::from(std::env::var("HOME").unwrap_or("/tmp".into())),
        As::User => PathBuf::from(format!("/home/{TEST_USER}")),
    };
    let path = dir.join(format!(".airlock-secret-{}", marker("secret")));
    std::fs::write(&path, content).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    if who == As::User {
        let st = Command::new("chown")
            .arg(format!("{TEST_USER}:"))
            .arg(&path)
            .status()
            .unwrap();
        assert!(st.success());
    }
    path
}

/// A field of the host's /proc/meminfo (`Shmem`, `SUnreclaim`, ...), in bytes.
pub fn meminfo(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/meminfo").unwrap();
    s.lines()
        .find(|l| l.split(':').next() == Some(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/meminfo"))
        * 1024
}

/// Runs `f` while sampling `field` of the host's /proc/meminfo every 5 ms; returns what `f`
/// returned and the largest growth over the value before it started.
pub fn peak_growth<T>(field: &'static str, f: impl FnOnce() -> T) -> (T, u64) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let base = meminfo(field);
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(Ordering::Relaxed) {
                peak = peak.max(meminfo(field).saturating_sub(base));
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            peak
        })
    };
    let out = f();
    done.store(true, Ordering::Relaxed);
    (out, sampler.join().unwrap())
}
