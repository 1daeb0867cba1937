//! Fuzz target: arbitrary bytes through `FrameReader` until clean EOF or a fatal error.
//!
//! The first input byte picks the read size (1..=16 bytes, or unlimited) and whether small
//! limits are used, so both the many-tiny-reads path and the over-cap/skip paths get coverage.
//! Oracles: no panic; every body within the cap; the buffer within header + body caps; and
//! every message that decodes re-encodes and decodes to itself.

#![no_main]

use std::io::{self, Read};

use airlock_protocol::{encode_message, FrameError, FrameLimits, FrameReader, Message};
use libfuzzer_sys::fuzz_target;

/// Serves `data` at most `chunk` bytes per read.
struct Chunked<'a> {
    data: &'a [u8],
    chunk: usize,
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.chunk).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&selector, data)) = input.split_first() else {
        return;
    };
    let chunk = match selector & 0x0f {
        0 => usize::MAX,
        n => usize::from(n),
    };
    let limits = if selector & 0x10 == 0 {
        FrameLimits::default()
    } else {
        FrameLimits {
            max_body: 64,
            max_header_bytes: 64,
        }
    };
    let mut reader = FrameReader::with_limits(Chunked { data, chunk }, limits);
    loop {
        assert!(reader.buffered() <= limits.max_header_bytes + limits.max_body);
        match reader.read_frame() {
            Ok(Some(body)) => {
                assert!(body.len() <= limits.max_body);
                if let Ok(message) = Message::from_slice(&body) {
                    check_round_trip(&message);
                }
            }
            Ok(None) => break,
            Err(FrameError::Poisoned) => panic!("poisoned without an earlier fatal error"),
            Err(e) if e.is_recoverable() => continue,
            Err(_) => {
                assert!(matches!(reader.read_frame(), Err(FrameError::Poisoned)));
                break;
            }
        }
    }
});

/// A decoded message re-encodes and decodes back to itself. Re-encoding can be longer than the
/// accepted body (escapes are normalized), so the check uses a cap that cannot bind.
fn check_round_trip(message: &Message) {
    let limits = FrameLimits {
        max_body: usize::MAX,
        max_header_bytes: 4096,
    };
    let framed = encode_message(message, &limits).expect("a decoded message re-encodes");
    let mut reader = FrameReader::with_limits(&framed[..], limits);
    let again = reader.read_message().expect("re-encoded frame decodes");
    assert_eq!(again.as_ref(), Some(message));
}
