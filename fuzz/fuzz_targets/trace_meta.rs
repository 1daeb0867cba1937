//! The W3C trace context a client sends in params `_meta` (`airlock_server::telemetry::trace_context`):
//! any JSON params through the one function every request's params pass before a method
//! parses them. Oracles: no panic; once taken, an object's params hold no `_meta` and every
//! other member is untouched; non-object params are left as they were.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|input: &[u8]| {
    let Ok(v) = serde_json::from_slice::<Value>(input) else {
        return;
    };
    let before = v.clone();
    let mut params = Some(v);
    let _ = airlock_server::telemetry::trace_context::take(&mut params);
    match (&before, params.as_ref()) {
        (Value::Object(b), Some(Value::Object(a))) => {
            assert!(!a.contains_key("_meta"));
            let mut expected = b.clone();
            expected.remove("_meta");
            assert_eq!(&expected, a);
        }
        (b, a) => assert_eq!(Some(b), a),
    }
});
