//! JSON-RPC 2.0 message types and their serialization.
//!
//! Serialization always emits `"jsonrpc":"2.0"` first. Deserialization goes through the
//! strict decoder (see [`Message::from_slice`]); there is no lenient path.

use std::fmt;

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

pub use crate::error_object::ErrorObject;

/// The value of the `jsonrpc` member every message carries.
pub const JSONRPC_VERSION: &str = "2.0";

/// A request id: a JSON integer that fits in `i64`, or a JSON string.
///
/// Fractional numbers, integers beyond `i64` and `null` are not ids (a `null` id appears only
/// as `None` in [`Response::id`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Id {
    /// A numeric id.
    Number(i64),
    /// A string id.
    String(String),
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Id::Number(n)
    }
}

impl From<String> for Id {
    fn from(s: String) -> Self {
        Id::String(s)
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id::String(s.to_owned())
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Number(n) => write!(f, "{n}"),
            Id::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// A call that expects exactly one [`Response`] with the same id.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Correlates the response with this request.
    pub id: Id,
    /// The method name (see [`crate::method`]).
    pub method: String,
    /// Parameters: a JSON object or array when present (the decoder rejects anything else).
    pub params: Option<Value>,
}

/// A one-way message: no id, never answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The method name (see [`crate::method`]).
    pub method: String,
    /// Parameters: a JSON object or array when present (the decoder rejects anything else).
    pub params: Option<Value>,
}

/// The answer to a [`Request`]: a `result` or an `error`, never both.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The id of the request answered; `None` (serialized as `null`) only on an error response
    /// whose sender could not determine the id (parse error, invalid request, framing error).
    pub id: Option<Id>,
    /// `Ok` is serialized as the `result` member, `Err` as the `error` member.
    pub outcome: Result<Value, ErrorObject>,
}

/// Any JSON-RPC 2.0 message airlock sends or accepts (batches are not supported).
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A call expecting a response.
    Request(Request),
    /// A one-way message.
    Notification(Notification),
    /// The answer to a request.
    Response(Response),
}

impl Response {
    /// A successful response carrying `result`.
    pub fn success(id: Id, result: Value) -> Self {
        Response {
            id: Some(id),
            outcome: Ok(result),
        }
    }

    /// An error response. Pass an [`Id`], or `None` when the request's id could not be
    /// determined (the only case where a `null` id is allowed).
    pub fn error(id: impl Into<Option<Id>>, error: ErrorObject) -> Self {
        Response {
            id: id.into(),
            outcome: Err(error),
        }
    }
}

impl Message {
    /// A request message.
    pub fn request(id: impl Into<Id>, method: impl Into<String>, params: Option<Value>) -> Self {
        Message::Request(Request {
            id: id.into(),
            method: method.into(),
            params,
        })
    }

    /// A notification message.
    pub fn notification(method: impl Into<String>, params: Option<Value>) -> Self {
        Message::Notification(Notification {
            method: method.into(),
            params,
        })
    }

    /// A successful response message.
    pub fn success(id: impl Into<Id>, result: Value) -> Self {
        Message::Response(Response::success(id.into(), result))
    }

    /// An error response message (`None` id only when the request id is unknown).
    pub fn error(id: impl Into<Option<Id>>, error: ErrorObject) -> Self {
        Message::Response(Response::error(id, error))
    }

    /// The message's id: the request's id or the response's (non-null) id.
    pub fn id(&self) -> Option<&Id> {
        match self {
            Message::Request(r) => Some(&r.id),
            Message::Notification(_) => None,
            Message::Response(r) => r.id.as_ref(),
        }
    }

    /// The method name of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request(r) => Some(&r.method),
            Message::Notification(n) => Some(&n.method),
            Message::Response(_) => None,
        }
    }

    /// Serializes the message to compact JSON (no framing).
    pub fn to_vec(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(self)
    }
}

impl From<Request> for Message {
    fn from(r: Request) -> Self {
        Message::Request(r)
    }
}

impl From<Notification> for Message {
    fn from(n: Notification) -> Self {
        Message::Notification(n)
    }
}

impl From<Response> for Message {
    fn from(r: Response) -> Self {
        Message::Response(r)
    }
}

impl Serialize for Request {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3 + usize::from(self.params.is_some())))?;
        m.serialize_entry("jsonrpc", JSONRPC_VERSION)?;
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("method", &self.method)?;
        if let Some(params) = &self.params {
            m.serialize_entry("params", params)?;
        }
        m.end()
    }
}

impl Serialize for Notification {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2 + usize::from(self.params.is_some())))?;
        m.serialize_entry("jsonrpc", JSONRPC_VERSION)?;
        m.serialize_entry("method", &self.method)?;
        if let Some(params) = &self.params {
            m.serialize_entry("params", params)?;
        }
        m.end()
    }
}

impl Serialize for Response {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("jsonrpc", JSONRPC_VERSION)?;
        m.serialize_entry("id", &self.id)?;
        match &self.outcome {
            Ok(result) => m.serialize_entry("result", result)?,
            Err(error) => m.serialize_entry("error", error)?,
        }
        m.end()
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Message::Request(r) => r.serialize(s),
            Message::Notification(n) => n.serialize(s),
            Message::Response(r) => r.serialize(s),
        }
    }
}
