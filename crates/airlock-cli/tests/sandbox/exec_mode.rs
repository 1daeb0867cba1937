//! `airlock exec`: commands run under the same layers, with process creation allowed.
use super::support::*;

#[test]
fn a_command_runs_and_its_exit_code_is_reported() {
    for who in identities() {
        let v = exec(
            who,
            &["/bin/sh", "-c", "echo hi; ls / >/dev/null; exit 3"],
            &[],
        );
        assert_eq!(status(&v), "error", "{v}");
        assert_eq!(v["stdout"], "hi\n");
        assert_eq!(v["exit_code"], 3);
        let v = exec(who, &["echo", "resolved", "on", "PATH"], &[]);
        assert_completed(&v);
        assert_eq!(v["stdout"], "resolved on PATH\n");
    }
}

#[test]
fn commands_cannot_read_secrets_or_escape_the_work_dir() {
    for who in identities() {
        let secret = private_file(who, "exec-secret");
        let s = secret.to_str().unwrap();
        let script = format!("cat {s} /etc/shadow 2>&1; touch /tmp/airlock-exec-escape 2>&1; echo ok > here; cat here");
        let v = exec(who, &["/bin/sh", "-c", &script], &[]);
        let out = v["stdout"].as_str().unwrap();
        assert!(!out.contains("exec-secret"), "{out}");
        assert!(out.ends_with("ok\n"), "{out}");
        assert!(!std::path::Path::new("/tmp/airlock-exec-escape").exists());
        std::fs::remove_file(secret).unwrap();
    }
}

#[test]
fn exec_mode_still_forbids_namespace_and_ptrace_syscalls() {
    for who in identities() {
        let v = exec(who, &["/usr/bin/unshare", "-U", "true"], &[]);
        assert_eq!(status(&v), "killed", "{v}");
        assert_eq!(v["signal"], 31, "{v}");
    }
}

#[test]
fn an_unknown_command_is_not_found_before_anything_starts() {
    let v = exec(As::Me, &["definitely-not-a-command-xyz"], &[]);
    assert_eq!(status(&v), "error", "{v}");
    assert_eq!(v["error"]["code"], -32016, "not_found: {v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not found"),
        "{v}"
    );
}

#[test]
fn doctor_lists_every_layer() {
    for who in identities() {
        let out = airlock(who, &["doctor", "--json"], "");
        assert!(out.status.success());
        let layers: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let names: Vec<&str> = layers
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|l| l["layer"].as_str())
            .collect();
        for want in [
            "userns",
            "netns",
            "seccomp",
            "landlock",
            "sandbox_root",
            "kvm",
        ] {
            assert!(
                names.iter().any(|n| n.contains(want)),
                "{want} missing from {names:?}"
            );
        }
        for l in layers.as_array().unwrap() {
            if l["available"] == false {
                assert!(l["fix"].is_string(), "missing layer without a fix: {l}");
            }
        }
        // Every run here assembles a root, so the probe must find it, with the bound it set
        // and the identity the runs get.
        let root = layers
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["layer"] == "sandbox_root")
            .unwrap();
        assert_eq!(root["available"], true, "{root}");
        let detail = root["detail"].as_str().unwrap();
        assert!(detail.contains("bounded at 8 MiB"), "{detail}");
        let owns_nothing = detail.contains("(owns nothing)");
        assert_eq!(
            owns_nothing,
            who == As::Me && is_root(),
            "{who:?}: {detail}"
        );
    }
}

/// The broker's runtime ignores SIGPIPE, and an ignored disposition survives execve: a
/// command starts with every signal at its default and none blocked, so a pipeline's writer
/// dies quietly when its reader goes (no "Broken pipe" from `yes`).
#[test]
fn a_command_starts_with_default_signal_dispositions() {
    for who in identities() {
        let v = exec(who, &["/bin/cat", "/proc/self/status"], &[]);
        assert_completed(&v);
        let status = v["stdout"].as_str().unwrap();
        for field in ["SigIgn", "SigBlk"] {
            let line = status
                .lines()
                .find(|l| l.starts_with(field))
                .unwrap_or_else(|| panic!("no {field} in {status}"));
            assert!(line.ends_with("0000000000000000"), "{line}");
        }
        let v = exec(who, &["/bin/sh", "-c", "yes | head -n 1"], &[]);
        assert_completed(&v);
        assert_eq!(v["stdout"], "y\n");
        assert_eq!(v["stderr"], "", "{v}");
    }
}
