//! Whether bytes are the image their label says: a PNG or JPEG is checked by walking its whole
//! structure, not by its first bytes, so that a file or display item that starts with a
//! signature and goes on as HTML or JavaScript is not labelled an image (a viewer that trusts
//! the label would hand it on as one; one that sniffs would run it). The work is one pass over
//! the bytes (a CRC per PNG chunk), bounded by their length.

pub use crate::media_more::{is_gif, is_webp};

const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// A PNG: the signature, then chunks each with a length that fits, an ASCII-letter type and a
/// matching CRC, `IHDR` first (13 bytes, non-zero size, a valid bit depth for its colour type),
/// at least one `IDAT`, `IEND` last with nothing after it, and the `IDAT` data one zlib stream
/// that inflates to exactly the pixel data the header declares (at most 64 MiB of it).
#[must_use]
pub fn is_png(data: &[u8]) -> bool {
    let Some(mut rest) = data.strip_prefix(PNG_SIGNATURE) else {
        return false;
    };
    let mut first = true;
    let (mut idat, mut raw): (Vec<&[u8]>, Option<u64>) = (Vec::new(), None);
    while rest.len() >= 12 {
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        if len > rest.len() - 12 {
            return false;
        }
        let (kind, body) = (&rest[4..8], &rest[8..8 + len]);
        let crc =
            u32::from_be_bytes([rest[8 + len], rest[9 + len], rest[10 + len], rest[11 + len]]);
        if !kind.iter().all(u8::is_ascii_alphabetic) || crc32fast::hash(&rest[4..8 + len]) != crc {
            return false;
        }
        if first != (kind == b"IHDR") || (first && !header_ok(body)) {
            return false;
        }
        if first {
            let dim =
                |i: usize| u32::from_be_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
            raw = crate::media_more::png_raw_size(dim(0), dim(4), body[8], body[9], body[12] == 1);
            if raw.is_none() {
                return false;
            }
        }
        first = false;
        if kind == b"IDAT" {
            idat.push(body);
        }
        rest = &rest[12 + len..];
        if kind == b"IEND" {
            let inflates = raw.is_some_and(|n| crate::media_more::inflates_to(&idat, n));
            return !idat.is_empty() && len == 0 && rest.is_empty() && inflates;
        }
    }
    false
}

fn header_ok(h: &[u8]) -> bool {
    if h.len() != 13 {
        return false;
    }
    let width = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
    let height = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
    let (depth, colour) = (h[8], h[9]);
    let depths: &[u8] = match colour {
        0 => &[1, 2, 4, 8, 16],
        3 => &[1, 2, 4, 8],
        2 | 4 | 6 => &[8, 16],
        _ => return false,
    };
    width > 0 && height > 0 && depths.contains(&depth) && h[10] == 0 && h[11] == 0 && h[12] <= 1
}

/// A JPEG: `SOI`, then marker segments each with a length that fits, a frame header (`SOFn`)
/// before the first scan (`SOS`), entropy-coded data in which every `0xFF` is stuffed, a
/// restart marker or the end, and `EOI` as the last two bytes.
#[must_use]
pub fn is_jpeg(data: &[u8]) -> bool {
    let Some(mut rest) = data.strip_prefix(b"\xff\xd8") else {
        return false;
    };
    let mut frame = false;
    loop {
        let [0xff, marker, ..] = *rest else {
            return false;
        };
        match marker {
            0xd9 => return false, // EOI before any scan
            0xff => {
                rest = &rest[1..]; // fill byte
                continue;
            }
            0x01 | 0xd0..=0xd8 => return false,
            _ => {}
        }
        let (Some(&hi), Some(&lo)) = (rest.get(2), rest.get(3)) else {
            return false;
        };
        let len = usize::from(u16::from_be_bytes([hi, lo]));
        if len < 2 || rest.len() < 2 + len {
            return false;
        }
        frame |= matches!(marker, 0xc0..=0xcf) && !matches!(marker, 0xc4 | 0xc8 | 0xcc);
        rest = &rest[2 + len..];
        if marker == 0xda {
            if !frame {
                return false;
            }
            match scan_end(rest) {
                Some(next) => rest = next,
                None => return false,
            }
            if rest == b"\xff\xd9" {
                return true;
            }
        }
    }
}

/// Past one scan's entropy-coded data: the bytes from the first marker that is not a stuffed
/// `0xFF00` or a restart marker; None when the data ends first.
fn scan_end(data: &[u8]) -> Option<&[u8]> {
    let mut i = 0;
    while i + 1 < data.len() {
        if data[i] == 0xff {
            match data[i + 1] {
                0x00 | 0xd0..=0xd7 => i += 2,
                0xff => i += 1,
                _ => return Some(&data[i..]),
            }
        } else {
            i += 1;
        }
    }
    None
}

#[cfg(test)]
#[path = "media_tests.rs"]
mod tests;
