//! A file's media type, and the one MCP content block it becomes.
//!
//! The type comes from the bytes first (PNG, JPEG, GIF and WebP whose whole structure walks,
//! see `airlock_broker::media`; PDF, ZIP, gzip signatures),
//! then from the extension, but an extension never claims a raster image the bytes are not (a
//! client hands image content to a model API that rejects a broken image). Then:
//!
//! - a raster image (`image/png`, `image/jpeg`, `image/gif`, `image/webp`) → image content;
//! - valid UTF-8 → an embedded text resource with its media type (`text/plain` when nothing
//!   else is known; SVG stays text, `image/svg+xml`);
//! - anything else → an embedded blob resource (base64) with its media type
//!   (`application/octet-stream` when nothing else is known).
use base64::Engine;
use rmcp::model::{ContentBlock, ResourceContents};

/// Raster formats recognised by their signature.
const SIGNATURES: &[(&[u8], &str)] = &[
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
];

/// By extension (lower-cased); raster image types here are used only when the bytes agree.
const EXTENSIONS: &[(&str, &str)] = &[
    ("txt", "text/plain"),
    ("log", "text/plain"),
    ("md", "text/markdown"),
    ("csv", "text/csv"),
    ("tsv", "text/tab-separated-values"),
    ("html", "text/html"),
    ("htm", "text/html"),
    ("css", "text/css"),
    ("xml", "application/xml"),
    ("json", "application/json"),
    ("jsonl", "application/jsonl"),
    ("yaml", "application/yaml"),
    ("yml", "application/yaml"),
    ("toml", "application/toml"),
    ("py", "text/x-python"),
    ("js", "text/javascript"),
    ("ts", "text/x-typescript"),
    ("sh", "text/x-shellscript"),
    ("svg", "image/svg+xml"),
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
    ("bmp", "image/bmp"),
    ("ico", "image/vnd.microsoft.icon"),
    ("tif", "image/tiff"),
    ("tiff", "image/tiff"),
    ("pdf", "application/pdf"),
    ("zip", "application/zip"),
    ("gz", "application/gzip"),
    ("tar", "application/x-tar"),
    ("parquet", "application/vnd.apache.parquet"),
    ("npy", "application/octet-stream"),
    ("wav", "audio/wav"),
    ("mp3", "audio/mpeg"),
    ("mp4", "video/mp4"),
    ("wasm", "application/wasm"),
];

/// The raster image types returned as MCP image content.
const IMAGES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

fn sniff(data: &[u8]) -> Option<&'static str> {
    if airlock_broker::media::is_webp(data) {
        return Some("image/webp");
    }
    let found = SIGNATURES
        .iter()
        .find(|(sig, _)| data.starts_with(sig))
        .map(|(_, t)| *t)?;
    // A raster signature is not enough: the whole file must walk as one (a signature
    // followed by HTML or JavaScript is not an image).
    match found {
        "image/png" if !airlock_broker::media::is_png(data) => None,
        "image/jpeg" if !airlock_broker::media::is_jpeg(data) => None,
        "image/gif" if !airlock_broker::media::is_gif(data) => None,
        t => Some(t),
    }
}

fn by_extension(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let (_, ext) = name.rsplit_once('.')?;
    let ext = ext.to_ascii_lowercase();
    EXTENSIONS.iter().find(|(e, _)| *e == ext).map(|(_, t)| *t)
}

/// How a file comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// MCP image content.
    Image,
    /// An embedded text resource.
    Text,
    /// An embedded blob resource.
    Blob,
}

impl Form {
    /// `image`, `text` or `blob`.
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Image => "image",
            Form::Text => "text",
            Form::Blob => "blob",
        }
    }
}

/// The media type of `data` found at `path`, and the form it comes back in.
pub fn classify(path: &str, data: &[u8]) -> (&'static str, Form) {
    if let Some(t) = sniff(data) {
        let form = if IMAGES.contains(&t) {
            Form::Image
        } else {
            Form::Blob
        };
        return (t, form);
    }
    let utf8 = std::str::from_utf8(data).is_ok();
    let claimed = by_extension(path).filter(|t| !IMAGES.contains(t));
    match (claimed, utf8) {
        (Some(t), true) => (t, Form::Text),
        (Some(t), false) => (t, Form::Blob),
        (None, true) => ("text/plain", Form::Text),
        (None, false) => ("application/octet-stream", Form::Blob),
    }
}

/// The content block for `data` read from the guest's `path` (addressed as `uri`).
pub fn block(uri: &str, mime: &str, form: Form, data: &[u8]) -> ContentBlock {
    let b64 = || base64::engine::general_purpose::STANDARD.encode(data);
    match form {
        Form::Image => ContentBlock::image(b64(), mime),
        Form::Text => ContentBlock::resource(ResourceContents::TextResourceContents {
            uri: uri.to_owned(),
            mime_type: Some(mime.to_owned()),
            text: String::from_utf8_lossy(data).into_owned(),
            meta: None,
        }),
        Form::Blob => ContentBlock::resource(ResourceContents::BlobResourceContents {
            uri: uri.to_owned(),
            mime_type: Some(mime.to_owned()),
            blob: b64(),
            meta: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_decide_images_and_extensions_the_rest() {
        let png = include_bytes!("../../airlock-broker/src/media_fixture.png");
        assert_eq!(classify("p.png", png), ("image/png", Form::Image));
        assert_eq!(classify("noext", png), ("image/png", Form::Image));
        // A signature followed by HTML is no image, whatever the name says.
        let fake = b"\x89PNG\r\n\x1a\n<script>alert(1)</script>";
        assert_eq!(
            classify("f.png", fake),
            ("application/octet-stream", Form::Blob)
        );
        assert_eq!(classify("f.html", fake), ("text/html", Form::Blob));
        // An extension never claims an image the bytes are not.
        assert_eq!(classify("fake.png", b"hello"), ("text/plain", Form::Text));
        assert_eq!(
            classify("fake.PNG", b"\xff\xfe\x00"),
            ("application/octet-stream", Form::Blob)
        );
        assert_eq!(classify("a.csv", b"a,b\n"), ("text/csv", Form::Text));
        assert_eq!(
            classify("d/x.svg", b"<svg/>"),
            ("image/svg+xml", Form::Text)
        );
        assert_eq!(
            classify("x.bin", b"\x00\xff"),
            ("application/octet-stream", Form::Blob)
        );
        assert_eq!(
            classify("x.parquet", b"PAR1\xff"),
            ("application/vnd.apache.parquet", Form::Blob)
        );
        assert_eq!(
            classify("r.pdf", b"%PDF-1.7\n"),
            ("application/pdf", Form::Blob)
        );
        // GIF and WebP walk too: the red team's signatures going on as HTML are no images.
        let webp = b"RIFF\x14\0\0\0WEBPVP8 \x08\0\0\0abcdefgh";
        assert_eq!(classify("w", webp), ("image/webp", Form::Image));
        let fake_webp = b"RIFF\0\0\0\0WEBP<script>alert(1)</script>";
        assert_ne!(classify("w.webp", fake_webp).1, Form::Image);
        let gif =
            b"GIF89a\x01\0\x01\0\x80\0\0\0\0\0\xff\xff\xff,\0\0\0\0\x01\0\x01\0\0\x02\x02D\x01\0;";
        assert_eq!(classify("g", gif), ("image/gif", Form::Image));
        let fake_gif = b"GIF89a<html><script>alert(1)</script></html>";
        assert_ne!(classify("g.gif", fake_gif).1, Form::Image);
    }

    #[test]
    fn blocks_carry_exact_bytes() {
        let data = b"\x00\x01\xfe";
        let b = block(
            "airlock://work/x",
            "application/octet-stream",
            Form::Blob,
            data,
        );
        let v = serde_json::to_value(&b).unwrap();
        assert_eq!(v["resource"]["blob"], "AAH+");
        assert_eq!(v["resource"]["mimeType"], "application/octet-stream");
        let v = serde_json::to_value(block("u", "image/png", Form::Image, data)).unwrap();
        assert_eq!(v["type"], "image");
        assert_eq!(v["data"], "AAH+");
        assert_eq!(v["mimeType"], "image/png");
    }
}
