//! Property tests: encode/decode round trips through both readers, and byte soup.

use airlock_protocol::{
    AsyncFrameReader, ErrorObject, FrameError, FrameLimits, FrameReader, Id, Message, Notification,
    Request, Response,
};
use proptest::prelude::*;
use serde_json::{Map, Value};

use super::io_util::{AsyncChunked, Chunked};

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // Floats that print and parse exactly.
        (-1000i32..1000).prop_map(|n| Value::from(f64::from(n) / 4.0)),
        any::<String>().prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn params() -> impl Strategy<Value = Option<Value>> {
    prop::option::of(json_value().prop_map(|v| match v {
        v @ (Value::Object(_) | Value::Array(_)) => v,
        other => Value::Array(vec![other]),
    }))
}

fn id() -> impl Strategy<Value = Id> {
    prop_oneof![
        any::<i64>().prop_map(Id::Number),
        any::<String>().prop_map(Id::String)
    ]
}

fn message() -> impl Strategy<Value = Message> {
    let error = (
        any::<i64>(),
        any::<String>(),
        prop::option::of(json_value()),
    )
        .prop_map(|(code, message, data)| ErrorObject {
            code,
            message,
            data,
        });
    prop_oneof![
        (id(), any::<String>(), params())
            .prop_map(|(id, method, params)| Message::Request(Request { id, method, params })),
        (any::<String>(), params())
            .prop_map(|(method, params)| Message::Notification(Notification { method, params })),
        (id(), json_value()).prop_map(|(id, v)| Message::Response(Response::success(id, v))),
        (prop::option::of(id()), error)
            .prop_map(|(id, e)| Message::Response(Response::error(id, e))),
    ]
}

fn encode_all(messages: &[Message]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in messages {
        airlock_protocol::write_message(&mut out, m).unwrap();
    }
    out
}

/// Reads everything with tiny limits; checks every bound on the way. Returns frames read.
fn drain_soup(bytes: &[u8], chunk: usize, limits: FrameLimits) -> usize {
    let mut src = Chunked::new(bytes, chunk);
    let mut reader = FrameReader::with_limits(&mut src, limits);
    let mut frames = 0;
    loop {
        assert!(reader.buffered() <= limits.max_header_bytes + limits.max_body);
        match reader.read_frame() {
            Ok(Some(body)) => {
                assert!(body.len() <= limits.max_body);
                frames += 1;
                let _ = Message::from_slice(&body);
            }
            Ok(None) => break,
            Err(e) if e.is_recoverable() => continue,
            Err(FrameError::Poisoned) => panic!("poisoned reader reached without an error first"),
            Err(_) => {
                assert!(matches!(reader.read_frame(), Err(FrameError::Poisoned)));
                break;
            }
        }
    }
    drop(reader);
    assert!(src.consumed <= bytes.len());
    frames
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn messages_round_trip_through_from_slice(m in message()) {
        let bytes = m.to_vec().unwrap();
        prop_assert_eq!(Message::from_slice(&bytes).unwrap(), m);
    }

    #[test]
    fn messages_round_trip_through_the_blocking_reader(
        messages in prop::collection::vec(message(), 1..6),
        chunk in 1usize..64,
    ) {
        let input = encode_all(&messages);
        let mut reader = FrameReader::new(Chunked::new(&input, chunk));
        for expected in &messages {
            let got = reader.read_message().unwrap();
            prop_assert_eq!(got.as_ref(), Some(expected));
        }
        prop_assert!(reader.read_message().unwrap().is_none());
    }

    #[test]
    fn messages_round_trip_through_the_async_reader(
        messages in prop::collection::vec(message(), 1..6),
        chunk in 1usize..64,
    ) {
        let input = encode_all(&messages);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let decoded = rt.block_on(async {
            let mut reader = AsyncFrameReader::new(AsyncChunked::new(&input, chunk));
            let mut out = Vec::new();
            while let Some(m) = reader.read_message().await.unwrap() {
                out.push(m);
            }
            out
        });
        prop_assert_eq!(decoded, messages);
    }

    #[test]
    fn byte_soup_never_panics_and_stays_bounded(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        chunk in 1usize..300,
    ) {
        drain_soup(&bytes, chunk, FrameLimits { max_body: 64, max_header_bytes: 64 });
    }

    #[test]
    fn header_shaped_soup_never_panics_and_stays_bounded(
        parts in prop::collection::vec(
            prop_oneof![
                Just(b"Content-Length: ".to_vec()),
                Just(b"content-length:".to_vec()),
                Just(b"\r\n".to_vec()),
                Just(b"\r\n\r\n".to_vec()),
                (0u32..200).prop_map(|n| n.to_string().into_bytes()),
                Just(b"99999999999999999999".to_vec()),
                Just(br#"{"jsonrpc":"2.0","method":"m"}"#.to_vec()),
                prop::collection::vec(any::<u8>(), 0..8),
            ],
            0..40,
        ),
        chunk in 1usize..50,
    ) {
        let bytes = parts.concat();
        drain_soup(&bytes, chunk, FrameLimits { max_body: 100, max_header_bytes: 48 });
    }
}
