use super::*;

/// A 2x2 PNG and JPEG, as Pillow writes them.
const PNG: &[u8] = include_bytes!("media_fixture.png");
const JPEG: &[u8] = include_bytes!("media_fixture.jpg");

fn with(prefix: &[u8], tail: &[u8]) -> Vec<u8> {
    [prefix, tail].concat()
}

#[test]
fn real_images_pass() {
    assert!(is_png(PNG));
    assert!(is_jpeg(JPEG));
    assert!(!is_png(JPEG) && !is_jpeg(PNG));
}

#[test]
fn a_signature_followed_by_html_is_no_image() {
    let html = b"<html><script>alert(1)</script></html>";
    assert!(!is_png(&with(PNG_SIGNATURE, html)));
    assert!(!is_png(&with(&PNG[..33], html)), "a real IHDR, then HTML");
    assert!(!is_png(&with(PNG, html)), "HTML after IEND");
    assert!(!is_jpeg(&with(b"\xff\xd8\xff", html)));
    assert!(!is_jpeg(&with(JPEG, html)), "HTML after EOI");
    assert!(!is_jpeg(&with(&JPEG[..JPEG.len() - 2], html)));
}

#[test]
fn a_flipped_bit_or_a_cut_fails_the_walk() {
    for i in [8, 20, 40, PNG.len() - 5] {
        let mut bad = PNG.to_vec();
        bad[i] ^= 1;
        assert!(!is_png(&bad), "bit at {i}");
    }
    for n in [0, 8, 33, PNG.len() - 1] {
        assert!(!is_png(&PNG[..n]), "cut at {n}");
        assert!(!is_jpeg(&JPEG[..n.min(JPEG.len() - 1)]), "cut at {n}");
    }
}

/// A PNG of `ihdr` (width, height, depth, colour, interlace) whose IDAT holds `idat`, every
/// chunk with its right CRC.
fn png_of(ihdr: (u32, u32, u8, u8, u8), idat: &[u8]) -> Vec<u8> {
    let chunk = |kind: &[u8], body: &[u8]| {
        let mut c = u32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
        c.extend_from_slice(kind);
        c.extend_from_slice(body);
        c.extend_from_slice(&crc32fast::hash(&[kind, body].concat()).to_be_bytes());
        c
    };
    let (w, h, depth, colour, interlace) = ihdr;
    let mut head = [w.to_be_bytes(), h.to_be_bytes()].concat();
    head.extend_from_slice(&[depth, colour, 0, 0, interlace]);
    [
        PNG_SIGNATURE.to_vec(),
        chunk(b"IHDR", &head),
        chunk(b"IDAT", idat),
        chunk(b"IEND", b""),
    ]
    .concat()
}

fn zlib(raw: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(raw).unwrap();
    z.finish().unwrap()
}

/// The red team's PNG: a right header, chunks and CRCs, but HTML where the pixels go. It does
/// not decode, so it is no PNG; nor are pixels of the wrong size, or a header past the cap.
#[test]
fn a_png_is_one_only_if_its_pixels_inflate_to_its_header_s_size() {
    let html = b"<html><script>alert(1)</script></html>";
    assert!(!is_png(&png_of((1, 1, 8, 2, 0), html)));
    assert!(is_png(&png_of((1, 1, 8, 2, 0), &zlib(&[0, 1, 2, 3]))));
    assert!(
        !is_png(&png_of((1, 1, 8, 2, 0), &zlib(&[0, 1, 2]))),
        "one byte short"
    );
    assert!(
        !is_png(&png_of((1, 1, 8, 2, 0), &zlib(&[0, 1, 2, 3, 4]))),
        "one byte long"
    );
    let mut trailing = zlib(&[0, 1, 2, 3]);
    trailing.extend_from_slice(html);
    assert!(
        !is_png(&png_of((1, 1, 8, 2, 0), &trailing)),
        "bytes past the stream"
    );
    // Adam7: a 3x3 grey image is 9 pixels in 6 rows of 5 passes: 15 bytes.
    assert!(is_png(&png_of((3, 3, 8, 0, 1), &zlib(&[0; 15]))));
    assert!(
        !is_png(&png_of((3, 3, 8, 0, 1), &zlib(&[0; 12]))),
        "3x3 not interlaced"
    );
    // A header declaring more than the cap is no image we label, whatever follows.
    assert!(!is_png(&png_of(
        (100_000, 100_000, 8, 6, 0),
        &zlib(&[0; 16])
    )));
}

#[test]
fn gif_and_webp_walk_their_blocks() {
    let gif =
        b"GIF89a\x01\0\x01\0\x80\0\0\0\0\0\xff\xff\xff,\0\0\0\0\x01\0\x01\0\0\x02\x02D\x01\0;";
    assert!(is_gif(gif));
    assert!(!is_gif(b"GIF89a<html><script>alert(1)</script></html>"));
    assert!(!is_gif(&with(gif, b"<script>")), "bytes past the trailer");
    assert!(!is_gif(&gif[..gif.len() - 1]), "no trailer");
    let webp = b"RIFF\x14\0\0\0WEBPVP8 \x08\0\0\0abcdefgh";
    assert!(is_webp(webp));
    assert!(!is_webp(b"RIFF\0\0\0\0WEBP<script>alert(1)</script>"));
    assert!(!is_webp(&with(webp, b"<p>")), "bytes past the RIFF size");
    assert!(
        !is_webp(b"RIFF\x14\0\0\0WEBPEXIF\x08\0\0\0abcdefgh"),
        "no image chunk"
    );
}
