//! The body reader: framed blocks in, payload bytes out ([`Read`]), every length checked
//! against the format's bounds before a byte is read or a buffer sized.
use std::io::{self, Read};

use crate::error::SnapshotError;
use crate::format::{max_stored_len, BlockHeader, BlockKind, BLOCK_HEADER_LEN, BLOCK_LEN};

/// Reads the payload out of a body.
#[derive(Debug)]
pub(crate) struct Decoder<R> {
    src: R,
    block: Vec<u8>,
    stored: Vec<u8>,
    pos: usize,
    len: usize,
    ended: bool,
}

impl<R: Read> Decoder<R> {
    /// A decoder of the body `src` yields.
    pub(crate) fn new(src: R) -> Decoder<R> {
        Decoder {
            src,
            block: Vec::new(),
            stored: Vec::new(),
            pos: 0,
            len: 0,
            ended: false,
        }
    }

    fn next_block(&mut self) -> io::Result<()> {
        let mut h = [0u8; BLOCK_HEADER_LEN];
        self.src
            .read_exact(&mut h)
            .map_err(|e| eof_is(e, "the body ends before its end block"))?;
        let header = BlockHeader::decode(&h).map_err(to_io)?;
        if self.block.len() < BLOCK_LEN {
            self.block.resize(BLOCK_LEN, 0);
        }
        let raw = &mut self.block[..header.raw_len];
        match header.kind {
            BlockKind::End => {
                self.ended = true;
                let mut extra = [0u8; 1];
                if self.src.read(&mut extra)? != 0 {
                    return Err(malformed("bytes after the end block"));
                }
            }
            BlockKind::Stored => self
                .src
                .read_exact(raw)
                .map_err(|e| eof_is(e, "a block is cut short"))?,
            BlockKind::Lz4 => {
                if self.stored.len() < max_stored_len() {
                    self.stored.resize(max_stored_len(), 0);
                }
                let stored = &mut self.stored[..header.stored_len];
                self.src
                    .read_exact(stored)
                    .map_err(|e| eof_is(e, "a block is cut short"))?;
                let n = lz4_flex::block::decompress_into(stored, raw)
                    .map_err(|e| malformed(&format!("a block does not decompress: {e}")))?;
                if n != header.raw_len {
                    return Err(malformed("a block decompresses to another length"));
                }
            }
        }
        self.pos = 0;
        self.len = header.raw_len;
        Ok(())
    }
}

impl<R: Read> Read for Decoder<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.len {
            if self.ended || buf.is_empty() {
                return Ok(0);
            }
            self.next_block()?;
        }
        let n = buf.len().min(self.len - self.pos);
        buf[..n].copy_from_slice(&self.block[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// A malformed body, carried through `io::Error` (see [`from_io`]).
pub(crate) fn malformed(why: &str) -> io::Error {
    to_io(SnapshotError::malformed(why))
}

fn to_io(e: SnapshotError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

fn eof_is(e: io::Error, why: &str) -> io::Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        malformed(why)
    } else {
        e
    }
}

/// Back from `io::Error`: a malformed body is [`SnapshotError::Malformed`], a payload that
/// ends early too; anything else is an I/O error while doing `what`.
pub(crate) fn from_io(e: io::Error, what: &str) -> SnapshotError {
    match e.kind() {
        io::ErrorKind::InvalidData if e.get_ref().is_some_and(|r| r.is::<SnapshotError>()) => {
            match e.into_inner().map(|b| b.downcast::<SnapshotError>()) {
                Some(Ok(inner)) => *inner,
                _ => SnapshotError::malformed("invalid data"),
            }
        }
        io::ErrorKind::UnexpectedEof => SnapshotError::malformed("the payload ends early"),
        _ => SnapshotError::io(what)(e),
    }
}
