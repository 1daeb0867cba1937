//! The exec suite: argv reaches the guest unmodified, streams stay apart, exit codes survive,
//! and the bound holds.

use std::time::{Duration, Instant};

use super::report::{check, ConformanceReport};
use super::scratch::Scratch;
use crate::sandbox::{ExecOptions, Sandbox};

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| (*s).to_owned()).collect()
}

/// Probes `exec` on a POSIX guest that has `echo`, `true`, `false`, `cat` and `sleep`.
pub async fn exec_suite(sandbox: &dyn Sandbox, work_dir: &str) -> ConformanceReport {
    let mut r = ConformanceReport::new("exec");
    let opts = ExecOptions::default();

    let out = sandbox
        .exec(&argv(&["echo", "airlock-conformance"]), &opts)
        .await;
    r.record(
        "stdout_captured",
        "a command's standard output is the workload's return channel",
        match out {
            Ok(o) => check(
                o.stdout == "airlock-conformance\n" && o.exit_code == Some(0),
                || format!("{o:?}"),
            ),
            Err(e) => Err(e.to_string()),
        },
    );

    let out = sandbox
        .exec(&argv(&["echo", "a  b", ";", "$HOME", "*"]), &opts)
        .await;
    r.record(
        "argv_not_shell_interpreted",
        "argv is passed as given: no word splitting, expansion or command chaining a model could inject",
        match out {
            Ok(o) => check(o.stdout == "a  b ; $HOME *\n", || format!("stdout {:?}", o.stdout)),
            Err(e) => Err(e.to_string()),
        },
    );

    let t = sandbox.exec(&argv(&["true"]), &opts).await;
    let f = sandbox.exec(&argv(&["false"]), &opts).await;
    r.record(
        "exit_code_preserved",
        "success and failure must be distinguishable, or every failed run reads as a pass",
        match (t, f) {
            (Ok(t), Ok(f)) => check(t.exit_code == Some(0) && f.exit_code == Some(1), || {
                format!("true={:?} false={:?}", t.exit_code, f.exit_code)
            }),
            (Err(e), _) | (_, Err(e)) => Err(e.to_string()),
        },
    );

    let missing = match Scratch::new().and_then(|s| s.path("missing")) {
        Ok(p) => p.under(work_dir),
        Err(e) => e,
    };
    let out = sandbox.exec(&argv(&["cat", &missing]), &opts).await;
    r.record(
        "stderr_separate",
        "diagnostics arrive on stderr, not mixed into stdout a caller parses",
        match out {
            Ok(o) => check(
                o.stdout.is_empty() && !o.stderr.is_empty() && o.exit_code != Some(0),
                || format!("{o:?}"),
            ),
            Err(e) => Err(e.to_string()),
        },
    );

    let out = sandbox
        .exec(&argv(&["airlock-no-such-command"]), &opts)
        .await;
    r.record(
        "unknown_command_fails",
        "a command that does not exist must fail, not succeed silently",
        match out {
            Ok(o) => check(o.exit_code.is_some_and(|c| c != 0), || format!("{o:?}")),
            Err(_) => Ok(()),
        },
    );

    let bounded = ExecOptions {
        timeout: Duration::from_millis(500),
        ..ExecOptions::default()
    };
    let started = Instant::now();
    let out = sandbox.exec(&argv(&["sleep", "30"]), &bounded).await;
    let took = started.elapsed();
    r.record(
        "timeout_enforced",
        "a command that overruns its bound is stopped and reported as such",
        match out {
            Ok(o) => check(o.timed_out && took < Duration::from_secs(10), || {
                format!("timed_out={} after {took:?}", o.timed_out)
            }),
            Err(crate::sandbox::SandboxError::Timeout) => {
                check(took < Duration::from_secs(10), || format!("after {took:?}"))
            }
            Err(e) => Err(e.to_string()),
        },
    );
    r
}
