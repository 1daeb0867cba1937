//! What the guest's messages mean to the broker: the attestation in `ready`, a `refused`
//! layer, the `execute` result, and a stray message named for an error; and what is still
//! queued on the socket once the stage exited.
use std::collections::BTreeMap;
use std::time::Duration;

use airlock_executor::attest::Attestation;
use airlock_protocol::{Id, Message};
use serde_json::Value;

use super::channel::Inbox;
use super::verdict::Hint;

/// Request id of the `execute` request.
pub(crate) const EXECUTE_ID: i64 = 1;
/// How long to look for a message still queued once the stage exited.
const DRAIN: Duration = Duration::from_secs(2);

/// Check the attestation a `ready` notification carries against the broker's own namespaces.
pub(crate) fn check_ready(
    params: Option<Value>,
    broker_ns: &BTreeMap<String, String>,
) -> Result<(), String> {
    let proof: Result<Attestation, _> = serde_json::from_value(params.unwrap_or(Value::Null));
    match proof {
        Ok(a) => a.verify(broker_ns).map_err(|v| v.join("; ")),
        Err(e) => Err(format!("unreadable attestation: {e}")),
    }
}

pub(crate) use crate::refusal::refusal_of;

/// A `refused` notification still queued after the stage exited.
pub(super) async fn drain_refusal(inbox: &mut Inbox) -> Option<String> {
    let until = tokio::time::Instant::now() + DRAIN;
    loop {
        match tokio::time::timeout_at(until, inbox.recv()).await {
            Ok(Some(Ok(Some(Message::Notification(n))))) if n.method == "refused" => {
                return Some(refusal_of(n.params));
            }
            Ok(Some(Ok(Some(_)))) => continue,
            _ => return None,
        }
    }
}

/// What a running Python program's stage left on its socket when it exited.
#[derive(Default)]
pub(super) struct Leftover {
    /// The `execute` result, if it was there.
    pub(super) hint: Option<Hint>,
    /// A message the program had no business sending (named): the same protocol error the
    /// supervision loop would have called it, had it read it before it saw the exit.
    pub(super) stray: Option<String>,
}

/// Read what is left on the socket after the executor exited, looking for the execute result
/// and for anything the loop would have refused (a forged `refused`, say); an unanswered
/// `call_tool` of a program that died is neither.
pub(super) async fn drain_hint(inbox: &mut Inbox) -> Leftover {
    let until = tokio::time::Instant::now() + DRAIN;
    let mut left = Leftover::default();
    loop {
        match tokio::time::timeout_at(until, inbox.recv()).await {
            Ok(Some(Ok(Some(Message::Response(r))))) if r.id == Some(Id::Number(EXECUTE_ID)) => {
                left.hint = r.outcome.ok().and_then(|v| serde_json::from_value(v).ok());
                return left;
            }
            Ok(Some(Ok(Some(Message::Request(r))))) if r.method == "call_tool" => continue,
            Ok(Some(Ok(Some(other)))) => {
                left.stray.get_or_insert_with(|| describe(&other));
            }
            _ => return left,
        }
    }
}

/// A guest's message named for an error message, within bounds whatever the guest chose.
pub(crate) fn describe(m: &Message) -> String {
    match m {
        Message::Request(r) => format!("request {:?}", truncate(&r.method)),
        Message::Notification(n) => format!("notification {:?}", truncate(&n.method)),
        Message::Response(r) => format!("response to {}", truncate(&format!("{:?}", r.id))),
    }
}

/// At most 64 characters of `s`.
fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use airlock_protocol::Response;

    use super::*;

    /// Found by the `guest_messages` fuzz target: a guest's stray response was named with its
    /// whole id, so a guest chose up to a frame (1 MiB) of the run's protocol error message.
    #[test]
    fn a_stray_message_is_named_within_bounds_whatever_its_id() {
        let id = Id::String("x".repeat(1 << 20));
        let named = describe(&Message::Response(Response::success(id, Value::Null)));
        assert!(named.len() <= 300, "{} bytes", named.len());
        assert!(named.starts_with("response to "), "{named}");
        let method = "\u{1b}".repeat(1 << 16);
        let named = describe(&Message::notification(&method, None));
        assert!(named.len() <= 700, "{} bytes", named.len());
    }

    /// What a program left queued when the broker saw its exit first.
    async fn left_after_exit(messages: &[Message]) -> Leftover {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let mut theirs = theirs;
        for m in messages {
            airlock_protocol::write_message(&mut theirs, m).unwrap();
        }
        drop(theirs);
        let (mut inbox, _outbox, _flusher) =
            super::super::channel::open(tokio::net::UnixStream::from_std(ours).unwrap());
        drain_hint(&mut inbox).await
    }

    /// A program that forges a `refused` and exits before the broker read it gets the same
    /// verdict as when the loop reads it first: a stray message, not a quiet completion.
    #[tokio::test]
    async fn a_forged_message_left_after_the_exit_is_stray_and_the_result_still_found() {
        let forged = Message::notification(
            "refused",
            Some(serde_json::json!({"layer": "landlock", "message": "FORGED"})),
        );
        let result = Message::Response(Response::success(
            Id::Number(EXECUTE_ID),
            serde_json::json!({"ok": true}),
        ));
        let left = left_after_exit(&[forged, result.clone()]).await;
        assert_eq!(left.stray.as_deref(), Some("notification \"refused\""));
        assert!(
            left.hint.is_some(),
            "the execute result after it is still read"
        );
        // An unanswered call_tool of a program that died is no protocol error.
        let call = Message::request(Id::Number(7), "call_tool", None);
        let left = left_after_exit(&[call, result]).await;
        assert!(left.stray.is_none());
        assert!(left.hint.is_some());
    }
}
