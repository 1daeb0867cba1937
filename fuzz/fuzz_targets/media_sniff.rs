//! The broker labels a display item or a file an image (PNG, JPEG, GIF, WebP) only when its
//! bytes walk as one (`airlock_broker::media`; a PNG's pixels inflated): the guest writes those
//! bytes, so any bytes go in. The oracles: an answer, never a panic; a yes only for bytes that
//! begin and end as the format must; never two formats at once.
#![no_main]

use airlock_broker::media::{is_gif, is_jpeg, is_png, is_webp};
use libfuzzer_sys::fuzz_target;

const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
/// IEND: length 0, its type and its fixed CRC.
const PNG_END: &[u8] = b"\0\0\0\0IEND\xaeB`\x82";

fuzz_target!(|data: &[u8]| {
    let png = is_png(data);
    let jpeg = is_jpeg(data);
    if png {
        assert!(data.starts_with(PNG_SIGNATURE) && data.ends_with(PNG_END));
    }
    if jpeg {
        assert!(data.starts_with(b"\xff\xd8") && data.ends_with(b"\xff\xd9"));
    }
    let gif = is_gif(data);
    if gif {
        assert!(data.starts_with(b"GIF8") && data.ends_with(b";"));
    }
    let webp = is_webp(data);
    if webp {
        assert!(data.starts_with(b"RIFF") && data.get(8..12) == Some(b"WEBP".as_slice()));
    }
    assert!([png, jpeg, gif, webp].iter().filter(|x| **x).count() <= 1);
});
