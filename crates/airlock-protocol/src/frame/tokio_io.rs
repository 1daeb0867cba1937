//! The tokio I/O shell: [`AsyncFrameReader`] over `AsyncRead`, and async frame writers.
//!
//! Same decoder, same limits and errors as the blocking shell.

use std::fmt;
use std::io::ErrorKind;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::decoder::{FrameDecoder, READ_CHUNK};
use super::encode::{encode_frame, encode_message};
use super::error::FrameError;
use super::limits::FrameLimits;
use crate::message::Message;

/// Reads Content-Length frames from an async source, with its own bounded buffering.
///
/// [`AsyncFrameReader::read_frame`] and [`AsyncFrameReader::read_message`] are cancel-safe:
/// bytes are handed to the decoder only after a read completes, so dropping the future (for
/// example in `tokio::select!`) loses nothing and the next call continues the same frame.
pub struct AsyncFrameReader<R> {
    inner: R,
    decoder: FrameDecoder,
    scratch: Box<[u8]>,
}

impl<R> fmt::Debug for AsyncFrameReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFrameReader")
            .field("decoder", &self.decoder)
            .finish_non_exhaustive()
    }
}

impl<R: AsyncRead + Unpin> AsyncFrameReader<R> {
    /// A reader with [`FrameLimits::default`].
    pub fn new(inner: R) -> Self {
        AsyncFrameReader::with_limits(inner, FrameLimits::default())
    }

    /// A reader enforcing `limits`.
    pub fn with_limits(inner: R, limits: FrameLimits) -> Self {
        AsyncFrameReader {
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
    /// Error behaviour is that of [`super::FrameReader::read_frame`].
    pub async fn read_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        loop {
            if let Some(body) = self.decoder.decode()? {
                return Ok(Some(body));
            }
            let window = self.decoder.read_window();
            let n = loop {
                match self.inner.read(&mut self.scratch[..window]).await {
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
    pub async fn read_message(&mut self) -> Result<Option<Message>, FrameError> {
        match self.read_frame().await? {
            Some(body) => Ok(Some(Message::from_slice(&body)?)),
            None => Ok(None),
        }
    }
}

/// Writes one frame with the default cap, then flushes. Not cancel-safe: a dropped future
/// may leave a partial frame on the wire.
pub async fn write_frame_async<W: AsyncWrite + Unpin>(
    writer: &mut W,
    body: &[u8],
) -> Result<(), FrameError> {
    write_frame_async_with(writer, body, &FrameLimits::default()).await
}

/// Writes one frame, refusing (and writing nothing) if `body` exceeds `limits.max_body`.
pub async fn write_frame_async_with<W: AsyncWrite + Unpin>(
    writer: &mut W,
    body: &[u8],
    limits: &FrameLimits,
) -> Result<(), FrameError> {
    let frame = encode_frame(body, limits)?;
    writer.write_all(&frame).await?;
    writer.flush().await?;
    Ok(())
}

/// Serializes and writes one message with the default cap, then flushes.
pub async fn write_message_async<W: AsyncWrite + Unpin>(
    writer: &mut W,
    message: &Message,
) -> Result<(), FrameError> {
    write_message_async_with(writer, message, &FrameLimits::default()).await
}

/// Serializes and writes one message, refusing (and writing nothing) if it exceeds the cap.
pub async fn write_message_async_with<W: AsyncWrite + Unpin>(
    writer: &mut W,
    message: &Message,
    limits: &FrameLimits,
) -> Result<(), FrameError> {
    let frame = encode_message(message, limits)?;
    writer.write_all(&frame).await?;
    writer.flush().await?;
    Ok(())
}
