//! A cell's rich output as the guest announces it (`display` notifications, and the trailing
//! value's representations): untrusted, so each representation is checked against its media
//! type (one of [`MIME_TYPES`], real base64, the bytes being what the type says: a PNG or JPEG
//! whose whole structure walks, UTF-8 text, JSON that parses) and the cell's items are capped
//! in number and size.
use base64::Engine as _;
use serde_json::Value;

use crate::media;
use crate::result::{Bundle, DisplayItem};

/// Items kept per cell.
pub const MAX_ITEMS: usize = 16;
/// Decoded bytes kept per cell (every representation of every item, and the value's).
pub const MAX_BYTES: usize = 4 * 1024 * 1024;
/// Decoded bytes kept of the cell value's representations (the guest keeps to it too; a
/// guest that does not is held to it here).
pub const MAX_VALUE_BUNDLE: usize = 256 * 1024;
/// The media types served, the richest first (the guest's order, `guest/formatter.py`).
pub const MIME_TYPES: [&str; 8] = [
    "image/png",
    "image/jpeg",
    "image/svg+xml",
    "text/html",
    "text/markdown",
    "text/latex",
    "application/json",
    "text/plain",
];

/// The rich output of one cell.
#[derive(Debug, Default)]
pub(crate) struct Displays {
    pub(crate) items: Vec<DisplayItem>,
    pub(crate) dropped: u32,
    bytes: usize,
}

impl Displays {
    /// Take one announced item (`mime`, `data` and an optional `bundle` of more). A malformed
    /// one is an error (the guest broke the protocol); a representation whose bytes are not
    /// its type is left out, and an item with none left, or over the caps, is counted as
    /// dropped.
    pub(crate) fn offer(&mut self, params: Option<Value>) -> Result<(), String> {
        let params = params.unwrap_or(Value::Null);
        let (Some(mime), Some(data)) = (params["mime"].as_str(), params["data"].as_str()) else {
            return Err("display needs string `mime` and `data`".into());
        };
        let mut reps = vec![(mime.to_string(), data.to_string())];
        match &params["bundle"] {
            Value::Null => {}
            Value::Object(more) => {
                for (m, d) in more {
                    let d = d.as_str().ok_or("display bundle data must be strings")?;
                    reps.push((m.clone(), d.to_string()));
                }
            }
            _ => return Err("display `bundle` must be an object".into()),
        }
        if reps.len() > MIME_TYPES.len() {
            return Err("display bundle has more types than are served".into());
        }
        let (kept, size) = self.checked(reps)?;
        let mut kept = kept.into_iter();
        let Some((mime, data)) = kept.next() else {
            self.dropped = self.dropped.saturating_add(1);
            return Ok(());
        };
        if self.items.len() >= MAX_ITEMS || self.bytes + size > MAX_BYTES {
            self.dropped = self.dropped.saturating_add(1);
            return Ok(());
        }
        self.bytes += size;
        self.items.push(DisplayItem {
            mime,
            data,
            bundle: kept.collect(),
        });
        Ok(())
    }

    /// The cell value's representations within what the cell's items left of the byte cap:
    /// the ones that are what they say; malformed ones end the kernel as items do.
    pub(crate) fn value_bundle(&mut self, bundle: Bundle) -> Result<Bundle, String> {
        if bundle.len() > MIME_TYPES.len() {
            return Err("value bundle has more types than are served".into());
        }
        let (kept, _) = self.checked(bundle.into_iter().collect())?;
        let (mut fitted, mut size) = (Bundle::new(), 0);
        for (mime, data) in kept {
            // Decoded length, from the base64 (checked above), in the guest's order.
            let len = data.len() / 4 * 3 - data.bytes().rev().take_while(|b| *b == b'=').count();
            if size + len <= MAX_VALUE_BUNDLE {
                size += len;
                fitted.insert(mime, data);
            }
        }
        if self.bytes + size > MAX_BYTES {
            return Ok(Bundle::new());
        }
        self.bytes += size;
        Ok(fitted)
    }

    /// The representations whose bytes are what they say, in order, and their decoded size.
    fn checked(
        &self,
        reps: Vec<(String, String)>,
    ) -> Result<(Vec<(String, String)>, usize), String> {
        let mut kept = Vec::with_capacity(reps.len());
        let mut size = 0;
        for (mime, data) in reps {
            if !MIME_TYPES.contains(&mime.as_str()) {
                return Err(format!(
                    "display media type {:?} is not served",
                    trunc(&mime)
                ));
            }
            if kept.iter().any(|(m, _)| *m == mime) {
                return Err(format!("display media type {mime} given twice"));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(&data)
                .map_err(|e| format!("display data is not base64: {e}"))?;
            if is(&mime, &bytes) {
                size += bytes.len();
                kept.push((mime, data));
            }
        }
        Ok((kept, size))
    }
}

/// Whether `bytes` are what `mime` says.
pub fn is(mime: &str, bytes: &[u8]) -> bool {
    match mime {
        "image/png" => media::is_png(bytes),
        "image/jpeg" => media::is_jpeg(bytes),
        "application/json" => serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok(),
        _ => std::str::from_utf8(bytes).is_ok(),
    }
}

fn trunc(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
#[path = "display_tests.rs"]
mod tests;
