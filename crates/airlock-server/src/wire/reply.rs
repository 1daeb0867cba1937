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
/// What does not fit one message is shed in order: display items, the value's rich
/// representations (each counted in `display_dropped`), its JSON copy, then halves of the
/// longer stream.
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
        // Rich output goes first (the largest item), then the value's JSON copy (its repr
        // stays), then the streams.
        if let Some(i) = (0..result.display.len()).max_by_key(|&i| result.display[i].data.len()) {
            result.display.remove(i);
            result.display_dropped = result.display_dropped.saturating_add(1);
            continue;
        }
        if let Some(v) = result.value.as_mut().filter(|v| !v.bundle.is_empty()) {
            v.bundle.clear();
            result.display_dropped = result.display_dropped.saturating_add(1);
            continue;
        }
        if let Some(v) = result.value.as_mut().filter(|v| v.json.is_some()) {
            v.json = None;
            continue;
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

    #[test]
    fn rich_output_and_the_json_value_are_shed_before_the_streams() {
        let mut r = result("kept".into());
        for n in [600_000usize, 300_000, 1_000] {
            r.display.push(airlock_broker::result::DisplayItem {
                mime: "image/png".into(),
                data: "A".repeat(n),
                bundle: Default::default(),
            });
        }
        r.value = Some(airlock_broker::result::CellValue {
            repr: "[...]".into(),
            json: Some(serde_json::json!("x".repeat(200_000))),
            bundle: Default::default(),
        });
        let m = run_result(Id::Number(1), "r", r);
        assert!(m.to_vec().unwrap().len() <= DEFAULT_MAX_MESSAGE_BYTES);
        let Message::Response(resp) = m else {
            panic!("not a response")
        };
        let v = resp.outcome.unwrap();
        // The 600 kB item went; the rest (with the value) fits.
        assert_eq!(v["display_dropped"], 1, "{}", v["display_dropped"]);
        assert_eq!(v["display"].as_array().unwrap().len(), 2);
        assert_eq!(v["value"]["repr"], "[...]");
        assert!(v["value"]["json"].is_string());
        assert_eq!(
            (v["stdout"].as_str(), v["stdout_truncated"].as_bool()),
            (Some("kept"), Some(false))
        );
    }
}
