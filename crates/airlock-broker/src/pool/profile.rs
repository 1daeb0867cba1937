//! Which runs a pool may serve: exactly those a pooled executor was started for.
//!
//! Everything the kernel enforces from the executor's start — rlimits, the cgroup's memory and
//! pids limits, the cpu quota, Landlock paths (interpreter, work dir) — and the output capture
//! cap are fixed when the executor starts, so they must equal the pool's profile. What the
//! broker enforces during the run (timeout, grace, tool-call limits, the RSS ceiling's clock)
//! comes from the run's own spec.
use crate::limits::Limits;
use crate::run::{program_fits, RunSpec, Workload};

use super::config::PoolConfig;

/// Whether `spec` can run on an executor started for `config`.
pub(super) fn fits(config: &PoolConfig, spec: &RunSpec) -> bool {
    let Workload::Python { code, interpreter } = &spec.workload else {
        return false;
    };
    *interpreter == config.interpreter
        && spec.sandbox.is_none()
        && spec.image.is_none()
        && spec.cwd.is_none()
        && spec.output.is_none()
        && spec.executor == config.executor
        && program_fits(code)
        && same_start_limits(&spec.limits, &config.limits)
}

/// Equal in every field but those the broker applies per run.
fn same_start_limits(run: &Limits, pool: &Limits) -> bool {
    let normalised = Limits {
        timeout: pool.timeout,
        grace: pool.grace,
        max_tool_calls: pool.max_tool_calls,
        max_tool_response_bytes: pool.max_tool_response_bytes,
        ..run.clone()
    };
    normalised == *pool
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;

    fn config() -> PoolConfig {
        PoolConfig::new(1, PathBuf::from("/bin/airlock"))
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
            env: vec![("K".into(), "V".into())],
            executor: PathBuf::from("/bin/airlock"),
            output: None,
            restricted: None,
        }
    }

    #[test]
    fn a_default_python_run_fits_and_per_run_limits_may_differ() {
        let mut s = spec("print(1)");
        assert!(fits(&config(), &s));
        s.limits.timeout = Duration::from_millis(1);
        s.limits.grace = Duration::ZERO;
        s.limits.max_tool_calls = 5000;
        s.limits.max_tool_response_bytes = 1;
        assert!(fits(&config(), &s));
    }

    #[test]
    fn start_time_limits_interpreter_work_dir_and_commands_do_not_fit() {
        let c = config();
        type Change = Box<dyn Fn(&mut RunSpec)>;
        let changes: Vec<Change> = vec![
            Box::new(|s| s.limits.memory_bytes += 1),
            Box::new(|s| s.limits.max_output_bytes += 1),
            Box::new(|s| s.limits.max_file_bytes += 1),
            Box::new(|s| s.limits.max_open_files += 1),
            Box::new(|s| s.limits.max_processes += 1),
            Box::new(|s| s.limits.cpu_millicores = Some(500)),
            Box::new(|s| s.cwd = Some("sub".into())),
            Box::new(|s| s.executor = PathBuf::from("/other/airlock")),
            Box::new(|s| {
                s.workload = Workload::Python {
                    code: "pass".into(),
                    interpreter: Some(PathBuf::from("/usr/bin/python3")),
                }
            }),
            Box::new(|s| {
                s.workload = Workload::Command {
                    argv: vec!["true".into()],
                }
            }),
            Box::new(|s| {
                s.workload = Workload::Python {
                    code: "#".repeat(2 << 20),
                    interpreter: None,
                }
            }),
        ];
        for (i, change) in changes.iter().enumerate() {
            let mut s = spec("print(1)");
            change(&mut s);
            assert!(!fits(&c, &s), "change {i} should not fit");
        }
    }
}
