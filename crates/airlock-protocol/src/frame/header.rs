//! Header-section rules, as pure functions over bytes already buffered.
//!
//! A header section is `Name: value\r\n` lines ended by an empty line. Names are matched
//! case-insensitively; only `Content-Length` is interpreted and every other well-formed header
//! is tolerated. The section is parsed only once its `\r\n\r\n` has arrived within the cap,
//! so nothing here ever sees more than `max_header_bytes` bytes.

use super::error::FrameError;

/// The end of a header section.
pub(crate) const TERMINATOR: &[u8] = b"\r\n\r\n";

/// Longest `Content-Length` value echoed back in an error.
const MAX_ECHOED_VALUE: usize = 64;

/// Index of the first `\r\n\r\n` in `buf` starting the search at `from`.
pub(crate) fn find_terminator(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(TERMINATOR.len())
        .position(|w| w == TERMINATOR)
        .map(|p| p + from)
}

/// RFC 9110 `tchar`: the bytes allowed in a header name.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Bytes allowed in a header value: printable ASCII and horizontal tab.
fn is_value_byte(b: u8) -> bool {
    b == b'\t' || (0x20..=0x7e).contains(&b)
}

/// Parses a strictly decimal `Content-Length`, saturating at `u64::MAX` (which is over any cap).
fn parse_length(value: &str) -> Result<u64, FrameError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FrameError::InvalidContentLength {
            value: value.chars().take(MAX_ECHOED_VALUE).collect(),
        });
    }
    Ok(value.bytes().fold(0u64, |acc, d| {
        acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

/// Splits `block` at `\r\n`; a bare `\r` or `\n` stays inside a line and is rejected there.
fn lines(block: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(block);
    std::iter::from_fn(move || {
        let current = rest?;
        match current.windows(2).position(|w| w == b"\r\n") {
            Some(pos) => {
                rest = Some(&current[pos + 2..]);
                Some(&current[..pos])
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}

/// Parses the header section `block` (without its final `\r\n\r\n`) and returns the declared
/// body length, after checking it against `max_body`.
pub(crate) fn parse_header_block(block: &[u8], max_body: usize) -> Result<usize, FrameError> {
    if block.is_empty() {
        return Err(FrameError::MissingContentLength);
    }
    let mut content_length: Option<u64> = None;
    for (index, line) in lines(block).enumerate() {
        let malformed = || FrameError::MalformedHeader { line: index + 1 };
        let colon = line.iter().position(|&b| b == b':').ok_or_else(malformed)?;
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if name.is_empty()
            || !name.iter().all(|&b| is_token_byte(b))
            || !value.iter().all(|&b| is_value_byte(b))
        {
            return Err(malformed());
        }
        if !name.eq_ignore_ascii_case(b"content-length") {
            continue;
        }
        if content_length.is_some() {
            return Err(FrameError::DuplicateContentLength);
        }
        // Value bytes were checked to be ASCII above, so this conversion cannot fail.
        let value = std::str::from_utf8(value)
            .map_err(|_| malformed())?
            .trim_matches([' ', '\t']);
        content_length = Some(parse_length(value)?);
    }
    let declared = content_length.ok_or(FrameError::MissingContentLength)?;
    match usize::try_from(declared) {
        Ok(len) if len <= max_body => Ok(len),
        _ => Err(FrameError::BodyTooLarge {
            len: declared,
            max: max_body,
        }),
    }
}
