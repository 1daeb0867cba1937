//! Captured stdout/stderr: keep the head up to a cap, count (and drain) the rest, so a flood
//! never blocks the writer and never grows the broker.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{mpsc, oneshot};

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    /// `stdout` or `stderr`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Bytes a run wrote, as they came (within the output cap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputChunk {
    /// Its stream.
    pub stream: Stream,
    /// The bytes.
    pub data: Vec<u8>,
}

/// A live copy of a run's captured output for a listener. The capture offers each chunk with
/// a non-blocking send: a listener that does not keep up loses chunks (counted), never slows
/// the capture, so a slow client can never block the broker or the guest's pipe.
#[derive(Debug, Clone)]
pub struct OutputTap {
    tx: mpsc::Sender<OutputChunk>,
    dropped: Arc<AtomicU64>,
}

impl OutputTap {
    /// A tap holding at most `chunks` undelivered chunks, and its receiving end.
    #[must_use]
    pub fn new(chunks: usize) -> (OutputTap, mpsc::Receiver<OutputChunk>) {
        let (tx, rx) = mpsc::channel(chunks.max(1));
        let tap = OutputTap {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
        };
        (tap, rx)
    }

    fn offer(&self, stream: Stream, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let chunk = OutputChunk {
            stream,
            data: data.to_vec(),
        };
        if self.tx.try_send(chunk).is_err() {
            self.dropped.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
    }

    /// Bytes not delivered because the listener was behind.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// A reader of [`OutputTap::dropped`] that does not keep the channel open.
    #[must_use]
    pub fn dropped_counter(&self) -> DroppedBytes {
        DroppedBytes(Arc::clone(&self.dropped))
    }
}

/// The dropped-bytes count of an [`OutputTap`], readable after the tap is gone.
#[derive(Debug, Clone)]
pub struct DroppedBytes(Arc<AtomicU64>);

impl DroppedBytes {
    /// Bytes not delivered.
    #[must_use]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Counts `n` more bytes not delivered (a listener that gave up on chunks it had taken).
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
}

/// Bytes kept from one stream, plus how much was dropped.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Captured {
    /// The first `cap` bytes written.
    pub kept: Vec<u8>,
    /// Total bytes the guest wrote to the stream.
    pub total: u64,
}

impl Captured {
    /// True when anything was dropped.
    pub fn truncated(&self) -> bool {
        self.total > self.kept.len() as u64
    }

    /// The kept bytes as text; invalid UTF-8 is replaced, and a UTF-8 sequence cut by the cap is
    /// dropped rather than shown as a replacement character.
    pub fn text(&self) -> String {
        let bytes = if self.truncated() {
            let valid = match std::str::from_utf8(&self.kept) {
                Ok(_) => self.kept.len(),
                Err(e) if e.error_len().is_none() => e.valid_up_to(),
                Err(_) => self.kept.len(),
            };
            &self.kept[..valid]
        } else {
            &self.kept[..]
        };
        String::from_utf8_lossy(bytes).into_owned()
    }
}

/// Where one stream's bytes go: the head up to a cap, the total, a live copy.
struct Sink {
    out: Captured,
    cap: usize,
    tap: Option<(OutputTap, Stream)>,
}

impl Sink {
    fn new(cap: usize, tap: Option<(OutputTap, Stream)>) -> Sink {
        Sink {
            out: Captured::default(),
            cap,
            tap,
        }
    }

    fn push(&mut self, data: &[u8]) {
        self.out.total += data.len() as u64;
        let room = self.cap.saturating_sub(self.out.kept.len());
        let kept = &data[..data.len().min(room)];
        if let Some((t, which)) = &self.tap {
            t.offer(*which, kept);
        }
        self.out.kept.extend_from_slice(kept);
    }
}

/// Read `stream` to EOF, keeping at most `cap` bytes (each kept chunk also offered to `tap`).
pub async fn capture<R: AsyncRead + Unpin>(
    mut stream: R,
    cap: usize,
    tap: Option<(OutputTap, Stream)>,
) -> Captured {
    let mut sink = Sink::new(cap, tap);
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => sink.push(&chunk[..n]),
        }
    }
    sink.out
}

/// What a [`CellPipe`] is asked to do.
enum CellCmd {
    /// A cell starts: its bytes go to a fresh capture with this cap and tap.
    Begin(usize, Option<OutputTap>),
    /// The cell ended (its writer is stopped or gone): drain what the pipe holds, hand the
    /// capture back.
    End(oneshot::Sender<Captured>),
}

/// One output pipe of a long-lived guest (a stateful sandbox's kernel), cut into one capture
/// per cell. The reader drains the pipe all the time, so the kernel never blocks on it; bytes
/// that arrive between cells (there should be none: the kernel is stopped) go to the next cell.
#[derive(Debug)]
pub struct CellPipe {
    cmds: mpsc::Sender<CellCmd>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for CellCmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CellCmd")
    }
}

impl CellPipe {
    /// Start draining `pipe` (which stream it is names the chunks a tap gets).
    pub fn start(pipe: std::os::fd::OwnedFd, which: Stream) -> std::io::Result<CellPipe> {
        use std::os::fd::AsFd;
        let rx = tokio::net::unix::pipe::Receiver::from_owned_fd(pipe)?;
        // A second handle on the same (non-blocking) pipe, read directly when a cell ends: the
        // reactor's cached readiness may not have seen the last bytes yet.
        let direct = std::fs::File::from(rx.as_fd().try_clone_to_owned()?);
        let (cmds, inbox) = mpsc::channel(2);
        let task = tokio::spawn(drain_cells(rx, direct, inbox, which));
        Ok(CellPipe { cmds, task })
    }

    /// A cell begins.
    pub async fn begin(&self, cap: usize, tap: Option<OutputTap>) {
        let _ = self.cmds.send(CellCmd::Begin(cap, tap)).await;
    }

    /// The cell ended: everything its writer put in the pipe before now, within the cap.
    pub async fn end(&self) -> Captured {
        let (tx, rx) = oneshot::channel();
        if self.cmds.send(CellCmd::End(tx)).await.is_err() {
            return Captured::default();
        }
        rx.await.unwrap_or_default()
    }
}

impl Drop for CellPipe {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Bytes buffered from a pipe when no cell is running, at most.
const BETWEEN_CELLS: usize = 64 * 1024;

async fn drain_cells(
    rx: tokio::net::unix::pipe::Receiver,
    mut direct: std::fs::File,
    mut inbox: mpsc::Receiver<CellCmd>,
    which: Stream,
) {
    let mut sink = Sink::new(BETWEEN_CELLS, None);
    let mut chunk = vec![0u8; 16 * 1024];
    let mut eof = false;
    loop {
        tokio::select! {
            ready = rx.readable(), if !eof => {
                if ready.is_err() {
                    eof = true;
                    continue;
                }
                match rx.try_read(&mut chunk) {
                    Ok(0) => eof = true,
                    Ok(n) => sink.push(&chunk[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => eof = true,
                }
            }
            cmd = inbox.recv() => match cmd {
                None => return,
                Some(CellCmd::Begin(cap, tap)) => {
                    let early = std::mem::take(&mut sink.out.kept);
                    sink = Sink::new(cap, tap.map(|t| (t, which)));
                    sink.push(&early);
                }
                Some(CellCmd::End(reply)) => {
                    // The pipe holds at most its buffer: this ends.
                    while !eof {
                        match std::io::Read::read(&mut direct, &mut chunk) {
                            Ok(0) => eof = true,
                            Ok(n) => sink.push(&chunk[..n]),
                            Err(_) => break,
                        }
                    }
                    let done = std::mem::replace(&mut sink, Sink::new(BETWEEN_CELLS, None));
                    let _ = reply.send(done.out);
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cell_pipe_cuts_one_capture_per_cell_with_nothing_lost_or_shared() {
        use std::io::Write;
        let (r, w) = std::io::pipe().unwrap();
        let pipe = CellPipe::start(r.into(), Stream::Stdout).unwrap();
        let mut w = std::fs::File::from(std::os::fd::OwnedFd::from(w));
        pipe.begin(10, None).await;
        w.write_all(b"first cell output").unwrap();
        let one = pipe.end().await;
        assert_eq!((one.kept.as_slice(), one.total), (&b"first cell"[..], 17));
        w.write_all(b"early ").unwrap(); // between cells: kept for the next one
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        pipe.begin(100, None).await;
        w.write_all(b"second").unwrap();
        let two = pipe.end().await;
        assert_eq!(two.kept, b"early second");
        drop(w);
        pipe.begin(100, None).await;
        assert_eq!(pipe.end().await, Captured::default());
    }

    #[tokio::test]
    async fn a_tap_sees_the_kept_bytes_and_a_full_tap_drops_instead_of_blocking() {
        let data = vec![b'y'; 100_000];
        let (tap, mut rx) = OutputTap::new(1);
        let got = capture(&data[..], 40_000, Some((tap.clone(), Stream::Stderr))).await;
        assert_eq!(got.kept.len(), 40_000);
        let first = rx.recv().await.unwrap();
        assert_eq!(first.stream, Stream::Stderr);
        // One chunk fit; the rest of the kept bytes were counted as dropped, none past the cap.
        assert_eq!(first.data.len() as u64 + tap.dropped(), 40_000);
    }

    #[tokio::test]
    async fn keeps_the_head_and_counts_the_rest() {
        let data = vec![b'x'; 100_000];
        let got = capture(&data[..], 1000, None).await;
        assert_eq!(got.kept.len(), 1000);
        assert_eq!(got.total, 100_000);
        assert!(got.truncated());
    }

    #[tokio::test]
    async fn a_cut_utf8_sequence_is_dropped_not_mangled() {
        let data = "é".repeat(10).into_bytes(); // 2 bytes each
        let got = capture(&data[..], 5, None).await;
        assert_eq!(got.text(), "éé");
    }
}
