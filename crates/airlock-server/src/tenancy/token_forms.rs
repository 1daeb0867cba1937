//! The forms a client may carry a token in, within one header line or request line: the text
//! as sent, and what it decodes to — percent-encoding (twice, for a URL inside a URL), base64
//! (standard or URL-safe, padded or not: a `Basic` credential, a JWT's parts, a registry's
//! auth blob) and hex — decoded again up to [`DEPTH`] levels and within [`BUDGET`] bytes.
//! [`crate::tenancy::auth::Auth::carries_token`] searches each form for the server's tokens, so a token
//! reaches no guest whatever header, scheme, separator or encoding carries it. The search is
//! bounded: a hostile head costs at most [`BUDGET`] bytes of forms.
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine as _;

/// Levels of decoding (base64 inside percent-encoding inside base64 ...).
const DEPTH: usize = 3;
/// Bytes of forms made from one value, at most (its own bytes included).
const BUDGET: usize = 256 * 1024;
/// Shortest run worth decoding (a token is longer than what this decodes to).
const MIN_RUN: usize = 12;

/// The texts to search: `value` and every decoding of its parts, breadth first.
#[must_use]
pub(crate) fn forms(value: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![value.to_vec()];
    let mut spent = value.len();
    let mut level = vec![value.to_vec()];
    for _ in 0..DEPTH {
        let mut next = Vec::new();
        for text in &level {
            for d in decodings(text) {
                if spent + d.len() > BUDGET {
                    return out;
                }
                spent += d.len();
                next.push(d);
            }
        }
        if next.is_empty() {
            break;
        }
        out.extend(next.iter().cloned());
        level = next;
    }
    out
}

/// One level of decoding of `text`: its percent-decoding, and each base64 or hex run decoded.
fn decodings(text: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    if text.contains(&b'%') {
        out.push(percent_decoded(text));
    }
    for run in runs(text, is_base64) {
        // A run of the URL-safe or standard alphabet, and its parts between `/` (path
        // segments; also standard base64's) and `=` (`key=value`; also padding).
        let parts = run
            .split(|&b| b == b'/' || b == b'=')
            .filter(|p| !p.is_empty() && p.len() < run.len());
        for part in std::iter::once(run).chain(parts) {
            let part = trim_padding(part);
            if part.len() < MIN_RUN {
                continue;
            }
            for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
                if let Ok(d) = engine.decode(part) {
                    out.push(d);
                }
            }
        }
    }
    for run in runs(text, |b| b.is_ascii_hexdigit()) {
        if run.len() >= 2 * MIN_RUN && run.len() % 2 == 0 {
            out.extend(hex::decode(run).ok());
        }
    }
    out
}

fn is_base64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_' | b'=')
}

/// The maximal runs of bytes `keep` accepts.
fn runs(text: &[u8], keep: impl Fn(u8) -> bool) -> impl Iterator<Item = &[u8]> {
    text.split(move |&b| !keep(b)).filter(|r| !r.is_empty())
}

/// `p` without `=` padding at its end.
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
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let url = |s: &str| URL_SAFE_NO_PAD.encode(s);
        let jwt = format!(
            "eyJhbGciOiJIUzI1NiJ9.{}.c2ln",
            url(&format!("{{\"tok\":\"{tok}\"}}"))
        );
        let registry = b64(&format!("{{\"auth\":\"{}\"}}", b64(&format!("u:{tok}"))));
        for value in [
            format!("Bearer {tok}"),
            format!("Bearer\t{tok}"),
            tok.to_owned(),
            format!("Basic {}", STANDARD_NO_PAD.encode(format!("x:{tok}"))),
            format!("Basic {}", b64(&format!("user:{tok}"))),
            format!("session=abc; token={tok}; x=1"),
            format!("token=%61{}", &tok[1..]),
            format!("Token token=\"{tok}\""),
            format!("key={}", url(tok)),
            format!("Bearer {jwt}"),
            registry,
            format!("v1:{}", b64(&format!("u:{tok}"))),
            format!("/api/login/{}", url(tok)),
            format!("?next=%2Fa%3Ft%3D{}", b64(tok).replace('=', "%253D")),
            hex::encode(tok),
        ] {
            assert!(found(&value, tok), "{value}");
        }
        assert!(!found("Bearer something-else-entirely", tok));
    }

    #[test]
    fn a_hostile_value_costs_at_most_the_budget() {
        let value = "QUFB".repeat(4096); // base64 of base64 of ...: every level decodes
        let total: usize = forms(value.as_bytes()).iter().map(Vec::len).sum();
        assert!(total <= BUDGET, "{total}");
    }
}
