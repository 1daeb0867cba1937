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
