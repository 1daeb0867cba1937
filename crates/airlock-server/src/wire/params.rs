//! Parsing and bounding the params of an orchestrator's `execute` request.
//!
//! Everything here comes from the orchestrator, across a trust boundary: the shape is strict
//! (unknown members are refused), and every collection and string has a bound, so one request
//! can never make the broker build an executor config that does not fit one frame.
use std::collections::{BTreeMap, BTreeSet};

use airlock_protocol::DEFAULT_MAX_MESSAGE_BYTES;
use serde::Deserialize;
use serde_json::Value;

use crate::ceilings::RequestedLimits;
use airlock_broker::run::program_fits;

/// Most environment variables a run may be given.
const MAX_ENV_VARS: usize = 128;
/// Longest environment variable name.
const MAX_ENV_NAME: usize = 128;
/// Most argv entries of a command run.
const MAX_ARGV: usize = 4096;
/// Most names in a `tools` list.
const MAX_TOOLS: usize = 256;
/// Longest tool name in a `tools` list.
const MAX_TOOL_NAME: usize = 128;
/// The argv and env travel in the executor's setup frame next to the filesystem policy; half
/// the frame cap leaves that policy ample room.
const MAX_SETUP_PAYLOAD: usize = DEFAULT_MAX_MESSAGE_BYTES / 2;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    code: Option<String>,
    argv: Option<Vec<String>>,
    #[serde(default)]
    limits: RequestedLimits,
    #[serde(default)]
    env: BTreeMap<String, String>,
    tools: Option<Vec<String>>,
}

/// What the run executes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// Python source.
    Code(String),
    /// A command line.
    Argv(Vec<String>),
}

impl Program {
    /// The broker workload for this program (Python under `interpreter`), and its kind as
    /// logs and audit records name it.
    #[must_use]
    pub fn into_workload(
        self,
        interpreter: Option<std::path::PathBuf>,
    ) -> (airlock_broker::Workload, &'static str) {
        match self {
            Program::Code(code) => (
                airlock_broker::Workload::Python { code, interpreter },
                "python",
            ),
            Program::Argv(argv) => (airlock_broker::Workload::Command { argv }, "command"),
        }
    }
}

/// A parsed, bounded `execute` request.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecuteParams {
    /// The program.
    pub program: Program,
    /// The limits asked for (resolved against the ceilings later).
    pub limits: RequestedLimits,
    /// The guest's whole environment.
    pub env: Vec<(String, String)>,
    /// When present, the only tool names the orchestrator serves; other calls are answered
    /// `unknown_tool` by the broker without a round trip.
    pub tools: Option<BTreeSet<String>>,
}

/// Why the params were not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamsError {
    /// Wrong shape or out of bounds: `invalid_params`.
    #[error("{0}")]
    Invalid(String),
    /// The program cannot fit one frame: `program_too_large`.
    #[error("{0}")]
    TooLarge(String),
}

fn invalid(m: impl Into<String>) -> ParamsError {
    ParamsError::Invalid(m.into())
}

fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok && name.len() <= MAX_ENV_NAME && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parse `execute` params.
pub fn parse(params: Option<Value>) -> Result<ExecuteParams, ParamsError> {
    let params = match params {
        Some(v @ Value::Object(_)) => v,
        _ => {
            return Err(invalid(
                "execute params must be an object with `code` or `argv`",
            ))
        }
    };
    let raw: Raw =
        serde_json::from_value(params).map_err(|e| invalid(format!("execute params: {e}")))?;
    let program = match (raw.code, raw.argv) {
        (Some(code), None) => {
            if !program_fits(&code) {
                return Err(ParamsError::TooLarge(format!(
                    "program too large: {} bytes does not fit the {DEFAULT_MAX_MESSAGE_BYTES} byte \
                     message cap with its envelope",
                    code.len()
                )));
            }
            Program::Code(code)
        }
        (None, Some(argv)) => {
            if argv.is_empty() || argv.len() > MAX_ARGV {
                return Err(invalid(format!("argv must have 1 to {MAX_ARGV} entries")));
            }
            if argv.iter().any(|a| a.contains('\0')) {
                return Err(invalid("argv entries must not contain NUL"));
            }
            Program::Argv(argv)
        }
        (Some(_), Some(_)) => return Err(invalid("execute takes `code` or `argv`, not both")),
        (None, None) => {
            return Err(invalid(
                "execute needs `code` (a string) or `argv` (a list)",
            ))
        }
    };
    check_env(&raw.env, "env")?;
    let env: Vec<(String, String)> = raw.env.into_iter().collect();
    let argv = match &program {
        Program::Argv(a) => Some(a.as_slice()),
        Program::Code(_) => None,
    };
    setup_fits(&env, argv)?;
    let tools = match raw.tools {
        None => None,
        Some(names) => {
            if names.len() > MAX_TOOLS
                || names
                    .iter()
                    .any(|n| n.is_empty() || n.len() > MAX_TOOL_NAME)
            {
                return Err(invalid(format!(
                    "tools must list at most {MAX_TOOLS} names of 1 to {MAX_TOOL_NAME} bytes"
                )));
            }
            Some(names.into_iter().collect())
        }
    };
    Ok(ExecuteParams {
        program,
        limits: raw.limits,
        env,
        tools,
    })
}

/// Bounds an environment from the wire (`what` names it in the message): at most
/// [`MAX_ENV_VARS`] variables, each name `[A-Za-z_][A-Za-z0-9_]*`, no NUL in a value.
pub(crate) fn check_env(env: &BTreeMap<String, String>, what: &str) -> Result<(), ParamsError> {
    if env.len() > MAX_ENV_VARS {
        return Err(invalid(format!(
            "{what} has more than {MAX_ENV_VARS} variables"
        )));
    }
    for (k, v) in env {
        if !valid_env_name(k) {
            let shown: String = k.chars().take(64).collect();
            return Err(invalid(format!(
                "{what} name {shown:?} is not [A-Za-z_][A-Za-z0-9_]*"
            )));
        }
        if v.contains('\0') {
            return Err(invalid(format!("{what} {k} contains NUL")));
        }
    }
    Ok(())
}

/// Whether a run's env and argv fit the executor's setup frame.
pub(crate) fn setup_fits(
    env: &[(String, String)],
    argv: Option<&[String]>,
) -> Result<(), ParamsError> {
    let setup_bytes = serde_json::to_vec(env)
        .map(|v| v.len())
        .unwrap_or(usize::MAX)
        .saturating_add(argv.map_or(0, |a| {
            serde_json::to_vec(a).map(|v| v.len()).unwrap_or(usize::MAX)
        }));
    if setup_bytes > MAX_SETUP_PAYLOAD {
        return Err(ParamsError::TooLarge(format!(
            "argv and env take {setup_bytes} bytes, over the {MAX_SETUP_PAYLOAD} byte budget"
        )));
    }
    Ok(())
}

/// A run's environment in a sandbox: the sandbox's `spec.env`, each variable the call names
/// replaced by the call's (the call wins), bounded as one environment (with `argv`).
pub(crate) fn with_sandbox_env(
    sandbox: &[(String, String)],
    call: Vec<(String, String)>,
    argv: Option<&[String]>,
) -> Result<Vec<(String, String)>, ParamsError> {
    if sandbox.is_empty() {
        return Ok(call);
    }
    let mut env: Vec<(String, String)> = sandbox
        .iter()
        .filter(|(k, _)| !call.iter().any(|(c, _)| c == k))
        .cloned()
        .collect();
    env.extend(call);
    if env.len() > 2 * MAX_ENV_VARS {
        return Err(invalid(format!(
            "env and the sandbox's spec.env have more than {} variables",
            2 * MAX_ENV_VARS
        )));
    }
    setup_fits(&env, argv)?;
    Ok(env)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn code_and_argv_forms_parse() {
        let p = parse(Some(
            json!({"code": "print(1)", "env": {"A": "1"}, "tools": ["t"]}),
        ))
        .unwrap();
        assert_eq!(p.program, Program::Code("print(1)".into()));
        assert_eq!(p.env, vec![("A".into(), "1".into())]);
        assert!(p.tools.unwrap().contains("t"));
        let p = parse(Some(
            json!({"argv": ["/bin/echo", "hi"], "limits": {"timeout_s": 2}}),
        ))
        .unwrap();
        assert_eq!(
            p.program,
            Program::Argv(vec!["/bin/echo".into(), "hi".into()])
        );
        assert_eq!(p.limits.timeout_s, Some(2.0));
    }

    #[test]
    fn bad_shapes_are_invalid_params() {
        for bad in [
            None,
            Some(json!([])),
            Some(json!({})),
            Some(json!({"code": "x", "argv": ["y"]})),
            Some(json!({"code": 1})),
            Some(json!({"code": "x", "extra": 1})),
            Some(json!({"argv": []})),
            Some(json!({"argv": ["a\u{0}"]})),
            Some(json!({"code": "x", "env": {"1BAD": "v"}})),
            Some(json!({"code": "x", "env": {"A=B": "v"}})),
            Some(json!({"code": "x", "limits": {"nope": 1}})),
            Some(json!({"code": "x", "tools": [""]})),
        ] {
            assert!(
                matches!(parse(bad.clone()), Err(ParamsError::Invalid(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn an_over_cap_program_is_too_large() {
        let code = "x".repeat(DEFAULT_MAX_MESSAGE_BYTES);
        assert!(matches!(
            parse(Some(json!({"code": code}))),
            Err(ParamsError::TooLarge(_))
        ));
        let argv: Vec<String> = (0..MAX_ARGV).map(|_| "y".repeat(200)).collect();
        assert!(matches!(
            parse(Some(json!({"argv": argv}))),
            Err(ParamsError::TooLarge(_))
        ));
    }
}
