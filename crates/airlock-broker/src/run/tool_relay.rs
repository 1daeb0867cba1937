//! The guest's `call_tool` requests, relayed to a [`ToolHandler`] one at a time, under the
//! run's call limit and response cap. Shared by one-shot runs and stateful kernels.
use airlock_protocol::{ErrorCode, ErrorObject, Id, Message, Request, Response};
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::Value;

use crate::limits::Limits;
use crate::tools::{ToolFailure, ToolHandler};

type ToolFuture<'a> = BoxFuture<'a, (Id, Result<Value, ToolFailure>)>;

/// At most one tool call in flight, and the count of calls made.
pub(crate) struct ToolRelay<'a> {
    tools: &'a dyn ToolHandler,
    in_flight: Option<ToolFuture<'a>>,
    /// The id of the call in flight.
    in_flight_id: Option<Id>,
    /// Tool calls the program made (refused ones included).
    pub(crate) calls: u32,
}

pub(crate) fn error_response(id: Id, code: ErrorCode, message: impl Into<String>) -> Message {
    Message::Response(Response::error(id, ErrorObject::new(code, message)))
}

impl<'a> ToolRelay<'a> {
    pub(crate) fn new(tools: &'a dyn ToolHandler) -> Self {
        ToolRelay {
            tools,
            in_flight: None,
            in_flight_id: None,
            calls: 0,
        }
    }

    /// True while a call is being served.
    pub(crate) fn busy(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Take a `call_tool` request: start serving it, or the answer to send back at once (a
    /// refusal, or the reply of a handler that finished on its first poll — an in-process tool
    /// usually does, and answering inline saves a turn of the caller's `select!` loop).
    pub(crate) fn request(&mut self, req: Request, limits: &Limits) -> Option<Message> {
        self.calls = self.calls.saturating_add(1);
        let id = req.id.clone();
        let reject = |code, m: String| Some(error_response(id.clone(), code, m));
        if self.calls > limits.max_tool_calls {
            let m = format!(
                "tool call limit of {} per run reached",
                limits.max_tool_calls
            );
            return reject(ErrorCode::ToolCallLimit, m);
        }
        if self.in_flight.is_some() {
            return reject(ErrorCode::Busy, "one tool call at a time".into());
        }
        match parse_call(req.params) {
            Ok((name, args)) => {
                let tools = self.tools;
                let key = id.clone();
                let mut call: ToolFuture<'a> = Box::pin(async move {
                    let outcome = tools.call(&name, args).await;
                    (id, outcome)
                });
                // Polled once here with a no-op waker; one still pending is polled again, with
                // the task's waker, by `answered` (a future wakes the waker of its last poll).
                if let Some((id, outcome)) = (&mut call).now_or_never() {
                    return Some(reply(id, outcome, limits));
                }
                self.in_flight_id = Some(key);
                self.in_flight = Some(call);
                None
            }
            Err(m) => reject(ErrorCode::InvalidParams, m),
        }
    }

    /// The answer to the call in flight, once its handler finishes (pending when none is).
    pub(crate) async fn answered(&mut self, limits: &Limits) -> Message {
        let Some(f) = self.in_flight.as_mut() else {
            return std::future::pending().await;
        };
        let (id, outcome) = f.await;
        self.in_flight = None;
        self.in_flight_id = None;
        reply(id, outcome, limits)
    }

    /// Drop the call in flight (its handler future is cancelled); the error answer to send so
    /// the guest is not left waiting, if one was in flight.
    pub(crate) fn abandon(&mut self, why: &str) -> Option<Message> {
        drop(self.in_flight.take()?);
        let id = self.in_flight_id.take()?;
        Some(error_response(id, ErrorCode::Shutdown, why))
    }
}

/// The message answering a call: its value within the response cap, or its failure.
fn reply(id: Id, outcome: Result<Value, ToolFailure>, limits: &Limits) -> Message {
    match outcome {
        Ok(value) => {
            let size = encoded_len(&value);
            if size > limits.max_tool_response_bytes {
                error_response(
                    id,
                    ErrorCode::OutputLimit,
                    format!(
                        "tool response of {size} bytes exceeds the {} byte cap",
                        limits.max_tool_response_bytes
                    ),
                )
            } else {
                Message::Response(Response::success(id, value))
            }
        }
        Err(f) => Message::Response(Response::error(
            id,
            ErrorObject {
                code: f.code.code(),
                message: f.message,
                data: f.data,
            },
        )),
    }
}

/// The length of `value`'s JSON encoding, counted without building it.
fn encoded_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    match serde_json::to_writer(&mut n, value) {
        Ok(()) => n.0,
        Err(_) => usize::MAX,
    }
}

fn parse_call(params: Option<Value>) -> Result<(String, Value), String> {
    let mut params = match params {
        Some(Value::Object(m)) => m,
        _ => return Err("call_tool params must be an object {tool, args}".into()),
    };
    let name = match params.remove("tool") {
        Some(Value::String(s)) => s,
        _ => return Err("call_tool needs a string `tool`".into()),
    };
    Ok((name, params.remove("args").unwrap_or(Value::Null)))
}
