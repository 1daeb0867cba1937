use std::io::Read;

use super::*;
use crate::decode::Decoder;
use crate::format::BLOCK_LEN;

/// Bytes that compress (text-like) followed by bytes that do not (xorshift noise).
fn sample(len: usize) -> Vec<u8> {
    let text = b"def f(x):\n    return {'key': x, 'value': [1, 2, 3]}\n";
    let mut out: Vec<u8> = text.iter().copied().cycle().take(len / 2).collect();
    let mut s = 0x2545_f491_4f6c_dd1d_u64;
    while out.len() < len {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        out.push(s.to_le_bytes()[0]);
    }
    out
}

fn body_of(payload: &[u8], threads: usize) -> (Vec<u8>, [u8; 32], u64) {
    let mut body = Vec::new();
    let ((), digest, len) = encode(&mut body, threads, |enc| {
        // Uneven writes, so blocks are filled across write calls.
        for piece in payload.chunks(70_001) {
            enc.write_all(piece).map_err(write_err)?;
        }
        Ok(())
    })
    .unwrap();
    (body, digest, len)
}

#[test]
fn bodies_decode_to_their_payload_at_every_size() {
    for len in [
        0,
        1,
        100,
        BLOCK_LEN - 1,
        BLOCK_LEN,
        BLOCK_LEN + 1,
        3 * BLOCK_LEN + 12_345,
    ] {
        let payload = sample(len);
        let (body, digest, body_len) = body_of(&payload, 1);
        assert_eq!(body_len, body.len() as u64);
        assert_eq!(digest, <[u8; 32]>::from(Sha256::digest(&body)));
        let mut back = Vec::new();
        Decoder::new(&body[..]).read_to_end(&mut back).unwrap();
        assert!(back == payload, "payload of {len} bytes did not come back");
    }
}

#[test]
fn the_body_is_the_same_whatever_the_thread_count() {
    let payload = sample(5 * BLOCK_LEN + 777);
    let (one, d1, _) = body_of(&payload, 1);
    for threads in [2, 3, 4] {
        let (many, d, _) = body_of(&payload, threads);
        assert!(many == one, "{threads} threads made another body");
        assert_eq!(d, d1);
    }
}

#[test]
fn compressible_blocks_shrink_and_noise_is_stored() {
    let mut framed = Framed::default();
    let text = sample(2 * BLOCK_LEN);
    frame_block(&text[..BLOCK_LEN], &mut framed);
    assert_eq!(framed.buf[0], BlockKind::Lz4.byte());
    assert!(framed.len < BLOCK_LEN / 4);
    frame_block(&text[BLOCK_LEN..], &mut framed);
    assert_eq!(framed.buf[0], BlockKind::Stored.byte());
    assert_eq!(framed.len, BLOCK_LEN + BLOCK_HEADER_LEN);
}

#[test]
fn an_error_in_the_payload_stops_the_workers() {
    let mut body = Vec::new();
    let r: Result<((), [u8; 32], u64)> = encode(&mut body, 3, |enc| {
        enc.write_all(&sample(4 * BLOCK_LEN)).map_err(write_err)?;
        Err(SnapshotError::malformed("stop"))
    });
    assert!(matches!(r, Err(SnapshotError::Malformed(_))));
}

#[test]
fn cut_or_extended_bodies_are_malformed() {
    let (body, _, _) = body_of(&sample(BLOCK_LEN + 10), 1);
    let read = |b: &[u8]| Decoder::new(b).read_to_end(&mut Vec::new());
    for cut in [1, 9, 100, body.len() - 1] {
        let e = read(&body[..body.len() - cut]).unwrap_err();
        assert!(matches!(
            crate::decode::from_io(e, "x"),
            SnapshotError::Malformed(_)
        ));
    }
    let mut longer = body.clone();
    longer.push(0);
    assert!(read(&longer).is_err());
    let mut flipped = body;
    flipped[BLOCK_HEADER_LEN + 3] ^= 0xff;
    // A flipped byte inside an LZ4 block either fails to decode or decodes to other bytes;
    // it never panics (the store catches it by digest before this point).
    let _ = read(&flipped);
}
