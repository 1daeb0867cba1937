//! Glue shared by the targets: a reader that serves its bytes in small pieces, a way to drive
//! a future that only awaits such readers, and the selector-byte convention.
#![allow(dead_code, reason = "each target uses a part")]

use std::future::Future;
use std::io::{self, Read};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Serves `data` at most `chunk` bytes per read (sync and async).
pub struct Chunked<'a> {
    pub data: &'a [u8],
    pub chunk: usize,
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.chunk).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

impl tokio::io::AsyncRead for Chunked<'_> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = buf.remaining().min(self.chunk).min(self.data.len());
        buf.put_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Poll::Ready(Ok(()))
    }
}

/// The read size a selector's low nibble picks: 0 is "everything at once", else 1..=15 bytes.
pub fn chunk_of(selector: u8) -> usize {
    match selector & 0x0f {
        0 => usize::MAX,
        n => usize::from(n),
    }
}

/// Run a future whose every await is immediately ready (readers over memory): it must finish
/// on its first poll, or the parser waits on something that never comes.
pub fn ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    match f.as_mut().poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a parser over in-memory bytes did not finish"),
    }
}

/// A peer over memory: reads serve `input` (in its pieces), writes are kept in `written`.
pub struct Duplex<'a> {
    pub input: Chunked<'a>,
    pub written: Vec<u8>,
}

impl tokio::io::AsyncRead for Duplex<'_> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.input).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Duplex<'_> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.written.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: std::pin::Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
