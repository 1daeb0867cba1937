//! Captured stdout/stderr: keep the head up to a cap, count (and drain) the rest, so a flood
//! never blocks the writer and never grows the broker.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

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

/// Read `stream` to EOF, keeping at most `cap` bytes (each kept chunk also offered to `tap`).
pub async fn capture<R: AsyncRead + Unpin>(
    mut stream: R,
    cap: usize,
    tap: Option<(OutputTap, Stream)>,
) -> Captured {
    let mut out = Captured::default();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                out.total += n as u64;
                let room = cap.saturating_sub(out.kept.len());
                let kept = &chunk[..n.min(room)];
                if let Some((t, which)) = &tap {
                    t.offer(*which, kept);
                }
                out.kept.extend_from_slice(kept);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
