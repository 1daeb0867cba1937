//! The strict decoder: one complete body in, one [`Message`] or a typed rejection out.
//!
//! Order of checks (each failure is a distinct error): UTF-8, JSON syntax (including trailing
//! bytes and serde_json's nesting limit of 128), batch (top-level array), top-level object,
//! then the JSON-RPC 2.0 shape. Top-level members are matched exactly: unknown or duplicate
//! members are rejected, so two parsers can never disagree on which `id` or `result` counts.

use std::fmt;

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::error_code::ErrorCode;
use crate::message::{ErrorObject, Id, Message, Notification, Request, Response, JSONRPC_VERSION};

/// Longest member name echoed back in a [`ShapeError`], so an error never carries a large
/// attacker-chosen string.
const MAX_ECHOED_NAME: usize = 64;

/// Why a complete body is not an acceptable message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The body is not UTF-8.
    #[error("body is not valid utf-8 (valid up to byte {valid_up_to})")]
    InvalidUtf8 {
        /// Length of the valid UTF-8 prefix.
        valid_up_to: usize,
    },
    /// The body is not one JSON value (syntax, trailing bytes, nesting deeper than 128).
    #[error("body is not valid json: {0}")]
    NotJson(#[source] serde_json::Error),
    /// The body is a JSON array: batches are not supported.
    #[error("json-rpc batches are not supported")]
    BatchUnsupported,
    /// The body is JSON but not a JSON-RPC 2.0 message airlock accepts.
    #[error("invalid json-rpc message: {0}")]
    InvalidShape(#[from] ShapeError),
}

impl DecodeError {
    /// The code to report to the peer: `ParseError` for bytes that are not JSON,
    /// `InvalidRequest` for JSON of the wrong shape.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            DecodeError::InvalidUtf8 { .. } | DecodeError::NotJson(_) => ErrorCode::ParseError,
            DecodeError::BatchUnsupported | DecodeError::InvalidShape(_) => {
                ErrorCode::InvalidRequest
            }
        }
    }
}

/// A JSON value that breaks a JSON-RPC 2.0 shape rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShapeError {
    /// The top-level value is not an object.
    #[error("message is not a json object")]
    NotAnObject,
    /// A top-level member appears twice.
    #[error("duplicate member `{0}`")]
    DuplicateMember(String),
    /// A top-level member outside `jsonrpc`, `id`, `method`, `params`, `result`, `error`.
    #[error("unknown member `{0}`")]
    UnknownMember(String),
    /// `jsonrpc` is missing or is not the string `"2.0"`.
    #[error("member `jsonrpc` must be the string \"2.0\"")]
    BadVersion,
    /// `method` is not a string.
    #[error("member `method` must be a string")]
    MethodNotString,
    /// `params` is present but neither an object nor an array.
    #[error("member `params` must be an object or an array")]
    BadParams,
    /// `id` is neither an `i64` integer nor a string.
    #[error("member `id` must be an integer in i64 range or a string")]
    BadId,
    /// A request carries `"id": null`.
    #[error("a request id must not be null")]
    NullRequestId,
    /// A message has `method` and also `result` or `error`.
    #[error("a request must not carry `result` or `error`")]
    RequestWithOutcome,
    /// A response carries `params`.
    #[error("a response must not carry `params`")]
    ResponseWithParams,
    /// A response carries both `result` and `error`.
    #[error("a response must carry exactly one of `result` and `error`, not both")]
    ResultAndError,
    /// A response has no `id` member.
    #[error("a response must carry `id`")]
    MissingResponseId,
    /// A success response carries `"id": null`.
    #[error("a null id is only allowed on error responses")]
    NullIdOnSuccess,
    /// `error` is not `{"code": <i64>, "message": <string>, "data"?: <any>}`.
    #[error("member `error` must be an object with integer `code`, string `message` and optional `data`")]
    BadErrorObject,
    /// None of `method`, `result`, `error` is present.
    #[error("message has none of `method`, `result`, `error`")]
    NotAMessage,
}

/// Decodes one complete body (see the module docs for the order of checks).
pub(crate) fn decode_message(body: &[u8]) -> Result<Message, DecodeError> {
    let text = std::str::from_utf8(body).map_err(|e| DecodeError::InvalidUtf8 {
        valid_up_to: e.valid_up_to(),
    })?;
    // Pass 1: syntax only, so malformed JSON is always a parse error, never a shape error.
    // Every value is read as `serde_json::Value` would read it (numbers in range, escapes
    // paired), without being built: `IgnoredAny` skips numbers and strings unchecked.
    serde_json::from_str::<Syntax>(text).map_err(DecodeError::NotJson)?;
    match text
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .as_bytes()
        .first()
    {
        Some(b'[') => return Err(DecodeError::BatchUnsupported),
        Some(b'{') => {}
        _ => return Err(ShapeError::NotAnObject.into()),
    }
    // Pass 2: the text is a syntactically valid object, so this only fails on limits
    // serde_json applies to values (e.g. number range), which are parse errors too.
    let envelope: Envelope = serde_json::from_str(text).map_err(DecodeError::NotJson)?;
    Ok(envelope.into_message()?)
}

/// A JSON value read exactly as `serde_json::Value` reads it, and dropped: the syntax pass.
struct Syntax;

impl<'de> Deserialize<'de> for Syntax {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SyntaxVisitor)
    }
}

struct SyntaxVisitor;

impl<'de> Visitor<'de> for SyntaxVisitor {
    type Value = Syntax;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any json value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Syntax, E> {
        Ok(Syntax)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Syntax, E> {
        Ok(Syntax)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Syntax, E> {
        Ok(Syntax)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Syntax, E> {
        Ok(Syntax)
    }

    fn visit_str<E>(self, _: &str) -> Result<Syntax, E> {
        Ok(Syntax)
    }

    fn visit_unit<E>(self) -> Result<Syntax, E> {
        Ok(Syntax)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Syntax, A::Error> {
        while seq.next_element::<Syntax>()?.is_some() {}
        Ok(Syntax)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Syntax, A::Error> {
        while map.next_entry::<Syntax, Syntax>()?.is_some() {}
        Ok(Syntax)
    }
}

/// The top-level members of a message, each absent, `null` or a value, plus the first
/// duplicate/unknown member seen (recorded rather than raised, so the JSON is still consumed).
#[derive(Default)]
pub(crate) struct Envelope {
    jsonrpc: Option<Value>,
    id: Option<Value>,
    method: Option<Value>,
    params: Option<Value>,
    result: Option<Value>,
    error: Option<Value>,
    problem: Option<ShapeError>,
}

fn echo(name: &str) -> String {
    name.chars().take(MAX_ECHOED_NAME).collect()
}

impl<'de> Deserialize<'de> for Envelope {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EnvelopeVisitor)
    }
}

struct EnvelopeVisitor;

impl<'de> Visitor<'de> for EnvelopeVisitor {
    type Value = Envelope;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a json-rpc 2.0 message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
        let mut env = Envelope::default();
        while let Some(key) = map.next_key::<String>()? {
            let slot = match key.as_str() {
                "jsonrpc" => &mut env.jsonrpc,
                "id" => &mut env.id,
                "method" => &mut env.method,
                "params" => &mut env.params,
                "result" => &mut env.result,
                "error" => &mut env.error,
                other => {
                    env.problem
                        .get_or_insert(ShapeError::UnknownMember(echo(other)));
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            if slot.is_some() {
                env.problem.get_or_insert(ShapeError::DuplicateMember(key));
                map.next_value::<IgnoredAny>()?;
            } else {
                *slot = Some(map.next_value::<Value>()?);
            }
        }
        Ok(env)
    }
}

fn parse_id(v: Value) -> Result<Id, ShapeError> {
    match v {
        Value::Number(n) => n.as_i64().map(Id::Number).ok_or(ShapeError::BadId),
        Value::String(s) => Ok(Id::String(s)),
        _ => Err(ShapeError::BadId),
    }
}

fn parse_error_object(v: Value) -> Result<ErrorObject, ShapeError> {
    let Value::Object(mut m) = v else {
        return Err(ShapeError::BadErrorObject);
    };
    let code = m
        .remove("code")
        .and_then(|c| c.as_i64())
        .ok_or(ShapeError::BadErrorObject)?;
    let Some(Value::String(message)) = m.remove("message") else {
        return Err(ShapeError::BadErrorObject);
    };
    let data = m.remove("data");
    if !m.is_empty() {
        return Err(ShapeError::BadErrorObject);
    }
    Ok(ErrorObject {
        code,
        message,
        data,
    })
}

impl Envelope {
    /// Applies the shape rules (documented in `docs/protocol.md`).
    pub(crate) fn into_message(self) -> Result<Message, ShapeError> {
        if let Some(problem) = self.problem {
            return Err(problem);
        }
        match &self.jsonrpc {
            Some(Value::String(v)) if v == JSONRPC_VERSION => {}
            _ => return Err(ShapeError::BadVersion),
        }
        let params = match self.params {
            None => None,
            Some(v @ (Value::Object(_) | Value::Array(_))) => Some(v),
            Some(_) => return Err(ShapeError::BadParams),
        };
        if let Some(method) = self.method {
            let Value::String(method) = method else {
                return Err(ShapeError::MethodNotString);
            };
            if self.result.is_some() || self.error.is_some() {
                return Err(ShapeError::RequestWithOutcome);
            }
            return match self.id {
                None => Ok(Message::Notification(Notification { method, params })),
                Some(Value::Null) => Err(ShapeError::NullRequestId),
                Some(id) => Ok(Message::Request(Request {
                    id: parse_id(id)?,
                    method,
                    params,
                })),
            };
        }
        if self.result.is_none() && self.error.is_none() {
            return Err(ShapeError::NotAMessage);
        }
        if params.is_some() {
            return Err(ShapeError::ResponseWithParams);
        }
        let id = match self.id {
            None => return Err(ShapeError::MissingResponseId),
            Some(Value::Null) => None,
            Some(id) => Some(parse_id(id)?),
        };
        let outcome = match (self.result, self.error) {
            (Some(_), None) if id.is_none() => return Err(ShapeError::NullIdOnSuccess),
            (Some(result), None) => Ok(result),
            (None, Some(error)) => Err(parse_error_object(error)?),
            (Some(_), Some(_)) => return Err(ShapeError::ResultAndError),
            (None, None) => return Err(ShapeError::NotAMessage),
        };
        Ok(Message::Response(Response { id, outcome }))
    }
}

impl Message {
    /// Strictly decodes one message from a complete body (see `docs/protocol.md`).
    pub fn from_slice(body: &[u8]) -> Result<Message, DecodeError> {
        decode_message(body)
    }
}

impl<'de> Deserialize<'de> for Message {
    /// Applies the same shape rules as [`Message::from_slice`] (batches are rejected because a
    /// message must be an object); errors become the deserializer's custom error.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let envelope = Envelope::deserialize(d)?;
        envelope.into_message().map_err(serde::de::Error::custom)
    }
}
