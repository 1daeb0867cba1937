//! airlock-server's side of a WebSocket connection (`airlock serve --listen`): the client's
//! bytes through the upgrade the server runs (tungstenite's handshake with the server's frame
//! caps, the bearer-token check as its callback), then, once upgraded, through the session's
//! reader (each message decoded as the session receives it). The first input byte picks the
//! read size (low nibble, `common::chunk_of`); the server's token is `TOKEN`.
//!
//! Oracles, against `httparse` reading the same bytes: the server answers 101 only to one
//! complete head with exactly one `Authorization` header of the form `Bearer TOKEN` (scheme in
//! any case, blanks around the token), within 64 KiB; it answers 401 only when that header is
//! missing, doubled or wrong, and then with `WWW-Authenticate: Bearer`, without echoing the
//! token; to anything else (not an upgrade, too big, junk after the head) it writes nothing. An
//! upgraded connection's messages re-encode and decode to themselves, a message reported too
//! large is over the frame cap, and the reader ends at the end of input (never waits).
#![no_main]

#[path = "../common/mod.rs"]
mod common;

use airlock_protocol::{Message, DEFAULT_MAX_MESSAGE_BYTES};
use airlock_server::fuzzing::ws_connection;
use airlock_server::tenancy::auth::Auth;
use airlock_server::wire::transport::Inbound;
use libfuzzer_sys::fuzz_target;

/// The server's token (in the dictionary and the seeds).
const TOKEN: &str = "fuzz-token-0123456789abcdef";
/// tungstenite's cap on the bytes of a request head.
const MAX_HEAD: usize = 65536;

fuzz_target!(|input: &[u8]| {
    let Some((&selector, data)) = input.split_first() else {
        return;
    };
    let auth = Auth::bearer(TOKEN).expect("a usable token");
    let mut peer = common::Duplex {
        input: common::Chunked {
            data,
            chunk: common::chunk_of(selector),
        },
        written: Vec::new(),
    };
    let got = common::ready(ws_connection(&mut peer, auth, data.len() + 1));
    let reply = peer.written;
    if reply.starts_with(b"HTTP/1.1 101 ") {
        let len = head(data).expect("an upgrade is one complete head");
        assert!(len <= MAX_HEAD);
        assert!(authorized(&data[..len]), "upgraded without the token");
        for event in got.expect("an upgrade answered 101 succeeded") {
            match event {
                Inbound::Message(m) => {
                    let bytes = m.to_vec().expect("encodes");
                    assert_eq!(Message::from_slice(&bytes).expect("decodes"), m);
                }
                Inbound::TooLarge { len, .. } => assert!(len > DEFAULT_MAX_MESSAGE_BYTES as u64),
                Inbound::Invalid(_) | Inbound::Fatal(_) => {}
            }
        }
    } else if reply.starts_with(b"HTTP/1.1 401 ") {
        let len = head(data).expect("a refusal answers one complete head");
        assert!(len <= MAX_HEAD);
        assert!(!authorized(&data[..len]), "refused with the token");
        assert!(got.is_err());
        let text = String::from_utf8_lossy(&reply).to_ascii_lowercase();
        assert!(text.contains("\r\nwww-authenticate: bearer\r\n"), "{text}");
        assert!(
            !text.contains(&TOKEN.to_ascii_lowercase()),
            "the token was echoed"
        );
    } else {
        assert!(reply.is_empty(), "neither 101 nor 401: {reply:?}");
        assert!(got.is_err());
    }
});

/// The length of the request head `data` begins with, as httparse reads it.
fn head(data: &[u8]) -> Option<usize> {
    let mut headers = [httparse::EMPTY_HEADER; 256];
    match httparse::Request::new(&mut headers).parse(data) {
        Ok(httparse::Status::Complete(n)) => Some(n),
        _ => None,
    }
}

/// Exactly one `Authorization` header, and it is `Bearer TOKEN`: the scheme in any case, one
/// space, then the token with nothing but blanks around it.
fn authorized(head: &[u8]) -> bool {
    let mut headers = [httparse::EMPTY_HEADER; 256];
    let mut req = httparse::Request::new(&mut headers);
    if !matches!(req.parse(head), Ok(httparse::Status::Complete(_))) {
        return false;
    }
    let mut auth = req
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("authorization"));
    let (Some(only), None) = (auth.next(), auth.next()) else {
        return false;
    };
    let v = only.value;
    if v.len() < 7 || !v[..7].eq_ignore_ascii_case(b"bearer ") {
        return false;
    }
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let token = &v[7..];
    let start = token.iter().position(|b| !blank(b)).unwrap_or(token.len());
    let end = token
        .iter()
        .rposition(|b| !blank(b))
        .map_or(start, |i| i + 1);
    &token[start..end] == TOKEN.as_bytes()
}
