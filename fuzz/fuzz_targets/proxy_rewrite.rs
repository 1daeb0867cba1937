//! An exposed port's request head (`airlock_server::net::port_proxy::rewrite`): any bytes a client
//! sends toward a guest, under a server token. Oracles: no panic; a head that is forwarded
//! carries the server's token in no form — not in its target, not in any header's value
//! (bare, after a scheme, among cookies, percent-encoded, inside base64) — and no
//! `Proxy-Authorization`; the head forwarded parses again under the same strict grammar.
#![no_main]

use airlock_server::net::port_proxy::rewrite;
use airlock_server::tenancy::auth::Auth;
use libfuzzer_sys::fuzz_target;

const TOKEN: &str = "fuzz-server-token-0123456789";

fuzz_target!(|input: &[u8]| {
    let Ok(auth) = Auth::bearer(TOKEN) else {
        unreachable!("the fuzz token is a valid token")
    };
    let Ok(forward) = rewrite(input, &auth) else {
        return;
    };
    let head = std::str::from_utf8(&forward.head).expect("a forwarded head is text");
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    assert!(!auth.carries_token(request_line.as_bytes()), "{head:?}");
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line
            .split_once(": ")
            .expect("a forwarded header is `name: value`");
        assert!(
            !name.eq_ignore_ascii_case("proxy-authorization"),
            "{head:?}"
        );
        assert!(!auth.carries_token(value.as_bytes()), "{head:?}");
    }
    assert!(!head.contains(TOKEN), "{head:?}");
    // What the guest gets is one strict head, as the client's was.
    airlock_egress::head::frame(&forward.head).expect("the forwarded head frames again");
});
