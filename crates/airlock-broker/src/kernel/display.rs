//! A cell's rich output as the guest announces it (`display` notifications): untrusted, so
//! each item is checked (a known media type, real base64, the format's own signature) and the
//! cell's items are capped in number and size.
use base64::Engine as _;
use serde_json::Value;

use crate::result::DisplayItem;

/// Items kept per cell.
pub const MAX_ITEMS: usize = 16;
/// Decoded bytes kept per cell.
pub const MAX_BYTES: usize = 4 * 1024 * 1024;

/// The rich output of one cell.
#[derive(Debug, Default)]
pub(crate) struct Displays {
    pub(crate) items: Vec<DisplayItem>,
    pub(crate) dropped: u32,
    bytes: usize,
}

impl Displays {
    /// Take one announced item; a malformed one is an error (the guest broke the protocol),
    /// one over the caps is counted as dropped.
    pub(crate) fn offer(&mut self, params: Option<Value>) -> Result<(), String> {
        let params = params.unwrap_or(Value::Null);
        let (Some(mime), Some(data)) = (params["mime"].as_str(), params["data"].as_str()) else {
            return Err("display needs string `mime` and `data`".into());
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| format!("display data is not base64: {e}"))?;
        check(mime, &bytes)?;
        if self.items.len() >= MAX_ITEMS || self.bytes + bytes.len() > MAX_BYTES {
            self.dropped = self.dropped.saturating_add(1);
            return Ok(());
        }
        self.bytes += bytes.len();
        self.items.push(DisplayItem {
            mime: mime.to_string(),
            data: data.to_string(),
        });
        Ok(())
    }
}

fn check(mime: &str, bytes: &[u8]) -> Result<(), String> {
    let ok = match mime {
        "image/png" => bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "image/jpeg" => bytes.starts_with(b"\xff\xd8\xff"),
        "text/plain" => std::str::from_utf8(bytes).is_ok(),
        _ => {
            return Err(format!(
                "display media type {:?} is not served",
                trunc(mime)
            ))
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!("display data is not {mime}"))
    }
}

fn trunc(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(b: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    #[test]
    fn only_real_pngs_jpegs_and_text_pass() {
        let mut d = Displays::default();
        let png = b64(b"\x89PNG\r\n\x1a\nrest");
        assert!(d
            .offer(Some(json!({"mime": "image/png", "data": png})))
            .is_ok());
        assert!(d
            .offer(Some(json!({"mime": "text/plain", "data": b64(b"hi")})))
            .is_ok());
        for bad in [
            json!({"mime": "text/html", "data": b64(b"<script>")}),
            json!({"mime": "image/png", "data": b64(b"GIF89a")}),
            json!({"mime": "image/png", "data": "not base64!"}),
            json!({"mime": "text/plain", "data": b64(b"\xff\xfe")}),
            json!({"mime": "image/png"}),
        ] {
            assert!(d.offer(Some(bad.clone())).is_err(), "{bad}");
        }
        assert_eq!((d.items.len(), d.dropped), (2, 0));
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
}
