//! The JSON-RPC message decoder on its own (`Message::from_slice`), differentially against
//! serde_json's verdict on the same bytes:
//! - "not JSON" (bad UTF-8, syntax, trailing bytes, nesting) exactly when serde_json refuses;
//! - a batch exactly when the JSON is an array;
//! - an accepted message is the same JSON value serde_json reads (nothing dropped, renamed or
//!   reinterpreted), and it re-encodes and decodes to itself.
#![no_main]

use airlock_protocol::{DecodeError, Message};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|body: &[u8]| {
    let ours = Message::from_slice(body);
    let theirs = serde_json::from_slice::<Value>(body);
    let not_json = matches!(
        ours,
        Err(DecodeError::InvalidUtf8 { .. } | DecodeError::NotJson(_))
    );
    assert_eq!(
        not_json,
        theirs.is_err(),
        "verdicts differ: {ours:?} vs {theirs:?}"
    );
    let Ok(value) = theirs else { return };
    let batch = matches!(ours, Err(DecodeError::BatchUnsupported));
    assert_eq!(batch, value.is_array(), "batch verdict differs: {ours:?}");
    let Ok(message) = ours else { return };
    assert!(value.is_object());
    let again = serde_json::to_value(&message).expect("a decoded message serializes");
    assert_eq!(
        again, value,
        "the decoder read a different message than serde_json"
    );
    let bytes = message.to_vec().expect("a decoded message encodes");
    let back = Message::from_slice(&bytes).expect("a re-encoded message decodes");
    assert_eq!(back, message);
});
