//! The `process.*` methods' params, parsed and bounded before anything runs (and fuzzed as
//! the session's other params are: the crate's `fuzzing` module).
use std::collections::BTreeMap;
use std::time::Duration;

use airlock_broker::machine::{signal_number, SIGNALS};
use airlock_protocol::method as m;
use airlock_protocol::{ErrorCode, ErrorObject};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};

/// The largest terminal a process may ask for.
const MAX_TERMINAL: u16 = 1000;
/// The most input one `process.input` carries (decoded).
pub const MAX_INPUT_BYTES: usize = 64 * 1024;
/// The longest `process.wait`.
const MAX_WAIT_S: f64 = 300.0;
/// The longest `timeout_s` of a process.
const MAX_TIMEOUT_S: f64 = 86_400.0;

fn invalid(msg: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::InvalidParams, msg)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStart {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: String,
    argv: Vec<String>,
    cwd: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    stdin: bool,
    pty: Option<TerminalSize>,
    timeout_s: Option<f64>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
struct TerminalSize {
    rows: u16,
    cols: u16,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOn {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: Option<String>,
    process_id: String,
    data: Option<String>,
    rows: Option<u16>,
    cols: Option<u16>,
    signal: Option<Value>,
    timeout_s: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawList {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: String,
}

/// A `process.start`, checked.
#[derive(Debug)]
pub struct StartCall {
    /// The command.
    pub argv: Vec<String>,
    /// The whole environment.
    pub env: Vec<(String, String)>,
    /// The guest directory.
    pub cwd: Option<String>,
    /// A stdin pipe.
    pub stdin: bool,
    /// A terminal of (rows, cols).
    pub pty: Option<(u16, u16)>,
    /// Killed after this long.
    pub timeout: Option<Duration>,
}

/// What a method on one process does, checked.
#[derive(Debug)]
pub enum Action {
    /// `process.input`: these bytes.
    Input(Vec<u8>),
    /// `process.close_stdin`.
    CloseStdin,
    /// `process.resize` to (rows, cols).
    Resize(u16, u16),
    /// `process.signal` with this number.
    Signal(i32),
    /// `process.wait` at most this long.
    Wait(Duration),
    /// `process.output`.
    Output,
}

/// A method on one process.
#[derive(Debug)]
pub struct OnCall {
    /// The wire id of the process.
    pub process_id: String,
    /// What to do.
    pub action: Action,
}

fn parse<T: for<'de> Deserialize<'de>>(method: &str, params: Value) -> Result<T, ErrorObject> {
    serde_json::from_value(params).map_err(|e| invalid(format!("{method} params: {e}")))
}

fn terminal(rows: u16, cols: u16, what: &str) -> Result<(u16, u16), ErrorObject> {
    if rows == 0 || cols == 0 || rows > MAX_TERMINAL || cols > MAX_TERMINAL {
        return Err(invalid(format!(
            "{what}: rows and cols must be 1 to {MAX_TERMINAL}"
        )));
    }
    Ok((rows, cols))
}

/// `process.start`'s params: argv and env by `execute`'s rules (bounded, valid names, fitting
/// the setup frame), a terminal's size, a timeout.
pub fn parse_start(params: Value) -> Result<StartCall, ErrorObject> {
    let p: RawStart = parse(m::PROCESS_START, params)?;
    let checked = crate::wire::params::parse(Some(json!({ "argv": p.argv, "env": p.env })))
        .map_err(|e| invalid(format!("process.start: {e}")))?;
    let crate::wire::params::Program::Argv(argv) = checked.program else {
        return Err(invalid("process.start takes `argv`"));
    };
    let pty = match p.pty {
        Some(t) => Some(terminal(t.rows, t.cols, "process.start: `pty`")?),
        None => None,
    };
    let timeout = match p.timeout_s {
        None => None,
        Some(t) if t.is_finite() && t > 0.0 && t <= MAX_TIMEOUT_S => {
            Some(Duration::from_secs_f64(t))
        }
        Some(_) => return Err(invalid("process.start: `timeout_s` must be in (0, 86400]")),
    };
    Ok(StartCall {
        argv,
        env: checked.env,
        cwd: p.cwd,
        stdin: p.stdin,
        pty,
        timeout,
    })
}

/// `process.list`'s params: the sandbox's id and nothing else.
pub fn parse_list(params: Value) -> Result<(), ErrorObject> {
    parse::<RawList>(m::PROCESS_LIST, params).map(drop)
}

/// The params of a method on one process (`input`, `close_stdin`, `resize`, `signal`,
/// `wait`, `output`).
pub fn parse_on(method: &str, params: Value) -> Result<OnCall, ErrorObject> {
    let p: RawOn = parse(method, params)?;
    let action = match method {
        m::PROCESS_INPUT => {
            let data = B64
                .decode(p.data.as_deref().unwrap_or_default())
                .map_err(|e| invalid(format!("process.input: `data` is not base64: {e}")))?;
            if data.len() > MAX_INPUT_BYTES {
                return Err(invalid(format!(
                    "process.input: at most {MAX_INPUT_BYTES} bytes per call"
                )));
            }
            Action::Input(data)
        }
        m::PROCESS_CLOSE_STDIN => Action::CloseStdin,
        m::PROCESS_RESIZE => {
            let (Some(rows), Some(cols)) = (p.rows, p.cols) else {
                return Err(invalid("process.resize takes `rows` and `cols`"));
            };
            let (rows, cols) = terminal(rows, cols, "process.resize")?;
            Action::Resize(rows, cols)
        }
        m::PROCESS_SIGNAL => Action::Signal(signal(p.signal.as_ref())?),
        m::PROCESS_WAIT => {
            let t = p.timeout_s.unwrap_or(MAX_WAIT_S);
            if !(t.is_finite() && (0.0..=MAX_WAIT_S).contains(&t)) {
                return Err(invalid(format!(
                    "process.wait: `timeout_s` must be in [0, {MAX_WAIT_S}]"
                )));
            }
            Action::Wait(Duration::from_secs_f64(t))
        }
        m::PROCESS_OUTPUT => Action::Output,
        _ => {
            return Err(ErrorObject::new(
                ErrorCode::MethodNotFound,
                "unknown method",
            ))
        }
    };
    Ok(OnCall {
        process_id: p.process_id,
        action,
    })
}

fn signal(v: Option<&Value>) -> Result<i32, ErrorObject> {
    match v {
        Some(Value::String(s)) => signal_number(s),
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .filter(|n| SIGNALS.iter().any(|(_, s)| s == n)),
        _ => None,
    }
    .ok_or_else(|| {
        invalid(
            "process.signal: `signal` must be one of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, \
             SIGUSR2, SIGCONT, SIGKILL (name or number)",
        )
    })
}

/// Check the params of any process method as the session would.
pub fn check(method: &str, params: Value) -> Result<(), ErrorObject> {
    match method {
        m::PROCESS_START => parse_start(params).map(drop),
        m::PROCESS_LIST => parse_list(params),
        _ => parse_on(method, params).map(drop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_refused_naming_the_member() {
        let too_big = B64.encode(vec![0u8; MAX_INPUT_BYTES + 1]);
        for (method, params, says) in [
            (
                m::PROCESS_START,
                json!({"sandbox_id": "s", "argv": []}),
                "argv",
            ),
            (
                m::PROCESS_START,
                json!({"sandbox_id": "s", "argv": ["x"], "pty": {"rows": 0, "cols": 80}}),
                "pty",
            ),
            (
                m::PROCESS_START,
                json!({"sandbox_id": "s", "argv": ["x"], "timeout_s": -1}),
                "timeout_s",
            ),
            (
                m::PROCESS_START,
                json!({"sandbox_id": "s", "argv": ["x"], "bogus": 1}),
                "bogus",
            ),
            (
                m::PROCESS_INPUT,
                json!({"process_id": "p", "data": too_big}),
                "at most",
            ),
            (
                m::PROCESS_INPUT,
                json!({"process_id": "p", "data": "!!"}),
                "base64",
            ),
            (
                m::PROCESS_RESIZE,
                json!({"process_id": "p", "rows": 1001, "cols": 1}),
                "rows and cols",
            ),
            (
                m::PROCESS_SIGNAL,
                json!({"process_id": "p", "signal": "SIGSTOP"}),
                "signal",
            ),
            (
                m::PROCESS_SIGNAL,
                json!({"process_id": "p", "signal": 19}),
                "signal",
            ),
            (
                m::PROCESS_WAIT,
                json!({"process_id": "p", "timeout_s": 301}),
                "timeout_s",
            ),
            (m::PROCESS_LIST, json!({"sandbox_id": "s", "x": 1}), "x"),
        ] {
            let e = check(method, params).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidParams.code(), "{method}");
            assert!(e.message.contains(says), "{method}: {}", e.message);
        }
    }

    #[test]
    fn good_params_become_their_action() {
        let on = parse_on(
            m::PROCESS_SIGNAL,
            json!({"process_id": "s.proc-1", "signal": "TERM"}),
        )
        .unwrap();
        assert!(matches!(on.action, Action::Signal(15)));
        let on = parse_on(
            m::PROCESS_INPUT,
            json!({"process_id": "s.proc-1", "data": "aGk="}),
        )
        .unwrap();
        assert!(matches!(on.action, Action::Input(ref d) if d == b"hi"));
        let s = parse_start(json!({"sandbox_id": "s", "argv": ["sh"], "pty": {"rows": 24, "cols": 80}, "timeout_s": 5})).unwrap();
        assert_eq!(
            (s.pty, s.timeout),
            (Some((24, 80)), Some(Duration::from_secs(5)))
        );
    }
}
