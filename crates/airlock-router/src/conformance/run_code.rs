//! The run_code suite: a program's output, failure and bound.

use std::time::{Duration, Instant};

use super::report::{check, ConformanceReport};
use crate::sandbox::{RunOptions, RunStatus, Sandbox};

/// Probes `run_code` with small Python programs.
pub async fn run_code_suite(sandbox: &dyn Sandbox) -> ConformanceReport {
    let mut r = ConformanceReport::new("run_code");
    let opts = RunOptions::default();

    let out = sandbox
        .run_code("print(\"airlock-conformance\")", &opts)
        .await;
    r.record(
        "stdout_captured",
        "what a program prints is what the model reads back",
        match out {
            Ok(o) => check(
                o.stdout == "airlock-conformance\n"
                    && o.status == RunStatus::Completed
                    && o.exit_code == Some(0),
                || format!("{o:?}"),
            ),
            Err(e) => Err(e.to_string()),
        },
    );

    let out = sandbox
        .run_code(
            "import sys\nsys.stderr.write(\"warn\\n\")\nprint(\"out\")",
            &opts,
        )
        .await;
    r.record(
        "stderr_separate",
        "a program's diagnostics stay off the stdout a caller parses",
        match out {
            Ok(o) => check(o.stdout == "out\n" && o.stderr.contains("warn"), || {
                format!("{o:?}")
            }),
            Err(e) => Err(e.to_string()),
        },
    );

    let out = sandbox.run_code("raise SystemExit(3)", &opts).await;
    r.record(
        "failure_reported",
        "a failing program must not read as completed",
        match out {
            Ok(o) => check(
                o.status == RunStatus::Failed && o.exit_code == Some(3),
                || format!("{o:?}"),
            ),
            Err(e) => Err(e.to_string()),
        },
    );

    let bounded = RunOptions {
        timeout: Duration::from_millis(500),
        ..RunOptions::default()
    };
    let started = Instant::now();
    let out = sandbox.run_code("while True: pass", &bounded).await;
    let took = started.elapsed();
    r.record(
        "timeout_enforced",
        "a program that overruns is stopped and reported as a timeout, within a bounded grace",
        match out {
            Ok(o) => check(
                o.status == RunStatus::Timeout && took < Duration::from_secs(10),
                || format!("{:?} after {took:?}", o.status),
            ),
            Err(crate::sandbox::SandboxError::Timeout) => Ok(()),
            Err(e) => Err(e.to_string()),
        },
    );
    r
}
