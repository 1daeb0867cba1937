//! Turning what was observed into the one result: the OS (exit status, kills the broker made,
//! cgroup OOM events) decides; the guest's own report only adds detail.
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Instant;

use airlock_protocol::ErrorCode;
use serde::Deserialize;

pub use super::exception::HintError;
use super::prepared::NotStarted;
use crate::output::Captured;
use crate::result::{RunError, RunResult, RunStatus, TIMEOUT_EXIT_CODE};

const SIGSYS: i32 = 31;
const SIGKILL: i32 = 9;
/// Exit status of a stage that refused (mirrors `airlock_executor::EXIT_REFUSED`).
const EXIT_REFUSED: i32 = airlock_executor::EXIT_REFUSED;

/// Why supervision stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// The stage exited on its own.
    Exited,
    /// The wall-clock budget ran out.
    Timeout,
    /// The run passed its memory limit: the RSS watchdog saw the tree over its ceiling, or the
    /// memory cgroup's OOM killer ended the stage before it proved its isolation.
    Memory,
    /// The disk watchdog saw the work dir grow past its limits.
    Disk(String),
    /// The guest broke the protocol.
    Protocol(String),
    /// A layer was refused (by the stage, or by the broker's check of the attestation).
    Refused(String),
    /// The caller cancelled.
    Cancelled,
    /// The guest reported a result but did not exit.
    NoExitAfterResult,
    /// The broker itself failed (spawn, socket); the run was killed.
    Internal(String),
}

/// The guest's self-reported result (a hint).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Hint {
    /// "completed" or "error".
    #[serde(default)]
    pub status: String,
    /// The exit code the guest intends.
    #[serde(default)]
    pub exit_code: Option<i64>,
    /// The exception, if any.
    #[serde(default)]
    pub error: Option<HintError>,
}

/// Everything observed about a finished run.
#[derive(Debug)]
pub struct Observed {
    pub end: End,
    pub exit: Option<ExitStatus>,
    pub hint: Option<Hint>,
    pub python: bool,
    pub oom_killed: bool,
    pub stdout: Captured,
    pub stderr: Captured,
    pub started: Instant,
    pub peak_rss: u64,
    pub tool_calls: u32,
    pub memory_limit: u64,
    pub enforcement: Vec<&'static str>,
    /// Whether it ended before the program was sent (the interpreter was still starting).
    pub before_program: bool,
}

fn err(code: ErrorCode, message: impl Into<String>) -> Option<RunError> {
    Some(RunError::new(code.code(), message))
}

fn bounded(s: &str) -> String {
    s.chars().take(2048).collect()
}

/// A result for a run that never spawned.
pub fn before_spawn(refusal: NotStarted, started: Instant) -> RunResult {
    let mut result = RunResult::not_started(refusal.code, refusal.message);
    result.wall_time_ms = started.elapsed().as_secs_f64() * 1000.0;
    result
}

/// Decide the status and error of a run that spawned.
pub fn decide(o: &Observed) -> (RunStatus, Option<RunError>) {
    let signal = o.exit.and_then(|s| s.signal());
    let code = o.exit.and_then(|s| s.code());
    let mb = o.memory_limit / (1024 * 1024);
    let memory = || {
        let why = if o.before_program {
            format!(
                "the interpreter cannot start in {mb} MiB: it was still starting, before the \
                 program was sent, when it passed the memory limit (raise it; CPython needs \
                 about 16 MiB, more with numpy or pandas imported)"
            )
        } else {
            format!("the program exceeded its {mb} MiB memory limit")
        };
        (RunStatus::MemoryLimit, err(ErrorCode::MemoryLimit, why))
    };
    match &o.end {
        End::Timeout => {
            return (
                RunStatus::Timeout,
                err(ErrorCode::Timeout, "the run exceeded its time limit"),
            )
        }
        End::Memory => return memory(),
        End::Disk(why) => {
            return (
                RunStatus::DiskLimit,
                err(ErrorCode::OutputLimit, bounded(why)),
            );
        }
        End::Protocol(m) => {
            return (
                RunStatus::ProtocolError,
                err(
                    ErrorCode::ProtocolViolation,
                    format!("executor broke the protocol: {m}"),
                ),
            )
        }
        End::Refused(m) => {
            return (
                RunStatus::Refused,
                err(ErrorCode::SandboxRefused, bounded(m)),
            );
        }
        End::Cancelled => {
            return (
                RunStatus::Cancelled,
                err(ErrorCode::Shutdown, "the run was cancelled"),
            )
        }
        End::NoExitAfterResult => {
            return (
                RunStatus::Killed,
                err(
                    ErrorCode::ExecutorCrashed,
                    "the program reported a result but did not exit",
                ),
            )
        }
        End::Internal(m) => {
            return (RunStatus::Error, err(ErrorCode::InternalError, bounded(m)));
        }
        End::Exited => {}
    }
    if o.oom_killed {
        return memory();
    }
    // The address-space backstop surfaces as a MemoryError the bootstrap reports and then exits
    // non-zero on; a program claiming one and exiting 0 is only lying about itself.
    if let Some(hint) = &o.hint {
        let claimed = hint.error.as_ref().is_some_and(|e| e.kind == "MemoryError");
        if claimed && code.is_some_and(|c| c != 0) {
            return memory();
        }
    }
    match (signal, code) {
        (Some(SIGSYS), _) => (
            RunStatus::Killed,
            err(
                ErrorCode::ExecutorCrashed,
                "killed by the seccomp filter (SIGSYS): the program made a forbidden system call",
            ),
        ),
        (Some(sig), _) => {
            let why = if sig == SIGKILL {
                " (possibly the kernel's OOM killer)"
            } else {
                ""
            };
            (
                RunStatus::Killed,
                err(
                    ErrorCode::ExecutorCrashed,
                    format!("killed by signal {sig}{why}"),
                ),
            )
        }
        (None, Some(0)) if o.hint.is_some() || !o.python => (RunStatus::Completed, None),
        (None, Some(0)) => (
            RunStatus::Error,
            err(
                ErrorCode::ProgramError,
                "the program exited without reporting a result",
            ),
        ),
        (None, Some(c)) if c == EXIT_REFUSED && o.hint.is_none() && o.python => (
            RunStatus::Refused,
            err(
                ErrorCode::SandboxRefused,
                "the executor refused to start (see stderr)",
            ),
        ),
        (None, Some(c)) => {
            let raised = o.hint.as_ref().and_then(|h| h.error.as_ref());
            let detail = raised
                .map(|e| bounded(&format!("{}: {}", e.kind, e.message)))
                .unwrap_or_else(|| format!("exit status {c}"));
            let mut error = RunError::new(ErrorCode::ProgramError.code(), detail);
            error.exception = raised.and_then(super::exception::of);
            (RunStatus::Error, Some(error))
        }
        (None, None) => (
            RunStatus::Error,
            err(
                ErrorCode::InternalError,
                "the executor's exit status was lost",
            ),
        ),
    }
}

/// Assemble the final result.
pub fn result(o: Observed) -> RunResult {
    let (status, error) = decide(&o);
    let exit_code = match status {
        RunStatus::Timeout => Some(TIMEOUT_EXIT_CODE),
        _ => o.exit.and_then(|s| s.code()),
    };
    RunResult {
        status,
        stdout: o.stdout.text(),
        stderr: o.stderr.text(),
        exit_code,
        signal: o.exit.and_then(|s| s.signal()),
        error,
        stdout_truncated: o.stdout.truncated(),
        stderr_truncated: o.stderr.truncated(),
        stdout_bytes: o.stdout.total,
        stderr_bytes: o.stderr.total,
        wall_time_ms: o.started.elapsed().as_secs_f64() * 1000.0,
        peak_rss_bytes: o.peak_rss,
        tool_calls: o.tool_calls,
        enforcement: o.enforcement,
        warm: false,
        via: crate::result::Via::Exec,
        queued_ms: 0.0,
        egress: Vec::new(),
        value: None,
        display: Vec::new(),
        display_dropped: 0,
        kernel_restarted: false,
        stdout_raw: o.stdout.kept,
        stderr_raw: o.stderr.kept,
    }
}
