//! The zygote's guarantees, against the real executor: every run is a fresh process with
//! exactly a cold run's layers (the attacks of the pool suite, run through the zygote), no
//! interpreter state crosses runs, what a fork would share is re-seeded or documented, and
//! nothing survives the zygote or a killed run. Run as root and as `airlock-test`.
use std::path::PathBuf;
use std::time::{Duration, Instant};

use airlock_broker::{
    Limits, NoTools, RunResult, RunSpec, RunStatus, Workload, Zygote, ZygoteConfig,
};
use serde_json::Value;

fn executor() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_airlock-bench"))
}

fn spec(code: &str) -> RunSpec {
    RunSpec {
        workload: Workload::Python {
            code: code.into(),
            interpreter: None,
        },
        limits: Limits::default(),
        sandbox: None,
        image: None,
        cwd: None,
        env: Vec::new(),
        executor: executor(),
        output: None,
        restricted: None,
    }
}

async fn zygote() -> Zygote {
    match Zygote::start(ZygoteConfig::new(executor())).await {
        Ok(z) => z,
        Err(e) => panic!("zygote: {e}"),
    }
}

/// Run through the zygote, and check that it was the zygote that forked the stage.
async fn forked(z: &Zygote, spec: RunSpec) -> RunResult {
    let before = z.stats().forked_runs;
    let r = z.run(spec, &NoTools).await;
    assert_eq!(z.stats().forked_runs, before + 1, "not forked: {r:#?}");
    r
}

fn completed(r: &RunResult) -> &str {
    assert_eq!(r.status, RunStatus::Completed, "{r:#?}");
    &r.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forked_run_prints_and_reports_its_exit() {
    let z = zygote().await;
    assert_eq!(completed(&forked(&z, spec("print(1)")).await), "1\n");
    let r = forked(
        &z,
        spec("import sys\nprint('x', file=sys.stderr)\nsys.exit(3)"),
    )
    .await;
    assert_eq!(
        (r.status, r.exit_code, r.stderr.as_str()),
        (RunStatus::Error, Some(3), "x\n")
    );
    z.shutdown().await;
}
