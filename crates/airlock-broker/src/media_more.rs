//! The rest of the image walks `media` uses: a PNG's pixel data inflated to exactly the size
//! its header implies, and GIF and WebP walked block by block. Bounded: at most
//! [`MAX_RAW_PIXELS`] bytes are inflated (into a small buffer, counted, not kept).

/// Largest raw (filtered) pixel data a PNG may declare and still be labelled one: 64 MiB
/// (4096 x 4096 RGBA at 8 bits), far above any figure a cell shows.
pub const MAX_RAW_PIXELS: u64 = 64 * 1024 * 1024;

/// The raw size a PNG header declares: filter byte plus packed pixels per row, per Adam7 pass
/// when interlaced; None past [`MAX_RAW_PIXELS`].
pub(crate) fn png_raw_size(
    width: u32,
    height: u32,
    depth: u8,
    colour: u8,
    interlaced: bool,
) -> Option<u64> {
    let channels: u64 = match colour {
        0 | 3 => 1,
        4 => 2,
        2 => 3,
        _ => 4,
    };
    let bits = channels * u64::from(depth);
    let rows = |w: u64, h: u64| {
        if w == 0 || h == 0 {
            0
        } else {
            h * (1 + (w * bits).div_ceil(8))
        }
    };
    let (w, h) = (u64::from(width), u64::from(height));
    let total = if interlaced {
        const PASSES: [(u64, u64, u64, u64); 7] = [
            (0, 0, 8, 8),
            (4, 0, 8, 8),
            (0, 4, 4, 8),
            (2, 0, 4, 4),
            (0, 2, 2, 4),
            (1, 0, 2, 2),
            (0, 1, 1, 2),
        ];
        PASSES
            .iter()
            .map(|&(x0, y0, dx, dy)| {
                rows(
                    w.saturating_sub(x0).div_ceil(dx),
                    h.saturating_sub(y0).div_ceil(dy),
                )
            })
            .sum()
    } else {
        rows(w, h)
    };
    (total <= MAX_RAW_PIXELS).then_some(total)
}

/// Whether the concatenated IDAT data is one zlib stream that inflates to exactly `expected`
/// bytes and ends there, with no byte after it. At most `expected + 1` bytes are inflated,
/// into a sink.
pub(crate) fn inflates_to(idat: &[&[u8]], expected: u64) -> bool {
    use std::io::Read;
    let stream: Box<dyn Read + '_> = idat.iter().fold(Box::new(std::io::empty()), |r, part| {
        Box::new(r.chain(*part))
    });
    let mut z = flate2::bufread::ZlibDecoder::new(std::io::BufReader::new(stream));
    let out = std::io::copy(&mut (&mut z).take(expected + 1), &mut std::io::sink());
    let all_in = idat.iter().map(|p| p.len() as u64).sum::<u64>();
    // A truncated or corrupt stream is an error; bytes past its end are left unread.
    out.is_ok_and(|n| n == expected) && z.total_in() == all_in
}

/// A GIF: the signature, the logical screen descriptor and its colour table, then image
/// descriptors (with their colour table and LZW data) and extensions, each of whose data
/// sub-blocks fit, at least one image, and the trailer as the last byte.
pub fn is_gif(data: &[u8]) -> bool {
    if !(data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a")) || data.len() < 13 {
        return false;
    }
    let table = |flags: u8| {
        if flags & 0x80 != 0 {
            3usize << ((flags & 7) + 1)
        } else {
            0
        }
    };
    let mut i = 13 + table(data[10]);
    let mut images = 0;
    loop {
        match data.get(i) {
            Some(0x3b) => return images > 0 && i + 1 == data.len(),
            Some(0x2c) => {
                let Some(&flags) = data.get(i + 9) else {
                    return false;
                };
                i += 10 + table(flags) + 1; // descriptor, local table, LZW minimum code size
                images += 1;
            }
            Some(0x21) => i += 2, // introducer and label
            _ => return false,
        }
        match sub_blocks_end(data, i) {
            Some(next) => i = next,
            None => return false,
        }
    }
}

/// Past a run of data sub-blocks starting at `i` (each a length byte, the last 0).
fn sub_blocks_end(data: &[u8], mut i: usize) -> Option<usize> {
    loop {
        let len = usize::from(*data.get(i)?);
        i += 1;
        if len == 0 {
            return Some(i);
        }
        i += len;
        if i > data.len() {
            return None;
        }
    }
}

/// A WebP: `RIFF`, a size that is the file's, `WEBP`, then chunks that exactly fill it (each
/// padded to even length), the first an image chunk (`VP8 `, `VP8L`) or `VP8X` followed by one
/// (or `ANIM` for an animation).
pub fn is_webp(data: &[u8]) -> bool {
    if data.len() < 20 || &data[..4] != b"RIFF" || &data[8..12] != b"WEBP" {
        return false;
    }
    let riff = u32::from_le_bytes([data[4], data[5], data[6], data[7]]) as usize;
    if riff.checked_add(8) != Some(data.len()) {
        return false;
    }
    let (mut i, mut kinds) = (12, Vec::new());
    while i < data.len() {
        let Some(head) = data.get(i..i + 8) else {
            return false;
        };
        let len = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
        let end = i + 8 + len + (len & 1);
        if end > data.len() {
            return false;
        }
        kinds.push([head[0], head[1], head[2], head[3]]);
        i = end;
    }
    let image = |k: &[u8; 4]| k == b"VP8 " || k == b"VP8L";
    match kinds.first() {
        Some(k) if image(k) => true,
        Some(b"VP8X") => kinds.iter().any(|k| image(k) || k == b"ANIM"),
        _ => false,
    }
}
