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
mod error;
mod header;
#[cfg(feature = "tokio")]
mod tokio_io;

pub use blocking::{write_frame, write_frame_with, write_message, write_message_with, FrameReader};
pub use error::{FrameError, FramePart};
#[cfg(feature = "tokio")]
pub use tokio_io::{
    write_frame_async, write_frame_async_with, write_message_async, write_message_async_with,
    AsyncFrameReader,
};

use crate::message::Message;
use crate::DEFAULT_MAX_MESSAGE_BYTES;

/// Default cap on the header section, terminator included (4 KiB).
///
/// A conforming header is `Content-Length: 1048576\r\n\r\n` (28 bytes) plus perhaps a
/// `Content-Type` line; 4 KiB leaves room for tolerated extras and no room for abuse.
pub const DEFAULT_MAX_HEADER_BYTES: usize = 4 * 1024;

/// The bounds a reader enforces and a writer respects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLimits {
    /// Largest accepted body (`Content-Length`), in bytes.
    pub max_body: usize,
    /// Largest accepted header section including the final `\r\n\r\n`, in bytes.
    pub max_header_bytes: usize,
}

impl Default for FrameLimits {
    fn default() -> Self {
        FrameLimits {
            max_body: DEFAULT_MAX_MESSAGE_BYTES,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
        }
    }
}

/// Frames `body` (header + body in one buffer), refusing a body over `limits.max_body`.
pub fn encode_frame(body: &[u8], limits: &FrameLimits) -> Result<Vec<u8>, FrameError> {
    if body.len() > limits.max_body {
        return Err(FrameError::BodyTooLarge {
            len: u64::try_from(body.len()).unwrap_or(u64::MAX),
            max: limits.max_body,
        });
    }
    let header = format!("Content-Length: {}\r\n\r\n", body.len());
    let mut frame = Vec::with_capacity(header.len() + body.len());
    frame.extend_from_slice(header.as_bytes());
    frame.extend_from_slice(body);
    Ok(frame)
}

/// Serializes and frames `message`, refusing a body over `limits.max_body`.
pub fn encode_message(message: &Message, limits: &FrameLimits) -> Result<Vec<u8>, FrameError> {
    let body = message.to_vec().map_err(FrameError::Encode)?;
    encode_frame(&body, limits)
}
