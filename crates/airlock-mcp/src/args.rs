//! Tool-call arguments, checked before anything runs: strict names, typed values, every
//! collection and string bounded. Each failure is a message for the model.
use std::time::Duration;

use airlock_policy::GuestRelPath;
use rmcp::model::JsonObject;
use serde_json::Value;

/// Most declared outputs one call may name.
pub const MAX_DECLARED_OUTPUTS: usize = 64;
/// Most environment variables `exec` may be given.
pub const MAX_ENV_VARS: usize = 128;
/// Longest environment variable name.
const MAX_ENV_NAME: usize = 128;
/// Most argv entries.
const MAX_ARGV: usize = 4096;
/// argv and env travel in the executor's setup frame next to the filesystem policy; they get a
/// quarter of the 1 MiB frame.
pub const MAX_ARGV_ENV_BYTES: usize = 256 * 1024;

/// Refuses any argument not in `allowed`.
pub fn only_keys(args: &JsonObject, allowed: &[&str]) -> Result<(), String> {
    match args.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "unknown argument {:?} (expected: {})",
            k.chars().take(64).collect::<String>(),
            allowed.join(", ")
        )),
        None => Ok(()),
    }
}

/// A required string argument.
pub fn string(args: &JsonObject, key: &str) -> Result<String, String> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(format!("`{key}` must be a string")),
    }
}

/// An optional string argument.
pub fn opt_string(args: &JsonObject, key: &str) -> Result<Option<String>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

/// A path relative to /work: relative, no `..`, no empty or `.` segment.
pub fn path(args: &JsonObject, key: &str) -> Result<GuestRelPath, String> {
    let p = string(args, key)?;
    parse_path(&p)
}

/// `p` (a path relative to /work; a leading `/work/` is accepted too) as a guest path.
pub fn parse_path(p: &str) -> Result<GuestRelPath, String> {
    GuestRelPath::parse_in_work(p).map_err(|e| {
        let shown: String = p.chars().take(200).collect();
        format!("path {shown:?}: {e} (paths are relative to /work)")
    })
}

/// A declared output's path, checked before the run (so a bad one refuses the call, not the
/// result).
fn output_path(path: &str) -> Result<GuestRelPath, String> {
    parse_path(path).map_err(|e| format!("output {e}"))
}

/// The declared outputs.
pub fn declared_outputs(args: &JsonObject) -> Result<Vec<GuestRelPath>, String> {
    match args.get("outputs") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => {
            if items.len() > MAX_DECLARED_OUTPUTS {
                return Err(format!(
                    "at most {MAX_DECLARED_OUTPUTS} outputs may be declared"
                ));
            }
            items
                .iter()
                .map(|v| match v {
                    Value::String(s) => output_path(s),
                    _ => Err("outputs must be strings".to_owned()),
                })
                .collect()
        }
        Some(_) => Err("outputs must be an array of strings".to_owned()),
    }
}

/// `timeout_s`: seconds in (0, `max`]; `max` when absent.
pub fn timeout(args: &JsonObject, max: Duration) -> Result<Duration, String> {
    let max_s = max.as_secs_f64();
    match args.get("timeout_s") {
        None | Some(Value::Null) => Ok(max),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(s) if s > 0.0 && s <= max_s => Ok(Duration::from_secs_f64(s)),
            _ => Err(format!(
                "`timeout_s` must be a number of seconds in (0, {max_s}] (this server's limit)"
            )),
        },
        Some(_) => Err("`timeout_s` must be a number of seconds".to_owned()),
    }
}

/// `argv`: a non-empty array of strings.
pub fn argv(args: &JsonObject) -> Result<Vec<String>, String> {
    let bad = || "`argv` must be a non-empty array of strings".to_owned();
    match args.get("argv") {
        Some(Value::Array(a)) if !a.is_empty() && a.len() <= MAX_ARGV => a
            .iter()
            .map(|v| match v {
                Value::String(s) if !s.contains('\0') => Ok(s.clone()),
                _ => Err(bad()),
            })
            .collect(),
        _ => Err(bad()),
    }
}

fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok && name.len() <= MAX_ENV_NAME && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `env`: an object of string values, the command's whole environment (empty when absent).
pub fn env(args: &JsonObject) -> Result<Vec<(String, String)>, String> {
    let map = match args.get("env") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(m)) => m,
        Some(_) => return Err("`env` must be an object of strings".to_owned()),
    };
    if map.len() > MAX_ENV_VARS {
        return Err(format!("`env` has more than {MAX_ENV_VARS} variables"));
    }
    map.iter()
        .map(|(k, v)| {
            if !valid_env_name(k) {
                let shown: String = k.chars().take(64).collect();
                return Err(format!(
                    "env name {shown:?} is not [A-Za-z_][A-Za-z0-9_]* (at most {MAX_ENV_NAME} bytes)"
                ));
            }
            match v {
                Value::String(s) if !s.contains('\0') => Ok((k.clone(), s.clone())),
                _ => Err(format!("env {k} must be a string without NUL")),
            }
        })
        .collect()
}

/// Refuses argv and env that would not fit the executor's setup frame.
pub fn fits(argv: &[String], env: &[(String, String)]) -> Result<(), String> {
    let n: usize = argv.iter().map(|a| a.len() + 8).sum::<usize>()
        + env
            .iter()
            .map(|(k, v)| k.len() + v.len() + 8)
            .sum::<usize>();
    if n > MAX_ARGV_ENV_BYTES {
        return Err(format!(
            "argv and env take about {n} bytes, above the {MAX_ARGV_ENV_BYTES} byte budget"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(v: Value) -> JsonObject {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn timeouts_are_bounded_by_the_limit() {
        let max = Duration::from_secs(20);
        assert_eq!(timeout(&obj(json!({})), max).unwrap(), max);
        assert_eq!(
            timeout(&obj(json!({"timeout_s": 1.5})), max).unwrap(),
            Duration::from_millis(1500)
        );
        for bad in [json!(0), json!(-1), json!(21), json!("5")] {
            assert!(timeout(&obj(json!({ "timeout_s": bad })), max).is_err());
        }
    }

    #[test]
    fn env_and_paths_are_checked() {
        let e = env(&obj(
            json!({"env": {"OPENSSL_CONF": "/dev/null", "A_1": ""}}),
        ))
        .unwrap();
        assert_eq!(e.len(), 2);
        for bad in [
            json!({"env": {"1A": "x"}}),
            json!({"env": {"A=B": "x"}}),
            json!({"env": {"A": 1}}),
            json!({"env": {"A": "x\u{0}"}}),
            json!({"env": ["A"]}),
        ] {
            assert!(env(&obj(bad.clone())).is_err(), "{bad}");
        }
        assert_eq!(parse_path("/work/a/b.txt").unwrap().as_str(), "a/b.txt");
        for bad in ["../x", "/etc/passwd", "a/../../b", ""] {
            assert!(parse_path(bad).is_err(), "{bad}");
        }
        assert!(fits(&["x".repeat(MAX_ARGV_ENV_BYTES)], &[]).is_err());
    }
}
