//! The guest's `call_tool` requests, relayed to a [`ToolHandler`] one at a time, under the
//! run's call limit and response cap. Shared by one-shot runs and stateful kernels.
use airlock_protocol::{ErrorCode, ErrorObject, Id, Message, Request, Response};
use futures_util::future::BoxFuture;
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

    /// Take a `call_tool` request: start serving it, or the immediate refusal to send back.
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
                self.in_flight_id = Some(id.clone());
                self.in_flight = Some(Box::pin(async move {
                    let outcome = tools.call(&name, args).await;
                    (id, outcome)
                }));
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
        match outcome {
            Ok(value) => {
                let size = serde_json::to_vec(&value).map_or(usize::MAX, |v| v.len());
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

    /// Drop the call in flight (its handler future is cancelled); the error answer to send so
    /// the guest is not left waiting, if one was in flight.
    pub(crate) fn abandon(&mut self, why: &str) -> Option<Message> {
        drop(self.in_flight.take()?);
        let id = self.in_flight_id.take()?;
        Some(error_response(id, ErrorCode::Shutdown, why))
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
