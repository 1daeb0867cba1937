//! Frames that must decode, reader state after errors, and the writers.

use std::io::ErrorKind;
use std::time::Duration;

use airlock_protocol::{
    encode_frame, write_frame, write_frame_async_with, write_frame_with, write_message,
    write_message_async, AsyncFrameReader, FrameError, FrameLimits, FrameReader, Message,
    DEFAULT_MAX_MESSAGE_BYTES,
};
use serde_json::json;
use tokio::io::AsyncWriteExt;

use super::io_util::{frame, AsyncChunked, Chunked, FailOnce};

const LIMITS: FrameLimits = FrameLimits {
    max_body: 1000,
    max_header_bytes: 256,
};

fn sample_messages() -> Vec<Message> {
    vec![
        Message::notification("ready", None),
        Message::request(1, "execute", Some(json!({"code": "print('héllo ✓')"}))),
        Message::request(
            101,
            "call_tool",
            Some(json!({"tool": "search", "args": {"q": [1, 2]}})),
        ),
        Message::success(101, json!({"hits": []})),
        Message::success(
            1,
            json!({"stdout": "héllo ✓\n", "stderr": "", "status": "completed"}),
        ),
    ]
}

fn encoded(messages: &[Message]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in messages {
        write_message(&mut out, m).unwrap();
    }
    out
}

#[test]
fn reads_consecutive_frames_then_clean_eof() {
    let mut input = frame(b"{}");
    input.extend(frame(b""));
    input.extend(frame(b"[1]"));
    let mut reader = FrameReader::new(&input[..]);
    assert_eq!(reader.read_frame().unwrap().as_deref(), Some(&b"{}"[..]));
    assert_eq!(reader.read_frame().unwrap().as_deref(), Some(&b""[..]));
    assert_eq!(reader.read_frame().unwrap().as_deref(), Some(&b"[1]"[..]));
    assert!(reader.read_frame().unwrap().is_none());
    assert!(
        reader.read_frame().unwrap().is_none(),
        "eof is sticky and clean"
    );
    assert_eq!(reader.buffered(), 0);
}

#[test]
fn empty_input_is_a_clean_eof() {
    assert!(FrameReader::new(&b""[..]).read_message().unwrap().is_none());
}

#[tokio::test]
async fn empty_input_is_a_clean_eof_async() {
    assert!(AsyncFrameReader::new(&b""[..])
        .read_message()
        .await
        .unwrap()
        .is_none());
}

#[test]
fn header_variants_are_accepted() {
    for header in [
        "content-length: 2\r\n\r\n",
        "CONTENT-LENGTH:2\r\n\r\n",
        "Content-Length:\t2 \t\r\n\r\n",
        "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: 2\r\n\r\n",
        "Content-Length: 2\r\nX-Other: ignored: really\r\n\r\n",
        "Content-Length: 0002\r\n\r\n",
    ] {
        let input = [header.as_bytes(), b"{}"].concat();
        let mut reader = FrameReader::with_limits(&input[..], LIMITS);
        assert_eq!(
            reader.read_frame().unwrap().as_deref(),
            Some(&b"{}"[..]),
            "{header:?}"
        );
        assert!(reader.read_frame().unwrap().is_none(), "{header:?}");
    }
}

#[test]
fn one_byte_reads_decode_every_message() {
    let messages = sample_messages();
    let input = encoded(&messages);
    let mut reader = FrameReader::new(Chunked::new(&input, 1));
    for expected in &messages {
        assert_eq!(reader.read_message().unwrap().as_ref(), Some(expected));
    }
    assert!(reader.read_message().unwrap().is_none());
}

#[tokio::test]
async fn one_byte_reads_decode_every_message_async() {
    let messages = sample_messages();
    let input = encoded(&messages);
    let mut reader = AsyncFrameReader::new(AsyncChunked::new(&input, 1));
    for expected in &messages {
        assert_eq!(
            reader.read_message().await.unwrap().as_ref(),
            Some(expected)
        );
    }
    assert!(reader.read_message().await.unwrap().is_none());
}

#[test]
fn framing_errors_poison_the_reader() {
    let mut input = b"Content-Length: x\r\n\r\n".to_vec();
    input.extend(frame(b"{}"));
    let mut reader = FrameReader::new(&input[..]);
    let first = reader.read_frame().unwrap_err();
    assert!(matches!(first, FrameError::InvalidContentLength { .. }));
    assert!(!first.is_recoverable());
    assert!(matches!(reader.read_frame(), Err(FrameError::Poisoned)));

    let mut truncated = FrameReader::new(&b"Content-Length: 5\r\n\r\nab"[..]);
    let err = truncated.read_frame().unwrap_err();
    assert!(err.is_truncated() && !err.is_recoverable(), "{err:?}");
    assert!(matches!(truncated.read_frame(), Err(FrameError::Poisoned)));
}

#[test]
fn over_cap_body_is_skipped_without_buffering_it() {
    let mut input = b"Content-Length: 50000\r\n\r\n".to_vec();
    input.extend(std::iter::repeat_n(b'x', 50_000));
    input.extend(frame(br#"{"jsonrpc":"2.0","method":"ready"}"#));
    let mut src = Chunked::new(&input, usize::MAX);
    let mut reader = FrameReader::with_limits(&mut src, LIMITS);
    let err = reader.read_message().unwrap_err();
    assert!(
        matches!(
            err,
            FrameError::BodyTooLarge {
                len: 50_000,
                max: 1000
            }
        ),
        "{err:?}"
    );
    assert!(err.is_recoverable());
    assert!(reader.buffered() < LIMITS.max_header_bytes);
    assert_eq!(
        reader.read_message().unwrap(),
        Some(Message::notification("ready", None))
    );
    assert!(reader.read_message().unwrap().is_none());
}

#[tokio::test]
async fn over_cap_body_is_skipped_async() {
    let mut input = b"Content-Length: 1001\r\n\r\n".to_vec();
    input.extend(std::iter::repeat_n(b'x', 1001));
    input.extend(frame(b"{}"));
    let mut reader = AsyncFrameReader::with_limits(AsyncChunked::new(&input, 100), LIMITS);
    assert!(matches!(
        reader.read_frame().await,
        Err(FrameError::BodyTooLarge { .. })
    ));
    assert_eq!(
        reader.read_frame().await.unwrap().as_deref(),
        Some(&b"{}"[..])
    );
}

#[test]
fn io_errors_lose_no_bytes_and_buffer_only_what_arrived() {
    let whole = frame(&[b' '; 900]);
    let (head, rest) = whole.split_at(150);
    let mut reader = FrameReader::with_limits(
        FailOnce {
            data: head,
            kind: Some(ErrorKind::WouldBlock),
            rest,
        },
        LIMITS,
    );
    let err = reader.read_frame().unwrap_err();
    assert!(matches!(&err, FrameError::Io(e) if e.kind() == ErrorKind::WouldBlock));
    assert!(err.is_recoverable());
    // The header (22 bytes) was parsed; only the body bytes that arrived are held, not the
    // 900 the header claimed.
    assert_eq!(reader.buffered(), 150 - "Content-Length: 900\r\n\r\n".len());
    assert_eq!(reader.read_frame().unwrap().map(|b| b.len()), Some(900));
}

#[tokio::test]
async fn async_read_is_cancel_safe() {
    let (mut tx, rx) = tokio::io::duplex(64);
    let mut reader = AsyncFrameReader::new(rx);
    let whole = frame(br#"{"jsonrpc":"2.0","method":"ready"}"#);
    tx.write_all(&whole[..30]).await.unwrap();
    let cancelled = tokio::time::timeout(Duration::from_millis(50), reader.read_message()).await;
    assert!(
        cancelled.is_err(),
        "must still be waiting for the rest of the frame"
    );
    tx.write_all(&whole[30..]).await.unwrap();
    assert_eq!(
        reader.read_message().await.unwrap(),
        Some(Message::notification("ready", None))
    );
    drop(tx);
    assert!(reader.read_message().await.unwrap().is_none());
}

#[test]
fn writers_refuse_over_cap_bodies_and_write_nothing() {
    let mut out = Vec::new();
    let err = write_frame_with(&mut out, &[b'x'; 1001], &LIMITS).unwrap_err();
    assert!(matches!(
        err,
        FrameError::BodyTooLarge {
            len: 1001,
            max: 1000
        }
    ));
    assert!(out.is_empty());
    let big = Message::request(
        1,
        "execute",
        Some(json!({"code": "x".repeat(DEFAULT_MAX_MESSAGE_BYTES)})),
    );
    assert!(matches!(
        write_message(&mut out, &big),
        Err(FrameError::BodyTooLarge { .. })
    ));
    assert!(out.is_empty());
    // Exactly at the cap is fine and reads back.
    write_frame_with(&mut out, &[b'1'; 1000], &LIMITS).unwrap();
    let mut reader = FrameReader::with_limits(&out[..], LIMITS);
    assert_eq!(reader.read_frame().unwrap().map(|b| b.len()), Some(1000));
}

#[tokio::test]
async fn async_writers_refuse_over_cap_and_round_trip() {
    let mut out = Vec::new();
    let err = write_frame_async_with(&mut out, &[b'x'; 1001], &LIMITS)
        .await
        .unwrap_err();
    assert!(matches!(err, FrameError::BodyTooLarge { .. }));
    assert!(out.is_empty());
    let messages = sample_messages();
    for m in &messages {
        write_message_async(&mut out, m).await.unwrap();
    }
    assert_eq!(
        out,
        encoded(&messages),
        "async and blocking writers agree byte for byte"
    );
    let mut reader = AsyncFrameReader::new(&out[..]);
    for expected in &messages {
        assert_eq!(
            reader.read_message().await.unwrap().as_ref(),
            Some(expected)
        );
    }
}

#[test]
fn encode_frame_matches_write_frame() {
    let mut out = Vec::new();
    write_frame(&mut out, b"{}").unwrap();
    assert_eq!(out, b"Content-Length: 2\r\n\r\n{}");
    assert_eq!(encode_frame(b"{}", &FrameLimits::default()).unwrap(), out);
}
