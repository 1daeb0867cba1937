//! One test per framing rejection, each run through both the blocking and the async reader.
//!
//! Every case also checks the bound that matters: the reader took no more than
//! `max_header_bytes` from the source before failing, so it neither read the (often large)
//! body that follows nor let an endless header section grow its buffer.

use airlock_protocol::{
    AsyncFrameReader, DecodeError, FrameError, FrameLimits, FramePart, FrameReader, ShapeError,
};

use super::io_util::{frame, AsyncChunked, Chunked};

const LIMITS: FrameLimits = FrameLimits {
    max_body: 1000,
    max_header_bytes: 256,
};

/// A header section followed by 5000 body bytes that must never be read.
fn with_body(header: &str) -> Vec<u8> {
    let mut v = header.as_bytes().to_vec();
    v.extend(std::iter::repeat_n(b'{', 5000));
    v
}

macro_rules! rejects_frame {
    ($name:ident, $input:expr, $pat:pat) => {
        mod $name {
            use super::*;

            #[test]
            fn blocking() {
                let input: Vec<u8> = $input;
                let mut src = Chunked::new(&input, usize::MAX);
                let err = FrameReader::with_limits(&mut src, LIMITS)
                    .read_frame()
                    .unwrap_err();
                assert!(matches!(err, $pat), "unexpected error {err:?}");
                assert!(
                    src.consumed <= LIMITS.max_header_bytes,
                    "read {} bytes",
                    src.consumed
                );
            }

            #[tokio::test]
            async fn nonblocking() {
                let input: Vec<u8> = $input;
                let mut src = AsyncChunked::new(&input, 7);
                let err = AsyncFrameReader::with_limits(&mut src, LIMITS)
                    .read_frame()
                    .await
                    .unwrap_err();
                assert!(matches!(err, $pat), "unexpected error {err:?}");
                assert!(
                    src.consumed <= LIMITS.max_header_bytes,
                    "read {} bytes",
                    src.consumed
                );
            }
        }
    };
}

rejects_frame!(
    missing_content_length,
    with_body("Content-Type: application/json\r\n\r\n"),
    FrameError::MissingContentLength
);
rejects_frame!(
    empty_header_section,
    with_body("\r\n\r\n"),
    FrameError::MissingContentLength
);
rejects_frame!(
    duplicate_content_length,
    with_body("Content-Length: 2\r\ncontent-length: 2\r\n\r\n"),
    FrameError::DuplicateContentLength
);
rejects_frame!(
    plus_sign,
    with_body("Content-Length: +5\r\n\r\n"),
    FrameError::InvalidContentLength { .. }
);
rejects_frame!(
    trailing_garbage,
    with_body("Content-Length:  5x\r\n\r\n"),
    FrameError::InvalidContentLength { .. }
);
rejects_frame!(
    inner_space,
    with_body("Content-Length: 5 5\r\n\r\n"),
    FrameError::InvalidContentLength { .. }
);
rejects_frame!(
    hex,
    with_body("Content-Length: 0x10\r\n\r\n"),
    FrameError::InvalidContentLength { .. }
);
rejects_frame!(
    empty_value,
    with_body("Content-Length: \r\n\r\n"),
    FrameError::InvalidContentLength { .. }
);
rejects_frame!(
    negative,
    with_body("Content-Length: -5\r\n\r\n"),
    FrameError::InvalidContentLength { .. }
);
rejects_frame!(
    fractional,
    with_body("Content-Length: 5.0\r\n\r\n"),
    FrameError::InvalidContentLength { .. }
);
rejects_frame!(
    over_cap,
    with_body("Content-Length: 1001\r\n\r\n"),
    FrameError::BodyTooLarge {
        len: 1001,
        max: 1000
    }
);
rejects_frame!(
    overflowing_length,
    with_body("Content-Length: 99999999999999999999999999999\r\n\r\n"),
    FrameError::BodyTooLarge {
        len: u64::MAX,
        max: 1000
    }
);
rejects_frame!(
    line_without_colon,
    with_body("Content-Length 5\r\n\r\n"),
    FrameError::MalformedHeader { line: 1 }
);
rejects_frame!(
    empty_name,
    with_body("Content-Length: 2\r\n: x\r\n\r\n"),
    FrameError::MalformedHeader { line: 2 }
);
rejects_frame!(
    space_before_colon,
    with_body("Content-Length : 2\r\n\r\n"),
    FrameError::MalformedHeader { line: 1 }
);
rejects_frame!(
    bare_lf_in_section,
    with_body("Content-Length: 2\nX-A: b\r\n\r\n"),
    FrameError::MalformedHeader { line: 1 }
);
rejects_frame!(
    non_ascii_value,
    {
        let mut v = b"X-A: \xff\r\nContent-Length: 2\r\n\r\n".to_vec();
        v.extend_from_slice(b"{}");
        v
    },
    FrameError::MalformedHeader { line: 1 }
);
rejects_frame!(
    header_section_too_long,
    with_body(&format!(
        "{}Content-Length: 2\r\n\r\n",
        "X-Pad: aaaaaaaaaaaaaaaa\r\n".repeat(12)
    )),
    FrameError::HeaderTooLong { max: 256 }
);
rejects_frame!(
    endless_header_bytes,
    vec![b'a'; 1 << 20],
    FrameError::HeaderTooLong { max: 256 }
);
rejects_frame!(
    endless_header_lines,
    b"X-A: b\r\n".repeat(1 << 16),
    FrameError::HeaderTooLong { max: 256 }
);
rejects_frame!(
    truncated_header,
    b"Content-Len".to_vec(),
    FrameError::Truncated {
        part: FramePart::Header,
        received: 11
    }
);
rejects_frame!(
    truncated_before_terminator,
    b"Content-Length: 2\r\n\r".to_vec(),
    FrameError::Truncated {
        part: FramePart::Header,
        received: 20
    }
);
rejects_frame!(
    truncated_body,
    b"Content-Length: 10\r\n\r\nabc".to_vec(),
    FrameError::Truncated {
        part: FramePart::Body,
        received: 3
    }
);

macro_rules! rejects_body {
    ($name:ident, $body:expr, $pat:pat) => {
        mod $name {
            use super::*;

            #[test]
            fn blocking() {
                let input = frame($body);
                let mut reader = FrameReader::with_limits(&input[..], LIMITS);
                let err = reader.read_message().unwrap_err();
                assert!(
                    matches!(err, FrameError::Decode($pat)),
                    "unexpected error {err:?}"
                );
                assert!(err.is_recoverable());
                assert!(
                    reader.read_message().unwrap().is_none(),
                    "frame not consumed whole"
                );
            }

            #[tokio::test]
            async fn nonblocking() {
                let input = frame($body);
                let mut reader =
                    AsyncFrameReader::with_limits(AsyncChunked::new(&input, 3), LIMITS);
                let err = reader.read_message().await.unwrap_err();
                assert!(
                    matches!(err, FrameError::Decode($pat)),
                    "unexpected error {err:?}"
                );
                assert!(reader.read_message().await.unwrap().is_none());
            }
        }
    };
}

rejects_body!(
    invalid_utf8,
    b"{\"jsonrpc\":\"2.0\",\"method\":\"\xc3\x28\"}",
    DecodeError::InvalidUtf8 { valid_up_to: 27 }
);
rejects_body!(not_json, b"{\"jsonrpc\":\"2.0\",", DecodeError::NotJson(_));
rejects_body!(empty_body, b"", DecodeError::NotJson(_));
rejects_body!(
    batch,
    br#"[{"jsonrpc":"2.0","method":"ready"}]"#,
    DecodeError::BatchUnsupported
);
rejects_body!(
    wrong_shape,
    br#"{"jsonrpc":"1.0","method":"ready"}"#,
    DecodeError::InvalidShape(ShapeError::BadVersion)
);
