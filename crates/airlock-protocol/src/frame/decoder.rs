//! The sans-I/O frame decoder both reader shells drive.
//!
//! A shell asks [`FrameDecoder::read_window`] how many bytes it may read, reads at most that
//! many into its scratch buffer, hands them to [`FrameDecoder::push`], and calls
//! [`FrameDecoder::decode`] until a frame comes out. The window is what keeps memory bounded:
//! while the header is incomplete it never lets the buffer grow past `max_header_bytes`, and
//! once the length is known it never asks for more than the rest of this frame's body. So the
//! buffer never exceeds `max(max_header_bytes, max_body)` and is filled only by bytes that
//! arrived, never reserved from the claimed length.

use std::fmt;

use super::error::{FrameError, FramePart};
use super::header::{find_terminator, parse_header_block, TERMINATOR};
use super::limits::FrameLimits;

/// Largest single read a shell performs (also the size of its scratch buffer).
pub(crate) const READ_CHUNK: usize = 32 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for `\r\n\r\n`; bytes before `scanned` are known not to start it.
    Header { scanned: usize },
    /// Header parsed; waiting for `len` body bytes.
    Body { len: usize },
    /// Skipping the body of an over-cap frame without buffering it.
    Discard { remaining: u64 },
    /// A framing error desynchronized the stream.
    Poisoned,
}

/// Buffer and state machine shared by [`super::FrameReader`] and the async reader.
pub(crate) struct FrameDecoder {
    limits: FrameLimits,
    buf: Vec<u8>,
    state: State,
}

impl fmt::Debug for FrameDecoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FrameDecoder")
            .field("limits", &self.limits)
            .field("buffered", &self.buf.len())
            .field("state", &self.state)
            .finish()
    }
}

impl FrameDecoder {
    pub(crate) fn new(limits: FrameLimits) -> Self {
        FrameDecoder {
            limits,
            buf: Vec::new(),
            state: State::Header { scanned: 0 },
        }
    }

    pub(crate) fn limits(&self) -> FrameLimits {
        self.limits
    }

    /// Bytes currently buffered (read from the source, not yet returned as a frame).
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// How many bytes the shell may read next; positive whenever [`Self::decode`] returned
    /// `Ok(None)`.
    pub(crate) fn read_window(&self) -> usize {
        let window = match self.state {
            State::Header { .. } => self.limits.max_header_bytes.saturating_sub(self.buf.len()),
            State::Body { len } => len.saturating_sub(self.buf.len()),
            State::Discard { remaining } => usize::try_from(remaining).unwrap_or(usize::MAX),
            State::Poisoned => 0,
        };
        window.min(READ_CHUNK)
    }

    /// Appends bytes the shell read (at most [`Self::read_window`] of them).
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    fn poison(&mut self, error: FrameError) -> FrameError {
        self.state = State::Poisoned;
        error
    }

    /// Returns the next complete frame body if the buffer holds one.
    pub(crate) fn decode(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        loop {
            match self.state {
                State::Poisoned => return Err(FrameError::Poisoned),
                State::Discard { remaining } => {
                    let skip = usize::try_from(remaining)
                        .unwrap_or(usize::MAX)
                        .min(self.buf.len());
                    self.buf.drain(..skip);
                    let remaining = remaining - skip as u64;
                    if remaining > 0 {
                        self.state = State::Discard { remaining };
                        return Ok(None);
                    }
                    self.state = State::Header { scanned: 0 };
                }
                State::Header { scanned } => {
                    let searchable = self.buf.len().min(self.limits.max_header_bytes);
                    let from = scanned.saturating_sub(TERMINATOR.len() - 1);
                    let Some(pos) = find_terminator(&self.buf[..searchable], from) else {
                        if self.buf.len() >= self.limits.max_header_bytes {
                            let max = self.limits.max_header_bytes;
                            return Err(self.poison(FrameError::HeaderTooLong { max }));
                        }
                        self.state = State::Header {
                            scanned: searchable,
                        };
                        return Ok(None);
                    };
                    let parsed = parse_header_block(&self.buf[..pos], self.limits.max_body);
                    self.buf.drain(..pos + TERMINATOR.len());
                    match parsed {
                        Ok(len) => self.state = State::Body { len },
                        Err(FrameError::BodyTooLarge { len, max }) => {
                            self.state = State::Discard { remaining: len };
                            return Err(FrameError::BodyTooLarge { len, max });
                        }
                        Err(e) => return Err(self.poison(e)),
                    }
                }
                State::Body { len } => {
                    if self.buf.len() < len {
                        return Ok(None);
                    }
                    let rest = self.buf.split_off(len);
                    let body = std::mem::replace(&mut self.buf, rest);
                    self.state = State::Header { scanned: 0 };
                    return Ok(Some(body));
                }
            }
        }
    }

    /// Called when the source reports EOF: `Ok(())` for a clean EOF between frames,
    /// [`FrameError::Truncated`] inside one.
    pub(crate) fn finish(&mut self) -> Result<(), FrameError> {
        let part = match self.state {
            State::Poisoned => return Err(FrameError::Poisoned),
            State::Header { .. } if self.buf.is_empty() => return Ok(()),
            State::Header { .. } => FramePart::Header,
            State::Body { .. } | State::Discard { .. } => FramePart::Body,
        };
        let received = self.buf.len();
        Err(self.poison(FrameError::Truncated { part, received }))
    }
}
