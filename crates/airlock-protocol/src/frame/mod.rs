//! Content-Length framing: `Content-Length: N\r\n\r\n` then exactly `N` bytes of JSON.
//!
//! One sans-I/O decoder (`decoder.rs`, with the header rules in `header.rs`) and two thin I/O
//! shells around it: [`FrameReader`] for `std::io::Read` and, with the `tokio` feature,
//! [`AsyncFrameReader`] for `tokio::io::AsyncRead`. Writers build the whole frame first and
//! refuse a body over the cap, so an over-cap frame never reaches the wire.
//!
//! Memory is bounded by [`FrameLimits`]: a reader holds at most
//! `max_header_bytes + max_body` bytes, grows its buffer with the bytes that actually arrive
//! (never by the claimed length), and rejects a bad header before reading any body byte.

mod blocking;
mod decoder;
mod encode;
mod error;
mod header;
mod limits;
#[cfg(feature = "tokio")]
mod tokio_io;

pub use blocking::{write_frame, write_frame_with, write_message, write_message_with, FrameReader};
pub use encode::{encode_frame, encode_message};
pub use error::{FrameError, FramePart};
pub use limits::{FrameLimits, DEFAULT_MAX_HEADER_BYTES, DEFAULT_MAX_MESSAGE_BYTES};
#[cfg(feature = "tokio")]
pub use tokio_io::{
    write_frame_async, write_frame_async_with, write_message_async, write_message_async_with,
    AsyncFrameReader,
};
