//! Reading and parsing a proxy request head, bounded and strict (the grammar is in
//! [`crate::syntax`], where a request ends and whom it names in [`crate::framing`]), and
//! rewriting a plain-HTTP one for the origin server (origin-form target, hop-by-hop headers
//! dropped, the vetted authority as the one `Host`, `Connection: close`).
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::framing;
use crate::rules::{split_host_port, Host};
use crate::syntax::{self, END};

/// Most header lines accepted in one head.
pub const MAX_HEADERS: usize = 100;
/// Headers that belong to one hop and are never forwarded.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

/// Why a head could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeadError {
    /// The client closed (or failed) before a full head arrived.
    #[error("the client closed before a full request head")]
    Closed,
    /// The head exceeds the cap.
    #[error("the request head is over the cap")]
    TooLarge,
    /// The head is not a proxy request this proxy serves.
    #[error("{0}")]
    Bad(String),
}

/// Read up to the end of the head (CRLF CRLF), at most `max` bytes of head. Returns the head
/// and whatever bytes after it arrived in the same reads. A bare CR or LF is refused as soon
/// as it arrives (such a head would otherwise only end at the cap or the deadline).
pub async fn read_head<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
) -> Result<(Vec<u8>, Vec<u8>), HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let from = buf.len().saturating_sub(3);
        // Bytes before the last one read were checked already (the last may be a CR whose
        // LF had not arrived): each byte is scanned once, however small the pieces.
        let checked = buf.len().saturating_sub(1);
        let n = r.read(&mut chunk).await.map_err(|_| HeadError::Closed)?;
        if n == 0 {
            return Err(HeadError::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
        let end = find(&buf[from..], END).map(|i| from + i + END.len());
        if end.unwrap_or(buf.len()) > max {
            return Err(HeadError::TooLarge);
        }
        bare_line_end(&buf[..end.unwrap_or(buf.len())], checked, end.is_some())
            .map_err(HeadError::Bad)?;
        if let Some(end) = end {
            let rest = buf.split_off(end);
            return Ok((buf, rest));
        }
    }
}

/// A bare LF in `head` from byte `start` on, or a CR followed by anything but LF (a CR as the
/// very last byte is undecided until `complete`).
fn bare_line_end(head: &[u8], start: usize, complete: bool) -> Result<(), String> {
    let undecided = !complete && head.last() == Some(&b'\r');
    let scan = if undecided {
        &head[..head.len() - 1]
    } else {
        head
    };
    for (i, b) in scan.iter().enumerate().skip(start) {
        let bare = match b {
            b'\r' => head.get(i + 1) != Some(&b'\n'),
            b'\n' => i == 0 || head[i - 1] != b'\r',
            _ => false,
        };
        if bare {
            return Err("a bare CR or LF in the head (lines end in CRLF only)".into());
        }
    }
    Ok(())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// What the client asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `CONNECT host:port`: a tunnel.
    Connect,
    /// `METHOD http://host[:port]/path`: forwarded with this origin-form path.
    Http {
        /// Path and query, starting with `/`; visible ASCII only.
        path: String,
    },
}

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The method (a token).
    pub method: String,
    /// The host asked for.
    pub host: Host,
    /// The port asked for.
    pub port: u16,
    /// Tunnel or forward.
    pub target: Target,
    /// `HTTP/1.0` or `HTTP/1.1`.
    pub version: String,
    /// Header lines, in order, as sent (names tokens, values trimmed, no control bytes).
    pub headers: Vec<(String, String)>,
    /// The length of the body after the head (the one `Content-Length`, or 0).
    pub body_length: u64,
}

fn bad(why: impl Into<String>) -> HeadError {
    HeadError::Bad(why.into())
}

/// A request head split strictly: its request line, its header fields (at most
/// [`MAX_HEADERS`]), and its body's length (one `Content-Length`, no transfer codings, one
/// `Host`).
#[derive(Debug)]
pub struct Framed<'a> {
    /// The request line.
    pub line: syntax::RequestLine<'a>,
    /// The header fields, in order.
    pub headers: Vec<(String, String)>,
    /// The body's length.
    pub body_length: u64,
}

/// Split a head read by [`read_head`] strictly (the egress proxy's grammar, which
/// `sandbox.expose`'s proxy shares); why not, when it is malformed.
pub fn frame(head: &[u8]) -> Result<Framed<'_>, String> {
    let lines = syntax::lines(head)?;
    let (first, fields) = lines
        .split_first()
        .ok_or_else(|| "an empty head".to_string())?;
    let line = syntax::request_line(first)?;
    if fields.len() > MAX_HEADERS {
        return Err("too many header lines".into());
    }
    let headers = fields
        .iter()
        .map(|l| syntax::field_line(l))
        .collect::<Result<Vec<_>, _>>()?;
    framing::check_host(&headers)?;
    let body_length = framing::body_length(&headers)?;
    Ok(Framed {
        line,
        headers,
        body_length,
    })
}

/// Parse a head read by [`read_head`], strictly: anything malformed is [`HeadError::Bad`],
/// decided here, before any name is resolved or any upstream contacted.
pub fn parse(head: &[u8]) -> Result<Request, HeadError> {
    let Framed {
        line,
        headers,
        body_length,
    } = frame(head).map_err(bad)?;
    let (authority, target) = split_target(line.method, line.target)?;
    let (host, port) = authority_of(authority, &target)?;
    Ok(Request {
        method: line.method.to_string(),
        host,
        port,
        target,
        version: line.version.to_string(),
        headers,
        body_length,
    })
}

/// The authority and the kind of a request target: `host:port` for CONNECT, else an absolute
/// `http://` URL whose path (fragment dropped) is kept for the origin.
fn split_target<'a>(method: &str, target: &'a str) -> Result<(&'a str, Target), HeadError> {
    if method == "CONNECT" {
        return Ok((target, Target::Connect));
    }
    let scheme = target
        .get(..8)
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    if scheme.starts_with("https://") {
        return Err(bad("https:// URLs go through CONNECT (set HTTPS_PROXY)"));
    }
    let Some(rest) = scheme
        .starts_with("http://")
        .then(|| target.get(7..))
        .flatten()
    else {
        return Err(bad("a proxy request needs an absolute http:// URL"));
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (auth, path) = rest.split_at(end);
    let path = path.split('#').next().unwrap_or("");
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('/') => p.to_string(),
        p => format!("/{p}"),
    };
    Ok((auth, Target::Http { path }))
}

fn authority_of(authority: &str, target: &Target) -> Result<(Host, u16), HeadError> {
    if authority.contains('@') {
        return Err(bad("credentials in the URL are not forwarded"));
    }
    let (host, port) = split_host_port(authority).map_err(|e| bad(e.to_string()))?;
    let port = match (port, target) {
        (Some(p), _) => p,
        (None, Target::Http { .. }) => 80,
        (None, Target::Connect) => return Err(bad("CONNECT needs host:port")),
    };
    let host = Host::parse(host).map_err(|e| bad(e.to_string()))?;
    Ok((host, port))
}

impl Request {
    /// The head to send the origin server for a plain-HTTP request.
    pub fn origin_head(&self) -> Vec<u8> {
        let path = match &self.target {
            Target::Http { path } => path.as_str(),
            Target::Connect => "/",
        };
        let listed: Vec<String> = self
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("connection"))
            .flat_map(|(_, v)| v.split(','))
            .map(|t| t.trim().to_ascii_lowercase())
            .collect();
        let mut out = format!("{} {} {}\r\n", self.method, path, self.version);
        for (k, v) in &self.headers {
            let lower = k.to_ascii_lowercase();
            // The client's Host is never forwarded: the origin hears the host that was vetted,
            // not a virtual host the guest picked behind an allowed address.
            if HOP_BY_HOP.contains(&lower.as_str()) || listed.contains(&lower) || lower == "host" {
                continue;
            }
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        let host = match self.port {
            80 => self.host.to_string(),
            p => format!("{}:{p}", self.host),
        };
        out.push_str(&format!("Host: {host}\r\n"));
        out.push_str("Connection: close\r\n\r\n");
        out.into_bytes()
    }
}

#[cfg(test)]
#[path = "head_tests.rs"]
mod tests;
