//! The forms a client may carry a token in, within one header value or request target: the
//! text as sent, percent-decoded, and every piece of it that decodes as base64 (a `Basic`
//! credential, a token wrapped by a client library). [`crate::auth::Auth::carries_token`]
//! searches each form for the server's tokens, so a token reaches no guest whatever header,
//! scheme, separator or encoding carries it.
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine as _;

/// Bytes that separate the pieces of a value that may each be base64.
const SEPARATORS: &[u8] = b" \t,;\"'&?()[]{}<>";

/// The texts to search: `value`, its percent-decoding, and each piece's base64 decoding.
#[must_use]
pub(crate) fn forms(value: &[u8]) -> Vec<Vec<u8>> {
    let mut texts = vec![value.to_vec()];
    if value.contains(&b'%') {
        texts.push(percent_decoded(value));
    }
    let mut decoded = Vec::new();
    for text in &texts {
        for piece in text.split(|b| SEPARATORS.contains(b)) {
            // `key=base64==`: the part after the first `=` too, padding stripped.
            let after_key = piece
                .iter()
                .position(|&b| b == b'=')
                .map(|i| &piece[i + 1..]);
            for p in std::iter::once(piece).chain(after_key) {
                let p = trim_padding(p);
                if p.len() < 4 {
                    continue;
                }
                for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
                    if let Ok(d) = engine.decode(p) {
                        decoded.push(d);
                    }
                }
            }
        }
    }
    texts.extend(decoded);
    texts
}

/// The pieces of `text` a token may be, whole: split at every separator a header or a URL
/// puts between a token and its neighbours (`:` of `user:token`, `=` of `key=token`).
pub(crate) fn pieces(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    text.split(|b| SEPARATORS.contains(b) || matches!(b, b':' | b'=' | b'/' | b'\r' | b'\n'))
        .filter(|p| !p.is_empty())
}

fn trim_padding(p: &[u8]) -> &[u8] {
    let end = p.iter().rposition(|&b| b != b'=').map_or(0, |i| i + 1);
    &p[..end]
}

fn percent_decoded(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        let hex = v
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (v[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(value: &str, token: &str) -> bool {
        forms(value.as_bytes())
            .iter()
            .any(|f| f.windows(token.len()).any(|w| w == token.as_bytes()))
    }

    #[test]
    fn a_token_is_found_in_every_form_a_client_sends_it() {
        let tok = "airlock_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcde";
        let basic = STANDARD_NO_PAD.encode(format!("x:{tok}"));
        let padded = base64::engine::general_purpose::STANDARD.encode(format!("user:{tok}"));
        for value in [
            format!("Bearer {tok}"),
            format!("Bearer\t{tok}"),
            tok.to_owned(),
            format!("Basic {basic}"),
            format!("Basic {padded}"),
            format!("session=abc; token={tok}; x=1"),
            format!("token=%61{}", &tok[1..]),
            format!("Token token=\"{tok}\""),
            format!("key={}", URL_SAFE_NO_PAD.encode(tok)),
        ] {
            assert!(found(&value, tok), "{value}");
        }
        assert!(!found("Bearer something-else-entirely", tok));
    }

    #[test]
    fn pieces_split_user_password_and_key_value() {
        let got: Vec<&[u8]> = pieces(b"x:tok; k=v").collect();
        assert_eq!(got, [&b"x"[..], b"tok", b"k", b"v"]);
    }
}
