//! Captured stdout/stderr: keep the head up to a cap, count (and drain) the rest, so a flood
//! never blocks the writer and never grows the broker.
use tokio::io::{AsyncRead, AsyncReadExt};

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

/// Read `stream` to EOF, keeping at most `cap` bytes.
pub async fn capture<R: AsyncRead + Unpin>(mut stream: R, cap: usize) -> Captured {
    let mut out = Captured::default();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                out.total += n as u64;
                let room = cap.saturating_sub(out.kept.len());
                out.kept.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keeps_the_head_and_counts_the_rest() {
        let data = vec![b'x'; 100_000];
        let got = capture(&data[..], 1000).await;
        assert_eq!(got.kept.len(), 1000);
        assert_eq!(got.total, 100_000);
        assert!(got.truncated());
    }

    #[tokio::test]
    async fn a_cut_utf8_sequence_is_dropped_not_mangled() {
        let data = "é".repeat(10).into_bytes(); // 2 bytes each
        let got = capture(&data[..], 5).await;
        assert_eq!(got.text(), "éé");
    }
}
