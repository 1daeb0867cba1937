//! The request-head grammar of RFC 9112, applied strictly, on bytes, before anything is
//! interpreted: every line ends in CRLF (a bare CR or LF anywhere is refused), the request
//! line is `token SP target SP HTTP/1.x` with exactly one space between the parts and a
//! target of visible ASCII only, field names are tokens with no space before the colon, no
//! line is folded, and field values hold no control byte but HTAB. What passes can be
//! re-serialised without any byte an origin server could read as a line or request boundary.

/// The end of a head.
pub const END: &[u8] = b"\r\n\r\n";

/// `tchar` (RFC 9110 §5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `token = 1*tchar`.
pub fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|b| is_tchar(*b))
}

/// A request-target byte: visible ASCII (`%x21-7E`). No control byte, space, tab, DEL or
/// non-ASCII byte: a proxy that forwards the target must never forward a line boundary.
fn is_target_byte(b: u8) -> bool {
    (0x21..=0x7e).contains(&b)
}

/// A field-value byte: `VCHAR / SP / HTAB / obs-text` (no CTL but HTAB, no DEL).
fn is_value_byte(b: u8) -> bool {
    b == b'\t' || b == b' ' || (0x21..=0x7e).contains(&b) || b >= 0x80
}

/// Split a head (ending in CRLF CRLF) into its lines, refusing any CR not followed by LF and
/// any LF not preceded by CR.
pub fn lines(head: &[u8]) -> Result<Vec<&[u8]>, String> {
    for (i, b) in head.iter().enumerate() {
        match b {
            b'\r' if head.get(i + 1) != Some(&b'\n') => {
                return Err("a bare CR in the head (lines end in CRLF only)".into())
            }
            b'\n' if i == 0 || head[i - 1] != b'\r' => {
                return Err("a bare LF in the head (lines end in CRLF only)".into())
            }
            _ => {}
        }
    }
    let Some(body) = head.strip_suffix(END) else {
        return Err("the head does not end in CRLF CRLF".into());
    };
    Ok(split_crlf(body))
}

fn split_crlf(mut s: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while let Some(i) = s.windows(2).position(|w| w == b"\r\n") {
        out.push(&s[..i]);
        s = &s[i + 2..];
    }
    out.push(s);
    out
}

/// The three parts of a request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLine<'a> {
    /// A token.
    pub method: &'a str,
    /// Visible ASCII only.
    pub target: &'a str,
    /// `HTTP/1.1` or `HTTP/1.0`.
    pub version: &'a str,
}

/// `request-line = method SP request-target SP HTTP-version`, exactly.
pub fn request_line(line: &[u8]) -> Result<RequestLine<'_>, String> {
    let parts: Vec<&[u8]> = line.split(|b| *b == b' ').collect();
    let [method, target, version] = parts[..] else {
        return Err("the request line is not METHOD SP TARGET SP VERSION".into());
    };
    if !is_token(method) {
        return Err("the method is not a token".into());
    }
    if target.is_empty() || !target.iter().all(|b| is_target_byte(*b)) {
        return Err("the request target holds a control byte, tab, space or non-ASCII byte".into());
    }
    if version != b"HTTP/1.1" && version != b"HTTP/1.0" {
        return Err("only HTTP/1.0 and HTTP/1.1 are served".into());
    }
    // All three are ASCII by the checks above.
    Ok(RequestLine {
        method: ascii(method),
        target: ascii(target),
        version: ascii(version),
    })
}

/// A slice already checked to be ASCII.
fn ascii(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap_or_default()
}

/// `field-line = field-name ":" OWS field-value OWS`: the name and the trimmed value.
pub fn field_line(line: &[u8]) -> Result<(String, String), String> {
    if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
        return Err("folded header lines (obs-fold) are not accepted".into());
    }
    let Some(colon) = line.iter().position(|b| *b == b':') else {
        return Err("a header line has no ':'".into());
    };
    let (name, value) = (&line[..colon], &line[colon + 1..]);
    if name.last().is_some_and(|b| *b == b' ' || *b == b'\t') {
        return Err("whitespace between a header name and its ':'".into());
    }
    if !is_token(name) {
        return Err("a header name is not a token".into());
    }
    if !value.iter().all(|b| is_value_byte(*b)) {
        return Err("a header value holds a control byte".into());
    }
    let value = std::str::from_utf8(value)
        .map_err(|_| "a header value is not UTF-8".to_string())?
        .trim_matches([' ', '\t']);
    Ok((ascii(name).to_owned(), value.to_owned()))
}
