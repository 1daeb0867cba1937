//! What a new user meets first (issue 18's "newcomer polish"), each as that user would try it:
//! `--json` answers every outcome with one object, a missing command is not a refusal, the
//! messages of `--timeout -1`, `--cpus` without a cgroup and `--memory 1`, piped stdin, the
//! README's usage line, and `doctor`'s table and exit code.
use std::process::Output;

use serde_json::Value;

use super::support::*;

const INVALID_PARAMS: i64 = -32602;
const NOT_FOUND: i64 = -32016;

/// The one JSON object `out` printed (more or less than one on stdout fails).
fn one_object(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let values: Vec<Value> = serde_json::Deserializer::from_str(&stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout:?}"));
    assert_eq!(values.len(), 1, "one object, got {stdout:?}");
    assert!(values[0].is_object(), "{stdout}");
    values.into_iter().next().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A program file every identity can read.
fn program_file(code: &str) -> tempfile::TempPath {
    use std::os::unix::fs::PermissionsExt;
    let file = tempfile::Builder::new().suffix(".py").tempfile().unwrap();
    std::fs::write(file.path(), code).unwrap();
    std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    file.into_temp_path()
}

fn with_python(who: As, args: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec![args[0].into()];
    if let Some(p) = python_for(who).filter(|_| args[0] == "run") {
        v.extend(["--python".into(), p.into()]);
    }
    v.extend(args[1..].iter().map(|s| s.to_string()));
    v
}

fn cli(who: As, args: &[&str], stdin: &str) -> Output {
    let args = with_python(who, args);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    airlock(who, &refs, stdin)
}

#[test]
fn json_usage_errors_are_one_object_with_invalid_params() {
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().to_str().unwrap();
    let prog = program_file("print(1)\n");
    let prog = prog.to_str().unwrap();
    let cases: Vec<(&str, Vec<&str>)> = vec![
        (
            "a missing file",
            vec!["run", "--json", "/nonexistent/prog.py"],
        ),
        ("a directory", vec!["run", "--json", dir_path]),
        ("--memory 0", vec!["run", "--json", "--memory", "0", prog]),
        (
            "--timeout -1",
            vec!["run", "--json", "--timeout", "-1", prog],
        ),
        (
            "an unknown flag",
            vec!["run", "--json", "--no-such-flag", prog],
        ),
        (
            "a malformed number",
            vec!["run", "--json", "--memory", "lots", prog],
        ),
        ("exec without a command", vec!["exec", "--json", "--"]),
        (
            "a bad --env",
            vec!["exec", "--json", "--env", "NOEQUALS", "--", "true"],
        ),
    ];
    for who in identities() {
        for (what, args) in &cases {
            let out = cli(who, args, "");
            let v = one_object(&out);
            assert_eq!(status(&v), "error", "{what}: {v}");
            assert_eq!(v["error"]["code"], INVALID_PARAMS, "{what}: {v}");
            assert!(!v["error"]["message"].as_str().unwrap().is_empty());
            assert_eq!(out.status.code(), Some(2), "{what}: {v}");
        }
    }
}

#[test]
fn json_run_outcomes_are_one_object_each() {
    let cases = [
        ("print(6 * 7)", "completed"),
        ("raise SystemExit(3)", "error"),
        ("while True: pass", "timeout"),
    ];
    for who in identities() {
        for (code, want) in cases {
            let timeout = if want == "timeout" { "1" } else { "20" };
            let out = cli(who, &["run", "--json", "--timeout", timeout, "-"], code);
            assert_eq!(status(&one_object(&out)), want, "{code}");
        }
    }
}

#[test]
fn a_timeout_exits_124_and_its_json_says_124() {
    // As the wire, MCP and the SDK report it, whatever the killed process exited with.
    let prog = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
                while True: time.sleep(0.05)";
    for who in identities() {
        for args in [
            &["run", "--json", "--timeout", "1", "-"][..],
            &["exec", "--json", "--timeout", "1", "--", "/bin/sleep", "30"][..],
        ] {
            let out = airlock(who, args, prog);
            let v = one_object(&out);
            assert_eq!(status(&v), "timeout", "{args:?}: {v}");
            assert_eq!(v["exit_code"], 124, "{who:?} {args:?}: {v}");
            assert_eq!(out.status.code(), Some(124), "{who:?} {args:?}: {v}");
        }
    }
}

#[test]
fn a_missing_command_is_not_found_and_exits_127() {
    for who in identities() {
        let out = airlock(who, &["exec", "--json", "--", "no-such-command-xyz"], "");
        let v = one_object(&out);
        assert_eq!(status(&v), "error", "not a refusal: {v}");
        assert_eq!(v["error"]["code"], NOT_FOUND, "{v}");
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("command not found: no-such-command-xyz"));
        assert_eq!(out.status.code(), Some(127), "{v}");
        let plain = airlock(who, &["exec", "--", "./no-such-script"], "");
        assert_eq!(plain.status.code(), Some(127), "{}", stderr(&plain));
        assert!(
            stderr(&plain).contains("command not found"),
            "{}",
            stderr(&plain)
        );
        assert!(!stderr(&plain).contains("refused"), "{}", stderr(&plain));
    }
}

#[test]
fn a_negative_timeout_names_the_range_not_a_double_dash() {
    let prog = program_file("print(1)\n");
    for who in identities() {
        let out = cli(who, &["run", "--timeout", "-1", prog.to_str().unwrap()], "");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(!err.contains("-- -1"), "{err}");
        assert!(
            err.contains("--timeout must be a number of seconds"),
            "{err}"
        );
    }
}

#[test]
fn cpus_without_a_cgroup_is_refused_in_one_sentence() {
    for who in identities() {
        let v = run_py(who, "print(1)", &["--cpus", "0.5"]);
        if status(&v) == "completed" {
            // This identity has a writable cpu cgroup (root, or a delegated subtree).
            assert!(v["enforcement"].to_string().contains("cgroup"), "{v}");
            continue;
        }
        assert_eq!(status(&v), "refused", "{v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.starts_with("--cpus needs a cpu cgroup"), "{msg}");
        // No nested parentheses, no blame on the memory cgroup, no second sentence.
        assert!(!msg.contains('(') && !msg.contains("memory"), "{msg}");
        assert!(
            !msg.contains(". ") && !msg.contains("; "),
            "one sentence: {msg}"
        );
    }
}

#[test]
fn a_memory_limit_too_small_to_start_says_the_interpreter_cannot_start() {
    for who in identities() {
        let v = run_py(who, "print('ran')", &["--memory", "1"]);
        assert_eq!(status(&v), "memory_limit", "{v}");
        assert_eq!(v["stdout"], "", "{v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains("cannot start in 1 MiB"), "{msg}");
        assert!(!msg.contains("the program exceeded"), "{msg}");
    }
    // A program that does start and then allocates past the limit is told it exceeded it.
    let bomb = "x = []\nwhile True:\n    x.append(bytearray(1 << 20))";
    let v = run_py(As::Me, bomb, &["--memory", "64", "--timeout", "20"]);
    assert_eq!(status(&v), "memory_limit", "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("the program exceeded its 64 MiB"), "{msg}");
}

#[test]
fn piped_stdin_is_not_dropped_silently() {
    let prog = program_file("import sys\nprint(repr(sys.stdin.read()))\n");
    let prog = prog.to_str().unwrap();
    for who in identities() {
        for sub in [&["run", prog][..], &["exec", "--", "/bin/cat"][..]] {
            let out = cli(who, sub, "data for the program\n");
            assert!(out.status.success(), "{sub:?}: {}", stderr(&out));
            let err = stderr(&out);
            assert!(
                err.contains("stdin is not passed to the sandbox"),
                "{sub:?}: {err}"
            );
            // And it really was not passed.
            assert!(
                !String::from_utf8_lossy(&out.stdout).contains("data for"),
                "{sub:?}"
            );
        }
        // An empty pipe drops nothing: nothing is said.
        let out = cli(who, &["run", prog], "");
        assert!(
            !stderr(&out).contains("stdin is not passed"),
            "{}",
            stderr(&out)
        );
        // With the program itself on stdin, nothing is dropped and nothing is said.
        let out = cli(who, &["run", "-"], "print('from stdin')");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "from stdin\n");
        assert!(
            !stderr(&out).contains("stdin is not passed"),
            "{}",
            stderr(&out)
        );
    }
}

/// The long flags `airlock SUB --help` lists (without --help and --version).
fn help_flags(sub: &str) -> Vec<String> {
    let out = airlock(As::Me, &[sub, "--help"], "");
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut flags: Vec<String> = help
        .split(|c: char| c.is_whitespace() || c == ',' || c == '=' || c == '[' || c == '<')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric()))
        .filter(|w| *w != "--help" && *w != "--version")
        .map(str::to_string)
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

#[test]
fn the_readmes_usage_line_lists_every_run_flag() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let usage = readme
        .lines()
        .find(|l| l.starts_with("airlock run ["))
        .expect("README has an `airlock run [...]` usage line");
    let flags = help_flags("run");
    assert!(flags.len() > 10, "{flags:?}");
    let missing: Vec<&String> = flags
        .iter()
        .filter(|f| {
            !usage
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .any(|w| w == f.as_str())
        })
        .collect();
    assert!(
        missing.is_empty(),
        "README's usage line lacks {missing:?}: {usage}"
    );
    // `exec` takes the same options (the README says "[same options]"), bar --python.
    let run: Vec<String> = flags.into_iter().filter(|f| f != "--python").collect();
    assert_eq!(help_flags("exec"), run);
}

#[test]
fn doctor_marks_required_layers_aligns_its_columns_and_exits_by_them() {
    for who in identities() {
        let json = airlock(who, &["doctor", "--json"], "");
        let layers: Vec<Value> = serde_json::from_slice(&json.stdout).unwrap();
        let required: Vec<&str> = layers
            .iter()
            .filter(|l| l["required"] == true)
            .map(|l| l["layer"].as_str().unwrap())
            .collect();
        for must in ["userns", "seccomp", "landlock", "sandbox_root"] {
            assert!(required.contains(&must), "{must}: {required:?}");
        }
        let kvm = layers.iter().find(|l| l["layer"] == "kvm").unwrap();
        assert_eq!(kvm["required"], false, "an optional layer: {kvm}");
        let refused = layers
            .iter()
            .any(|l| l["required"] == true && l["available"] == false);
        let text = airlock(who, &["doctor"], "");
        assert_eq!(text.status.success(), !refused, "exit code");
        assert_eq!(json.status.success(), !refused, "exit code with --json");
        let out = String::from_utf8_lossy(&text.stdout).into_owned();
        let mut lines = out.lines();
        let header = lines.next().unwrap();
        let detail_at = header.find("detail").expect("a header naming the columns");
        let rows: Vec<&str> = lines
            .take_while(|l| !l.is_empty())
            .filter(|l| !l.trim_start().starts_with("fix:"))
            .collect();
        assert_eq!(rows.len(), layers.len(), "{out}");
        for (row, layer) in rows.iter().zip(&layers) {
            let needed = if layer["required"] == true {
                "required"
            } else {
                "optional"
            };
            assert!(row.contains(needed), "{row}");
            let name = layer["layer"].as_str().unwrap();
            // The detail column starts at the header's column on every row.
            assert_eq!(
                row[..detail_at].trim_end().rsplit(' ').next(),
                Some(name),
                "{out}"
            );
        }
        // Optional layers may be missing here (kvm, a cgroup as airlock-test): exit 0 anyway.
        assert!(!refused, "this machine offers every required layer: {out}");
    }
}
