//! A cell's rich output (display items and its value's representations) as MCP content: an
//! image (`image/png`, `image/jpeg`) as image content; else SVG or HTML as an embedded text
//! resource with its media type (`airlock://display/<n>`, `airlock://value`); anything else
//! as text in the summary. The broker checked every representation against its type.
use airlock_broker::result::{Bundle, CellValue, DisplayItem};
use base64::Engine as _;
use rmcp::model::{ContentBlock, ResourceContents};

/// Media types returned as an embedded resource, in order of preference.
const RESOURCES: [&str; 2] = ["image/svg+xml", "text/html"];
/// Image types returned as image content, in order of preference.
const IMAGES: [&str; 2] = ["image/png", "image/jpeg"];

/// How one displayed object comes back.
#[derive(Debug)]
pub enum Shown {
    /// As a content block of its own.
    Block(Box<ContentBlock>),
    /// As text in the summary.
    Text(String),
}

fn find<'a>(reps: &'a [(&'a str, &'a str)], types: &[&str]) -> Option<(&'a str, &'a str)> {
    types
        .iter()
        .find_map(|t| reps.iter().find(|(m, _)| m == t).copied())
}

fn text(b64: &str) -> String {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn shown(reps: &[(&str, &str)], uri: &str) -> Option<Shown> {
    if let Some((mime, data)) = find(reps, &IMAGES) {
        return Some(Shown::Block(Box::new(ContentBlock::image(
            data.to_owned(),
            mime,
        ))));
    }
    if let Some((mime, data)) = find(reps, &RESOURCES) {
        return Some(Shown::Block(Box::new(ContentBlock::resource(
            ResourceContents::TextResourceContents {
                uri: uri.to_owned(),
                mime_type: Some(mime.to_owned()),
                text: text(data),
                meta: None,
            },
        ))));
    }
    None
}

fn reps<'a>(first: Option<(&'a str, &'a str)>, bundle: &'a Bundle) -> Vec<(&'a str, &'a str)> {
    first
        .into_iter()
        .chain(bundle.iter().map(|(m, d)| (m.as_str(), d.as_str())))
        .collect()
}

/// The `n`th display item as MCP content, or its text (text/plain, else the first text type).
pub fn item(n: usize, d: &DisplayItem) -> Shown {
    let reps = reps(Some((&d.mime, &d.data)), &d.bundle);
    shown(&reps, &format!("airlock://display/{n}")).unwrap_or_else(|| {
        let plain = reps
            .iter()
            .find(|(m, _)| *m == "text/plain")
            .unwrap_or(&reps[0]);
        Shown::Text(text(plain.1))
    })
}

/// The cell value's rich representation as a content block, if it has one (its repr is in
/// the summary either way).
pub fn value(v: &CellValue) -> Option<ContentBlock> {
    match shown(&reps(None, &v.bundle), "airlock://value")? {
        Shown::Block(b) => Some(*b),
        Shown::Text(_) => None,
    }
}
