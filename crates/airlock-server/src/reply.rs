//! Building the terminal response of an `execute`, guaranteed to fit one message.
//!
//! A run's result carries two captured streams; with JSON escaping (a control byte becomes six
//! characters) they could outgrow the frame cap even under their own caps. Rather than fail to
//! send the one terminal response, the longer stream is cut (and marked truncated) until the
//! response fits.
use airlock_protocol::{ErrorCode, ErrorObject, Id, Message, DEFAULT_MAX_MESSAGE_BYTES};
use serde_json::Value;

use airlock_broker::result::RunResult;

/// An error response (rejected before the run).
pub fn error(id: Option<Id>, code: ErrorCode, message: impl Into<String>) -> Message {
    Message::error(id, ErrorObject::new(code, message))
}

fn cut_half(s: &mut String) {
    let mut at = s.len() / 2;
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    s.truncate(at);
}

fn encoded_len(m: &Message) -> usize {
    m.to_vec().map(|v| v.len()).unwrap_or(usize::MAX)
}

/// The success response for a run that started, with `run_id` added to the result object.
pub fn run_result(id: Id, run_id: &str, mut result: RunResult) -> Message {
    loop {
        let mut value = serde_json::to_value(&result).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            map.insert("run_id".into(), Value::String(run_id.to_string()));
        }
        let msg = Message::success(id.clone(), value);
        if encoded_len(&msg) <= DEFAULT_MAX_MESSAGE_BYTES {
            return msg;
        }
        if result.stdout.is_empty() && result.stderr.is_empty() {
            return error(
                Some(id),
                ErrorCode::InternalError,
                "the run result does not fit one message",
            );
        }
        if result.stdout.len() >= result.stderr.len() {
            cut_half(&mut result.stdout);
            result.stdout_truncated = true;
        } else {
            cut_half(&mut result.stderr);
            result.stderr_truncated = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_broker::result::RunStatus;

    fn result(stdout: String) -> RunResult {
        let mut r = RunResult::not_started(airlock_protocol::ErrorCode::InternalError, "");
        r.status = RunStatus::Completed;
        r.error = None;
        r.stdout = stdout;
        r.stderr = "e".into();
        r.exit_code = Some(0);
        r.stderr_bytes = 1;
        r.wall_time_ms = 1.0;
        r
    }

    #[test]
    fn a_small_result_is_sent_whole_with_its_run_id() {
        let m = run_result(Id::Number(7), "r1", result("hi".into()));
        let Message::Response(r) = m else {
            panic!("not a response")
        };
        let v = r.outcome.unwrap();
        assert_eq!(v["stdout"], "hi");
        assert_eq!(v["run_id"], "r1");
        assert_eq!(v["stdout_truncated"], false);
    }

    #[test]
    fn an_escaping_heavy_result_is_cut_to_fit() {
        // 256 KiB of control bytes escape to 1.5 MiB.
        let m = run_result(Id::Number(1), "r", result("\u{1}".repeat(256 * 1024)));
        assert!(m.to_vec().unwrap().len() <= DEFAULT_MAX_MESSAGE_BYTES);
        let Message::Response(r) = m else {
            panic!("not a response")
        };
        let v = r.outcome.unwrap();
        assert_eq!(v["stdout_truncated"], true);
        assert!(!v["stdout"].as_str().unwrap().is_empty());
    }
}
