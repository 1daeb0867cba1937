//! What a running guest sends the broker, as a one-shot Python run's supervision handles it
//! (`run::supervise::drive`, the `Running` arms in `run/inbound.rs`): `call_tool` requests through the run's tool relay
//! (`run::tool_relay`, shared with a kernel's cells), the report answering `execute` into the
//! run's result, anything else named in the run's protocol error; and the guest's stdout
//! through the capture (`output::capture`) into the result's text.
//!
//! Input: a selector byte (bits 0-1: `max_tool_calls`; bit 2: a 64-byte tool-response cap;
//! bit 3: the handler fails; bits 4-7: the output cap, 5 bytes a step), the guest's exit code
//! byte, then one message per line; an empty line is the handler of the call in flight
//! finishing. As in the run, bytes that are not a message, any message the run does not expect
//! (a second report, a call after the report, a `refused` from a Python program) end it. The
//! same bytes are the guest's stdout, read 1-15 bytes at a time (the selector's low nibble).
//!
//! The handler answers on its first poll (the relay answers inline) for a tool name of even
//! length, on its second (the call is in flight) for an odd one.
//!
//! Oracles: a `call_tool` is refused exactly as its params and the relay's state call for (call
//! limit, one at a time, `{tool: string, args?}`), and otherwise its handler receives exactly
//! the guest's `tool` and `args`; every answer carries the guest's id and a value within the
//! response cap; a call in flight at the end is answered; every message the broker sends back
//! re-encodes and decodes to itself; a protocol error names the message within a bounded
//! length; the result of a run that exited non-zero is never `completed`, its error message
//! within 2048 characters; the capture keeps exactly the head of what was written, within the
//! cap, and its text drops at most a cut UTF-8 sequence.
#![no_main]

#[path = "../common/mod.rs"]
mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use airlock_broker::fuzzing::{describe, reported, Relay, EXECUTE_ID};
use airlock_broker::output::{capture, Captured};
use airlock_broker::{Limits, RunStatus, ToolFailure, ToolHandler};
use airlock_protocol::{ErrorCode, Id, Message, Request};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

/// Records what it is called with; answers with it (or fails carrying it).
struct Recorder {
    fail: bool,
    seen: Mutex<Vec<(String, Value)>>,
}

impl ToolHandler for Recorder {
    fn call<'a>(
        &'a self,
        name: &'a str,
        args: Value,
    ) -> Pin<Box<dyn Future<Output = Result<Value, ToolFailure>> + Send + 'a>> {
        self.seen
            .lock()
            .unwrap()
            .push((name.to_owned(), args.clone()));
        let slow = name.len() % 2 == 1;
        Box::pin(async move {
            if slow {
                PendingOnce(false).await;
            }
            if self.fail {
                Err(ToolFailure {
                    code: ErrorCode::ToolError,
                    message: name.to_owned(),
                    data: Some(args),
                })
            } else {
                Ok(json!({ "tool": name, "args": args }))
            }
        })
    }
}

/// Pending on its first poll (waking its waker), ready on the next: a handler that does not
/// answer at once.
struct PendingOnce(bool);

impl Future for PendingOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// A call whose handler is running: its id, and what the handler was given.
type InFlight = (Id, String, Value);

fuzz_target!(|input: &[u8]| {
    let [selector, exit_code, data @ ..] = input else {
        return;
    };
    let limits = Limits {
        max_tool_calls: u32::from(selector & 3),
        max_tool_response_bytes: if selector & 4 == 0 { 256 * 1024 } else { 64 },
        ..Limits::default()
    };
    let tools = Recorder {
        fail: selector & 8 != 0,
        seen: Mutex::new(Vec::new()),
    };
    let mut relay = Relay::new(&tools);
    let mut in_flight: Option<InFlight> = None;
    let mut report = None;
    for line in data.split(|b| *b == b'\n') {
        if line.is_empty() {
            if let Some(call) = in_flight.take() {
                let answer = common::ready(relay.answered(&limits));
                check_answer(&tools, &limits, call, &answer);
            }
            continue;
        }
        // Bytes that are not a message end the run (the frame reader's protocol error).
        let Ok(msg) = Message::from_slice(line) else {
            break;
        };
        match msg {
            Message::Request(req) if req.method == "call_tool" && report.is_none() => {
                let before = relay.calls();
                if let Some(call) = call_tool(&tools, &mut relay, &limits, req, in_flight.is_some())
                {
                    in_flight = Some(call);
                }
                assert_eq!(relay.calls(), before.saturating_add(1));
                assert_eq!(relay.busy(), in_flight.is_some());
            }
            Message::Response(resp)
                if resp.id == Some(Id::Number(EXECUTE_ID)) && report.is_none() =>
            {
                report = Some(resp.outcome.ok());
            }
            other => {
                // The run ends as a protocol error naming the message: method names cut at 64
                // characters and shown escaped (at most 10 bytes each), ids likewise.
                let named = describe(&other);
                assert!(
                    named.len() <= 32 + 64 * 10,
                    "unbounded: {} bytes",
                    named.len()
                );
                break;
            }
        }
    }
    // A kernel's cell answers the call in flight when it is interrupted.
    if let Some((id, _, _)) = in_flight {
        let last = relay
            .abandon("the run ended")
            .expect("a call in flight is answered");
        assert_error(&last, &id, ErrorCode::Shutdown);
    }
    let cap = usize::from(selector >> 4) * 5;
    let out = captured(data, cap, selector);
    let result = reported(
        report.flatten(),
        i32::from(*exit_code),
        out,
        Captured::default(),
    );
    if *exit_code != 0 {
        assert_ne!(result.status, RunStatus::Completed);
    }
    if let Some(e) = &result.error {
        assert!(e.message.chars().count() <= 2048);
    }
});

/// One `call_tool` through the relay, checked against what its params and the relay's state
/// call for; the call now in flight, if it started.
fn call_tool(
    tools: &Recorder,
    relay: &mut Relay,
    limits: &Limits,
    req: Request,
    busy: bool,
) -> Option<InFlight> {
    let id = req.id.clone();
    let wanted = match &req.params {
        Some(Value::Object(p)) => match p.get("tool") {
            Some(Value::String(name)) => Some((name.clone(), p.get("args").cloned())),
            _ => None,
        },
        _ => None,
    };
    let over = relay.calls().saturating_add(1) > limits.max_tool_calls;
    let refusal = relay.request(req, limits);
    let code = if over {
        ErrorCode::ToolCallLimit
    } else if busy {
        ErrorCode::Busy
    } else if wanted.is_none() {
        ErrorCode::InvalidParams
    } else {
        let (name, args) = wanted?;
        let call = (id, name, args.unwrap_or(Value::Null));
        // A handler ready on its first poll is answered inline; a slow one is in flight.
        return match refusal {
            Some(answer) => {
                check_answer(tools, limits, call, &answer);
                None
            }
            None => Some(call),
        };
    };
    assert_error(&refusal.expect("refused"), &id, code);
    None
}

/// The handler's answer: it got the guest's tool and args; the guest gets its id back, and the
/// value within the cap.
fn check_answer(tools: &Recorder, limits: &Limits, call: InFlight, answer: &Message) {
    let (id, name, args) = call;
    let seen = tools.seen.lock().unwrap().pop().expect("the handler ran");
    assert_eq!(seen, (name.clone(), args.clone()));
    round_trip(answer);
    let Message::Response(r) = answer else {
        panic!("not a response: {answer:?}")
    };
    assert_eq!(r.id.as_ref(), Some(&id));
    if tools.fail {
        let e = r.outcome.as_ref().expect_err("the handler failed");
        assert_eq!(e.error_code(), Some(ErrorCode::ToolError));
        assert_eq!((&e.message, e.data.as_ref()), (&name, Some(&args)));
        return;
    }
    let sent = json!({ "tool": name, "args": args });
    let size = serde_json::to_vec(&sent).unwrap().len();
    match &r.outcome {
        Ok(v) => assert!(size <= limits.max_tool_response_bytes && *v == sent),
        Err(e) => assert!(
            size > limits.max_tool_response_bytes && e.error_code() == Some(ErrorCode::OutputLimit)
        ),
    }
}

fn assert_error(m: &Message, id: &Id, code: ErrorCode) {
    round_trip(m);
    let Message::Response(r) = m else {
        panic!("not a response: {m:?}")
    };
    assert_eq!(r.id.as_ref(), Some(id));
    let e = r.outcome.as_ref().expect_err("an error answer");
    assert_eq!(e.error_code(), Some(code), "{e:?}");
}

fn round_trip(m: &Message) {
    let bytes = m.to_vec().expect("encodes");
    assert_eq!(&Message::from_slice(&bytes).expect("decodes"), m);
}

/// The guest's stdout as the run captures it: the head within the cap, the total, the text.
fn captured(written: &[u8], cap: usize, selector: &u8) -> Captured {
    let reader = common::Chunked {
        data: written,
        chunk: common::chunk_of(*selector),
    };
    let out = common::ready(capture(reader, cap, None));
    assert_eq!(out.total, written.len() as u64);
    assert_eq!(out.kept, written[..written.len().min(cap)]);
    let text = out.text();
    if !out.truncated() {
        assert_eq!(text, String::from_utf8_lossy(&out.kept));
    } else {
        let cut = (0..=3.min(out.kept.len()))
            .any(|n| text == String::from_utf8_lossy(&out.kept[..out.kept.len() - n]));
        assert!(cut, "text is not the kept bytes less a cut sequence");
    }
    out
}
