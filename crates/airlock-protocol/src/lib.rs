//! JSON-RPC 2.0 wire types and Content-Length framing for airlock.
//!
//! Both hops speak the same protocol: broker <-> executor over an inherited Unix socket, and
//! orchestrator <-> broker over WebSocket or stdio. This crate holds only what travels on the
//! wire — messages ([`Message`]), the closed error-code table ([`ErrorCode`]), the method names
//! ([`method`]) and the framing ([`frame`]) — with no process code and no policy.
//!
//! Everything read from a peer is bounded: a frame's body by [`FrameLimits::max_body`]
//! (default [`DEFAULT_MAX_MESSAGE_BYTES`]), its header section by
//! [`FrameLimits::max_header_bytes`], and the claimed `Content-Length` is checked against the
//! cap before a single body byte is read. The rules are written down in `docs/protocol.md`.

mod decode;
pub mod error_code;
mod error_object;
pub mod frame;
pub mod message;
pub mod method;

pub use decode::{DecodeError, ShapeError};
pub use error_code::ErrorCode;
pub use frame::{
    encode_frame, encode_message, write_frame, write_frame_with, write_message, write_message_with,
    FrameError, FrameLimits, FramePart, FrameReader, DEFAULT_MAX_HEADER_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
};
#[cfg(feature = "tokio")]
pub use frame::{
    write_frame_async, write_frame_async_with, write_message_async, write_message_async_with,
    AsyncFrameReader,
};
pub use message::{ErrorObject, Id, Message, Notification, Request, Response, JSONRPC_VERSION};
