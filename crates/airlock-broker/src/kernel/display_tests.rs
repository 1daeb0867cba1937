use super::*;
use serde_json::json;

const PNG: &[u8] = include_bytes!("../media_fixture.png");

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[test]
fn every_served_type_passes_when_its_bytes_are_what_it_says() {
    let mut d = Displays::default();
    let item = json!({"mime": "image/png", "data": b64(PNG), "bundle": {
        "text/plain": b64(b"<Figure>"), "text/html": b64(b"<b>x</b>"),
        "application/json": b64(b"{\"a\": 1}"), "image/svg+xml": b64(b"<svg/>")}});
    d.offer(Some(item)).unwrap();
    assert_eq!((d.items.len(), d.dropped), (1, 0));
    assert_eq!(d.items[0].mime, "image/png");
    assert_eq!(d.items[0].bundle.len(), 4);
}

#[test]
fn a_representation_that_is_not_its_type_is_left_out() {
    let mut d = Displays::default();
    let fake = [
        b"\x89PNG\r\n\x1a\n".as_slice(),
        b"<script>alert(1)</script>",
    ]
    .concat();
    let item = json!({"mime": "image/png", "data": b64(&fake),
                      "bundle": {"text/plain": b64(b"x"), "application/json": b64(b"{nope")}});
    d.offer(Some(item)).unwrap();
    assert_eq!(d.items[0].mime, "text/plain", "{:?}", d.items[0]);
    assert!(d.items[0].bundle.is_empty());
    d.offer(Some(json!({"mime": "image/png", "data": b64(&fake)})))
        .unwrap();
    d.offer(Some(
        json!({"mime": "text/plain", "data": b64(b"\xff\xfe")}),
    ))
    .unwrap();
    assert_eq!((d.items.len(), d.dropped), (1, 2));
}

#[test]
fn malformed_items_break_the_protocol() {
    let mut d = Displays::default();
    for bad in [
        json!({"mime": "text/x-script", "data": b64(b"x")}),
        json!({"mime": "image/png", "data": "not base64!"}),
        json!({"mime": "image/png"}),
        json!({"mime": "text/plain", "data": b64(b"x"), "bundle": {"text/plain": b64(b"y")}}),
        json!({"mime": "text/plain", "data": b64(b"x"), "bundle": {"text/html": 5}}),
        json!({"mime": "text/plain", "data": b64(b"x"), "bundle": []}),
    ] {
        assert!(d.offer(Some(bad.clone())).is_err(), "{bad}");
    }
    assert_eq!((d.items.len(), d.dropped), (0, 0));
}

#[test]
fn items_past_the_caps_are_counted_not_kept() {
    let mut d = Displays::default();
    for _ in 0..MAX_ITEMS + 3 {
        d.offer(Some(json!({"mime": "text/plain", "data": b64(b"x")})))
            .unwrap();
    }
    assert_eq!((d.items.len(), d.dropped), (MAX_ITEMS, 3));
}

#[test]
fn the_value_bundle_is_checked_and_shares_the_byte_cap() {
    let mut d = Displays::default();
    let big = "a".repeat(MAX_BYTES - 10);
    d.offer(Some(
        json!({"mime": "text/plain", "data": b64(big.as_bytes())}),
    ))
    .unwrap();
    let bundle: Bundle = [("text/html".to_string(), b64(b"<table>too much</table>"))].into();
    assert!(d.value_bundle(bundle).unwrap().is_empty());
    let mut d = Displays::default();
    let bundle: Bundle = [
        ("text/html".to_string(), b64(b"<table/>")),
        ("image/png".to_string(), b64(b"\x89PNG\r\n\x1a\n<html>")),
    ]
    .into();
    let kept = d.value_bundle(bundle).unwrap();
    assert_eq!(kept.keys().collect::<Vec<_>>(), ["text/html"]);
}

/// The red team patched the guest's own cap away: a 600,000-byte text/html value is still
/// held to the value bundle's 256 KiB here, and what fits stays.
#[test]
fn a_value_bundle_past_its_cap_keeps_only_what_fits() {
    let mut d = Displays::default();
    let mut bundle = Bundle::new();
    bundle.insert("text/html".into(), b64(&vec![b'A'; 600_000]));
    bundle.insert("text/plain".into(), b64(b"V()"));
    let kept = d.value_bundle(bundle).unwrap();
    assert_eq!(kept.keys().collect::<Vec<_>>(), ["text/plain"]);
    let mut bundle = Bundle::new();
    bundle.insert("text/html".into(), b64(&vec![b'A'; MAX_VALUE_BUNDLE]));
    assert_eq!(
        d.value_bundle(bundle).unwrap().len(),
        1,
        "exactly the cap fits"
    );
}
