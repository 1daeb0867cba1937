//! The egress proxy's request-head reader and parser (`read_head`, `parse`, `body_length`)
//! against `httparse`, the parser behind hyper's servers, standing in for the origin:
//! - a head the proxy accepts, httparse reads as one complete head of exactly the same bytes,
//!   with the same method, version, request target (byte for byte) and header fields (so the same `Host` and the same
//!   `Content-Length`, hence the same body length);
//! - the head the proxy forwards (`origin_head`) httparse reads as one complete head: the same
//!   method, the origin-form path the proxy derived, exactly one `Host` — the vetted one — no
//!   `Transfer-Encoding`, and a `Content-Length` that says what `body_length` says;
//! - `read_head`, fed in pieces of 1 to 15 bytes, stops at the first CRLF CRLF, within the cap,
//!   and hands back everything after it untouched.
//! The first input byte picks the piece size (low nibble) and a small cap (0x10).
#![no_main]

#[path = "../common/mod.rs"]
mod common;

use airlock_egress::head::{self, Request, Target};
use airlock_egress::syntax::{self, END};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Some((&selector, data)) = input.split_first() else {
        return;
    };
    let max = if selector & 0x10 == 0 { 8192 } else { 64 };
    let mut reader = common::Chunked {
        data,
        chunk: common::chunk_of(selector),
    };
    if let Ok((h, rest)) = common::ready(head::read_head(&mut reader, max)) {
        assert!(h.len() <= max && h.ends_with(END));
        let first_end = h
            .windows(END.len())
            .position(|w| w == END)
            .map(|i| i + END.len());
        assert_eq!(first_end, Some(h.len()), "read past the first end of head");
        assert!(data.starts_with(&h) && data[h.len()..].starts_with(&rest));
        check(&h);
    }
    check(data);
});

fn check(raw: &[u8]) {
    let Ok(req) = head::parse(raw) else { return };
    let mut fields = [httparse::EMPTY_HEADER; 128];
    let mut theirs = httparse::Request::new(&mut fields);
    let status = theirs.parse(raw);
    assert_eq!(
        status.ok(),
        Some(httparse::Status::Complete(raw.len())),
        "the proxy accepted a head the origin reads otherwise"
    );
    assert_eq!(theirs.method, Some(req.method.as_str()));
    let version = if req.version == "HTTP/1.1" { 1 } else { 0 };
    assert_eq!(theirs.version, Some(version));
    let first = raw.split(|b| *b == b'\n').next().unwrap_or_default();
    let ours = syntax::request_line(first.strip_suffix(b"\r").unwrap_or(first))
        .expect("an accepted head has a request line");
    assert_eq!(
        theirs.path,
        Some(ours.target),
        "the origin reads another target"
    );
    assert_eq!(
        theirs.headers.len(),
        req.headers.len(),
        "header count differs"
    );
    for (h, (name, value)) in theirs.headers.iter().zip(&req.headers) {
        assert_eq!(h.name, name, "header name differs");
        let v = std::str::from_utf8(h.value).expect("our value is UTF-8, so is theirs");
        assert_eq!(v.trim_matches([' ', '\t']), value, "header value differs");
    }
    check_origin(&req);
}

/// The head sent to the origin, read by the origin.
fn check_origin(req: &Request) {
    let out = req.origin_head();
    let mut fields = [httparse::EMPTY_HEADER; 128];
    let mut origin = httparse::Request::new(&mut fields);
    let status = origin.parse(&out).expect("the forwarded head parses");
    assert_eq!(status, httparse::Status::Complete(out.len()));
    assert_eq!(origin.method, Some(req.method.as_str()));
    if let Target::Http { path } = &req.target {
        assert_eq!(origin.path, Some(path.as_str()));
    }
    let named = |n: &str| -> Vec<&[u8]> {
        let hs = origin.headers.iter();
        hs.filter(|h| h.name.eq_ignore_ascii_case(n))
            .map(|h| h.value)
            .collect()
    };
    let vetted = match req.port {
        80 => req.host.to_string(),
        p => format!("{}:{p}", req.host),
    };
    assert_eq!(
        named("host"),
        [vetted.as_bytes()],
        "the origin hears another Host"
    );
    assert!(named("transfer-encoding").is_empty());
    match named("content-length")[..] {
        [] => assert_eq!(req.body_length, 0, "a body the origin does not expect"),
        [one] => {
            let n = std::str::from_utf8(one)
                .ok()
                .and_then(|s| s.parse::<u64>().ok());
            assert_eq!(
                n,
                Some(req.body_length),
                "the origin reads another body length"
            );
        }
        _ => panic!("more than one Content-Length forwarded"),
    }
}
