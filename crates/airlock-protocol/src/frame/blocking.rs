//! The blocking I/O shell: [`FrameReader`] over `std::io::Read`, and frame writers.

use std::fmt;
use std::io::{ErrorKind, Read, Write};

use super::decoder::{FrameDecoder, READ_CHUNK};
use super::encode::{encode_frame, encode_message};
use super::error::FrameError;
use super::limits::FrameLimits;
use crate::message::Message;

/// Reads Content-Length frames from a blocking source, with its own bounded buffering.
///
/// Reads are sized by the decoder, so the reader never holds more than
/// `max_header_bytes + max_body` bytes, and may read ahead past the current frame only while
/// looking for a header terminator (never more than `max_header_bytes`). Bytes read ahead are
/// lost by [`FrameReader::into_inner`].
pub struct FrameReader<R> {
    inner: R,
    decoder: FrameDecoder,
    scratch: Box<[u8]>,
}

impl<R> fmt::Debug for FrameReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FrameReader")
            .field("decoder", &self.decoder)
            .finish_non_exhaustive()
    }
}

impl<R: Read> FrameReader<R> {
    /// A reader with [`FrameLimits::default`].
    pub fn new(inner: R) -> Self {
        FrameReader::with_limits(inner, FrameLimits::default())
    }

    /// A reader enforcing `limits`.
    pub fn with_limits(inner: R, limits: FrameLimits) -> Self {
        FrameReader {
            inner,
            decoder: FrameDecoder::new(limits),
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
        }
    }

    /// The limits this reader enforces.
    pub fn limits(&self) -> FrameLimits {
        self.decoder.limits()
    }

    /// Bytes read from the source and not yet returned (read-ahead plus a partial frame).
    pub fn buffered(&self) -> usize {
        self.decoder.buffered()
    }

    /// The underlying source.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The underlying source, mutably (reading from it directly desynchronizes the stream).
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// Returns the source, dropping any buffered bytes.
    pub fn into_inner(self) -> R {
        self.inner
    }

    /// Reads the next frame body. `Ok(None)` is a clean EOF between frames.
    ///
    /// I/O errors leave the reader consistent (no byte is lost); after a framing error other
    /// than [`FrameError::BodyTooLarge`] every call returns [`FrameError::Poisoned`].
    pub fn read_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        loop {
            if let Some(body) = self.decoder.decode()? {
                return Ok(Some(body));
            }
            let window = self.decoder.read_window();
            let n = loop {
                match self.inner.read(&mut self.scratch[..window]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(FrameError::Io(e)),
                }
            };
            if n == 0 {
                self.decoder.finish()?;
                return Ok(None);
            }
            self.decoder.push(&self.scratch[..n.min(window)]);
        }
    }

    /// Reads and strictly decodes the next message. `Ok(None)` is a clean EOF between frames.
    ///
    /// A body that fails to decode is reported as [`FrameError::Decode`]; the frame was
    /// consumed, so the stream stays usable.
    pub fn read_message(&mut self) -> Result<Option<Message>, FrameError> {
        match self.read_frame()? {
            Some(body) => Ok(Some(Message::from_slice(&body)?)),
            None => Ok(None),
        }
    }
}

/// Writes one frame with the default cap, then flushes.
pub fn write_frame<W: Write>(writer: &mut W, body: &[u8]) -> Result<(), FrameError> {
    write_frame_with(writer, body, &FrameLimits::default())
}

/// Writes one frame, refusing (and writing nothing) if `body` exceeds `limits.max_body`.
pub fn write_frame_with<W: Write>(
    writer: &mut W,
    body: &[u8],
    limits: &FrameLimits,
) -> Result<(), FrameError> {
    let frame = encode_frame(body, limits)?;
    writer.write_all(&frame)?;
    writer.flush()?;
    Ok(())
}

/// Serializes and writes one message with the default cap, then flushes.
pub fn write_message<W: Write>(writer: &mut W, message: &Message) -> Result<(), FrameError> {
    write_message_with(writer, message, &FrameLimits::default())
}

/// Serializes and writes one message, refusing (and writing nothing) if it exceeds the cap.
pub fn write_message_with<W: Write>(
    writer: &mut W,
    message: &Message,
    limits: &FrameLimits,
) -> Result<(), FrameError> {
    let frame = encode_message(message, limits)?;
    writer.write_all(&frame)?;
    writer.flush()?;
    Ok(())
}
