//! A stateful kernel's messages as the broker reads them: a cell's `display` notifications
//! (the input's JSON array, one params value per element; anything else is one) and a cell's
//! answer (the same JSON as the `execute` result). Oracles: kept display items are at most
//! `MAX_DISPLAY_ITEMS`, of a served media type, real base64 whose decoded bytes fit
//! `MAX_DISPLAY_BYTES` together; a kept value's `repr` is a prefix of the guest's within
//! `MAX_REPR`, and its JSON copy encodes within `MAX_JSON`.
#![no_main]

use airlock_broker::fuzzing::{cell_answer, displays, MAX_JSON, MAX_REPR};
use airlock_broker::kernel::{MAX_DISPLAY_BYTES, MAX_DISPLAY_ITEMS};
use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let all = match &v {
        Value::Array(items) => items.iter().cloned().map(Some).collect(),
        other => vec![Some(other.clone())],
    };
    if let Ok((items, _dropped)) = displays(all) {
        assert!(items.len() <= MAX_DISPLAY_ITEMS);
        let mut total = 0;
        for it in &items {
            assert!(["image/png", "image/jpeg", "text/plain"].contains(&it.mime.as_str()));
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(&it.data)
                .expect("a kept item is base64");
            total += bytes.len();
        }
        assert!(total <= MAX_DISPLAY_BYTES);
    }
    let (_code, value) = cell_answer(Some(v.clone()));
    if let Some(kept) = value {
        let sent = v["value"]["repr"]
            .as_str()
            .expect("a kept value had a repr");
        assert!(kept.repr.len() <= MAX_REPR && sent.starts_with(&kept.repr));
        let json_len = kept.json.as_ref().map_or(0, |j| j.to_string().len());
        assert!(json_len <= MAX_JSON);
    }
});
