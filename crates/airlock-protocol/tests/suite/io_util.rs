//! Test readers: sources that hand out data in tiny pieces, count what was taken, or fail.

use std::io::{self, Read};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// A blocking reader that returns at most `chunk` bytes per `read` and counts bytes taken.
pub struct Chunked<'a> {
    data: &'a [u8],
    chunk: usize,
    pub consumed: usize,
    pub largest_request: usize,
}

impl<'a> Chunked<'a> {
    pub fn new(data: &'a [u8], chunk: usize) -> Self {
        assert!(chunk > 0);
        Chunked {
            data,
            chunk,
            consumed: 0,
            largest_request: 0,
        }
    }
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.largest_request = self.largest_request.max(buf.len());
        let n = buf.len().min(self.chunk).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        self.consumed += n;
        Ok(n)
    }
}

/// An async reader returning at most `chunk` bytes per poll, and `Pending` (with a wake-up)
/// before every other read, so the reader's pending path is exercised.
pub struct AsyncChunked<'a> {
    data: &'a [u8],
    chunk: usize,
    pending_next: bool,
    pub consumed: usize,
}

impl<'a> AsyncChunked<'a> {
    pub fn new(data: &'a [u8], chunk: usize) -> Self {
        assert!(chunk > 0);
        AsyncChunked {
            data,
            chunk,
            pending_next: true,
            consumed: 0,
        }
    }
}

impl AsyncRead for AsyncChunked<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.pending_next {
            this.pending_next = false;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        this.pending_next = true;
        let n = buf.remaining().min(this.chunk).min(this.data.len());
        buf.put_slice(&this.data[..n]);
        this.data = &this.data[n..];
        this.consumed += n;
        Poll::Ready(Ok(()))
    }
}

/// A blocking reader that serves `data`, then fails once with `kind`, then serves `rest`.
pub struct FailOnce<'a> {
    pub data: &'a [u8],
    pub kind: Option<io::ErrorKind>,
    pub rest: &'a [u8],
}

impl Read for FailOnce<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.data.is_empty() {
            let n = buf.len().min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            return Ok(n);
        }
        if let Some(kind) = self.kind.take() {
            return Err(io::Error::new(kind, "injected"));
        }
        let n = buf.len().min(self.rest.len());
        buf[..n].copy_from_slice(&self.rest[..n]);
        self.rest = &self.rest[n..];
        Ok(n)
    }
}

/// `Content-Length: N\r\n\r\n<body>`.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}
