//! Running the real `airlock` binary inside a rootful podman container (runc), built from a
//! Debian root that `scripts/test-image.sh` makes with mmdebstrap and caches.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

/// The uid/gid a non-root broker has inside the container (one no host account is likely to
/// use, so no other process counts against its RLIMIT_NPROC).
pub const CONTAINER_USER: u32 = 4100;

/// Who runs `airlock` inside the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broker {
    /// The container's root (the broker maps its sandboxes to an unprivileged uid).
    Root,
    /// [`CONTAINER_USER`], no capabilities (what `podman run --user` gives).
    User,
}

pub const BROKERS: [Broker; 2] = [Broker::Root, Broker::User];

const INSTALL: &str = "as root: apt-get install -y podman runc mmdebstrap (scripts/test.sh and \
                       scripts/test-image.sh do)";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// The cached image (built on first use), or a failed test saying what to install.
pub fn image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| {
        assert!(
            is_root(),
            "the container test runs rootful podman and must run as root ({INSTALL})"
        );
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/test-image.sh"))
            .output()
            .unwrap_or_else(|e| panic!("running scripts/test-image.sh: {e}"));
        assert!(
            out.status.success(),
            "building the container image failed ({INSTALL}):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let runc = Command::new("runc").arg("--version").output();
        assert!(
            runc.is_ok_and(|o| o.status.success()),
            "runc is missing ({INSTALL})"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let image = stdout.lines().last().unwrap_or_default().trim().to_string();
        assert!(image.starts_with("localhost/"), "no image: {stdout}");
        image
    })
}

/// podman's default seccomp profile with `sethostname` allowed unconditionally: the one
/// syscall airlock needs that the default denies to a container without CAP_SYS_ADMIN.
pub fn seccomp_profile(dir: &Path) -> PathBuf {
    let default = "/usr/share/containers/seccomp.json";
    let text = std::fs::read_to_string(default)
        .unwrap_or_else(|e| panic!("{default} (podman's default profile): {e} ({INSTALL})"));
    let mut profile: Value = serde_json::from_str(&text).unwrap();
    let rules = profile["syscalls"].as_array_mut().unwrap();
    for rule in rules.iter_mut() {
        if let Some(names) = rule["names"].as_array_mut() {
            names.retain(|n| n != "sethostname");
        }
    }
    rules.retain(|r| r["names"].as_array().is_some_and(|n| !n.is_empty()));
    rules.push(serde_json::json!({"names": ["sethostname"], "action": "SCMP_ACT_ALLOW"}));
    let path = dir.join("airlock-seccomp.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&profile).unwrap()).unwrap();
    path
}

/// The least each broker needs (docs/deploy.md, "Running airlock inside a container").
pub fn minimal(broker: Broker, dir: &Path) -> Vec<String> {
    let mut opts = vec!["--security-opt".into(), "systempaths=unconfined".into()];
    match broker {
        Broker::Root => opts.extend(["--cap-add".into(), "SYS_ADMIN".into()]),
        Broker::User => opts.extend([
            "--security-opt".into(),
            format!("seccomp={}", seccomp_profile(dir).display()),
        ]),
    }
    opts
}

/// Runs `script` with `sh -eu` as the container's root, `settings` added to podman's defaults,
/// the binary under test at /usr/local/bin/airlock and `dir` at /test (both read-only).
/// `$AS` in the script runs a command as the broker.
pub fn podman(broker: Broker, settings: &[String], dir: &Path, script: &str) -> Output {
    let image = image();
    let user = CONTAINER_USER;
    let as_broker = match broker {
        Broker::Root => String::new(),
        Broker::User => format!("setpriv --reuid={user} --regid={user} --clear-groups --"),
    };
    let out = Command::new("podman")
        .args(["--runtime", "runc", "run", "--rm", "--network", "none"])
        .args(["--timeout", "120"])
        // Below the caller's own limits: podman's defaults raise them, which a root without
        // CAP_SYS_RESOURCE (as in some CI sandboxes) may not do.
        .args([
            "--ulimit",
            "nofile=4096:4096",
            "--ulimit",
            "nproc=4096:4096",
        ])
        .arg("-v")
        .arg(format!(
            "{}:/usr/local/bin/airlock:ro",
            env!("CARGO_BIN_EXE_airlock")
        ))
        .arg("-v")
        .arg(format!("{}:/test:ro", dir.display()))
        .args(["--env", &format!("AS={as_broker}"), "--env", "HOME=/tmp"])
        .args(settings)
        .args([image, "sh", "-euc", script])
        .output()
        .unwrap_or_else(|e| panic!("podman: {e} ({INSTALL})"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("OCI runtime") && !stderr.contains("runc create failed"),
        "the container did not start:\n{stderr}"
    );
    out
}

/// The JSON after the first line starting `tag `.
pub fn tagged(out: &Output, tag: &str) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{tag} ")))
        .unwrap_or_else(|| {
            panic!(
                "no {tag} line in:\n{stdout}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{tag} {line}: {e}"))
}

/// The shell that runs `airlock run --json /test/prog.py` as the broker and prints
/// `RUN <result>` and `RC <exit status>`.
pub const RUN: &str = "printf 'RUN '; rc=0; $AS airlock run --json /test/prog.py || rc=$?; \
                       echo; echo \"RC {\\\"rc\\\": $rc}\"";
