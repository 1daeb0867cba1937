//! airlock inside a container (rootful podman, runc): with the minimal settings of
//! docs/deploy.md a program runs and a host-file attack fails, as the container's root and as
//! a non-root user; with less, every run is refused with the missing setting named, and
//! `doctor` says so too. Needs root, podman, runc and mmdebstrap (scripts/test.sh installs them);
//! the image is built once per machine (scripts/test-image.sh).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failed unwrap is a failed test, with its location"
)]

#[path = "container/support.rs"]
mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value;
use support::{minimal, podman, seccomp_profile, tagged, Broker, BROKERS, RUN};

/// A directory the container sees at /test (readable by the non-root broker), holding
/// `prog.py` and any other `files`.
fn test_dir(prog: &str, files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for (name, text) in [("prog.py", prog)].iter().chain(files) {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    dir
}

fn run_result(out: &std::process::Output) -> (Value, i64) {
    let run = tagged(out, "RUN");
    let rc = tagged(out, "RC")["rc"].as_i64().unwrap();
    (run, rc)
}

#[test]
fn a_python_program_runs_with_the_minimal_settings() {
    let prog = "import socket\nprint(sum(i * i for i in range(1000)), socket.gethostname())\n";
    for broker in BROKERS {
        let dir = test_dir(prog, &[]);
        let out = podman(broker, &minimal(broker, dir.path()), dir.path(), RUN);
        let (run, rc) = run_result(&out);
        assert_eq!(run["status"], "completed", "{broker:?}: {run}");
        assert_eq!(run["stdout"], "332833500 airlock\n", "{broker:?}: {run}");
        assert_eq!(rc, 0, "{broker:?}: {run}");
        let layers = run["enforcement"].to_string();
        assert!(layers.contains("sandbox_root"), "{broker:?}: {run}");
    }
}

/// Tries every metadata and content change on two files of the container's root: one owned by
/// root, one by the non-root broker's uid. Prints what each attempt returned.
const ATTACK: &str = r#"
import errno, json, os
res = {}
for name in ("airlock-victim-root", "airlock-victim-broker"):
    p = "/usr/local/share/" + name
    tries = {
        "chmod": lambda: os.chmod(p, 0o4777),
        "utime": lambda: os.utime(p, (0, 0)),
        "chown": lambda: os.chown(p, os.getuid(), os.getgid()),
        "setxattr": lambda: os.setxattr(p, "user.airlock", b"1"),
        "truncate": lambda: open(p, "w").close(),
        "rename": lambda: os.rename(p, p + ".moved"),
        "unlink": lambda: os.unlink(p),
    }
    out = {}
    for what, attempt in tries.items():
        try:
            attempt()
            out[what] = "ok"
        except OSError as e:
            out[what] = errno.errorcode.get(e.errno, str(e.errno))
    res[name] = out
print(json.dumps(res))
"#;

/// Everything about the victims, read outside the sandbox (in the container, as root).
const SNAPSHOT: &str = r#"
import hashlib, json, os
out = {}
for name in ("airlock-victim-root", "airlock-victim-broker"):
    p = "/usr/local/share/" + name
    st = os.lstat(p)
    out[name] = {
        "mode": oct(st.st_mode), "uid": st.st_uid, "gid": st.st_gid,
        "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
        "sha256": hashlib.sha256(open(p, "rb").read()).hexdigest(),
        "xattrs": sorted(os.listxattr(p)),
    }
out["others"] = sorted(n for n in os.listdir("/usr/local/share") if n.startswith("airlock-"))
print(json.dumps(out, sort_keys=True))
"#;

#[test]
fn a_host_file_attack_fails_inside_the_container() {
    let prepare = format!(
        "v=/usr/local/share/airlock-victim; \
         printf 'secret\\n' > $v-root; chmod 600 $v-root; touch -d @1000000000 $v-root; \
         cp -p $v-root $v-broker; chown {u}:{u} $v-broker; \
         printf 'BEFORE '; python3 /test/snapshot.py; \
         {RUN}; \
         printf 'AFTER '; python3 /test/snapshot.py",
        u = support::CONTAINER_USER
    );
    for broker in BROKERS {
        let dir = test_dir(ATTACK, &[("snapshot.py", SNAPSHOT)]);
        let out = podman(broker, &minimal(broker, dir.path()), dir.path(), &prepare);
        let (run, rc) = run_result(&out);
        // The attack ran to its end (the sandbox was up), and every attempt failed...
        assert_eq!(run["status"], "completed", "{broker:?}: {run}");
        assert_eq!(rc, 0, "{broker:?}: {run}");
        let tries: Value = serde_json::from_str(run["stdout"].as_str().unwrap()).unwrap();
        for (victim, results) in tries.as_object().unwrap() {
            for (what, result) in results.as_object().unwrap() {
                assert_ne!(
                    result, "ok",
                    "{broker:?}: {what} on {victim} worked: {tries}"
                );
            }
        }
        // ...which the files, read from outside the sandbox, confirm.
        let (before, after) = (tagged(&out, "BEFORE"), tagged(&out, "AFTER"));
        assert_eq!(before, after, "{broker:?}: attempts: {tries}");
        assert_eq!(before["airlock-victim-root"]["mode"], "0o100600");
        let others = &after["others"];
        assert_eq!(others.as_array().unwrap().len(), 2, "{broker:?}: {others}");
    }
}

/// Each broker under settings that lack something, and what the refusal must name.
fn insufficient(dir: &Path) -> Vec<(Broker, Vec<String>, &'static str)> {
    let opt = |s: &[&str]| s.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
    let seccomp = format!("seccomp={}", seccomp_profile(dir).display());
    vec![
        (Broker::Root, vec![], "--cap-add SYS_ADMIN"),
        (
            Broker::Root,
            opt(&["--security-opt", "systempaths=unconfined"]),
            "--cap-add SYS_ADMIN",
        ),
        (
            Broker::Root,
            opt(&["--cap-add", "SYS_ADMIN"]),
            "systempaths=unconfined",
        ),
        (Broker::User, vec![], "systempaths=unconfined"),
        (
            Broker::User,
            vec!["--security-opt".into(), seccomp],
            "systempaths=unconfined",
        ),
        (
            Broker::User,
            opt(&["--security-opt", "systempaths=unconfined"]),
            "seccomp profile denies sethostname",
        ),
    ]
}

#[test]
fn less_than_the_minimal_settings_is_refused_naming_what_is_missing() {
    let dir = test_dir("print('the program ran')\n", &[]);
    for (broker, settings, names) in insufficient(dir.path()) {
        let out = podman(broker, &settings, dir.path(), RUN);
        let (run, rc) = run_result(&out);
        let why = format!("{broker:?} with {settings:?}: {run}");
        assert_eq!(run["status"], "refused", "{why}");
        assert_eq!(rc, 126, "{why}");
        assert_eq!(run["stdout"], "", "{why}");
        let message = run["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(names), "must name {names:?}: {why}");
    }
}

fn doctor(broker: Broker, settings: &[String], dir: &Path) -> Vec<Value> {
    let out = podman(
        broker,
        settings,
        dir,
        "printf 'DOCTOR '; $AS airlock doctor --json | tr -d '\\n'",
    );
    tagged(&out, "DOCTOR").as_array().unwrap().clone()
}

fn layer<'a>(layers: &'a [Value], name: &str) -> &'a Value {
    layers.iter().find(|l| l["layer"] == name).unwrap()
}

#[test]
fn doctor_in_a_container_names_the_settings_and_agrees_with_runs() {
    let dir = test_dir("", &[]);
    for broker in BROKERS {
        let default = doctor(broker, &[], dir.path());
        let mountns = layer(&default, "mountns");
        assert_eq!(mountns["available"], false, "{broker:?}: {mountns}");
        assert!(mountns["fix"]
            .as_str()
            .unwrap()
            .contains("systempaths=unconfined"));
        let utsns = layer(&default, "utsns");
        assert_eq!(utsns["available"], false, "{broker:?}: {utsns}");
        assert!(utsns["fix"].as_str().unwrap().contains("seccomp profile"));
        // A root broker cannot even clone the system directories; a non-root one assembles
        // its root (the run's own /proc is mounted later, which mountns covers).
        let root = layer(&default, "sandbox_root");
        assert_eq!(
            root["available"],
            broker == Broker::User,
            "{broker:?}: {root}"
        );
        if broker == Broker::Root {
            assert!(root["detail"]
                .as_str()
                .unwrap()
                .contains("--cap-add SYS_ADMIN"));
            assert!(root["fix"].as_str().unwrap().contains("docs/deploy.md"));
        }

        let enough = doctor(broker, &minimal(broker, dir.path()), dir.path());
        for name in [
            "userns",
            "netns",
            "pidns",
            "utsns",
            "mountns",
            "sandbox_root",
        ] {
            let l = layer(&enough, name);
            assert_eq!(l["available"], true, "{broker:?}: {l}");
        }
    }
}
