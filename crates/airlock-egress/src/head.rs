//! Reading and parsing a proxy request head, bounded, and rewriting a plain-HTTP one for the
//! origin server (origin-form target, hop-by-hop headers dropped, `Connection: close`).
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::rules::{split_host_port, Host};

/// Most header lines accepted in one head.
const MAX_HEADERS: usize = 100;
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadError {
    /// The client closed (or failed) before a full head arrived.
    Closed,
    /// The head exceeds the cap.
    TooLarge,
    /// The head is not a proxy request this proxy serves.
    Bad(String),
}

/// Read up to the end of the head (`\r\n\r\n`), at most `max` bytes of head. Returns the head
/// and whatever bytes after it arrived in the same reads.
pub async fn read_head<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
) -> Result<(Vec<u8>, Vec<u8>), HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let from = buf.len().saturating_sub(3);
        let n = r.read(&mut chunk).await.map_err(|_| HeadError::Closed)?;
        if n == 0 {
            return Err(HeadError::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = find(&buf[from..], b"\r\n\r\n") {
            let end = from + i + 4;
            if end > max {
                return Err(HeadError::TooLarge);
            }
            let rest = buf.split_off(end);
            return Ok((buf, rest));
        }
        if buf.len() > max {
            return Err(HeadError::TooLarge);
        }
    }
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
        /// Path and query, starting with `/`.
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
    /// Header lines, in order, as sent.
    pub headers: Vec<(String, String)>,
}

fn bad(why: impl Into<String>) -> HeadError {
    HeadError::Bad(why.into())
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parse a head read by [`read_head`].
pub fn parse(head: &[u8]) -> Result<Request, HeadError> {
    let text = std::str::from_utf8(head).map_err(|_| bad("the head is not UTF-8"))?;
    let text = text.strip_suffix("\r\n\r\n").unwrap_or(text);
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("the request line is not METHOD TARGET VERSION"));
    };
    if !is_token(method) {
        return Err(bad("the method is not a token"));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(bad("only HTTP/1.0 and HTTP/1.1 are served"));
    }
    let mut headers = Vec::new();
    for l in lines {
        if headers.len() == MAX_HEADERS {
            return Err(bad("too many header lines"));
        }
        if l.starts_with([' ', '\t']) {
            return Err(bad("folded header lines are not accepted"));
        }
        let Some((name, value)) = l.split_once(':') else {
            return Err(bad("a header line has no ':'"));
        };
        if !is_token(name) {
            return Err(bad("a header name is not a token"));
        }
        if value.contains(['\r', '\n']) {
            return Err(bad("a header value holds a line break"));
        }
        headers.push((name.to_string(), value.trim().to_string()));
    }
    let has = |n: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
    if has("content-length") && has("transfer-encoding") {
        return Err(bad("both Content-Length and Transfer-Encoding"));
    }
    let (authority, target_kind) = if method == "CONNECT" {
        (target, Target::Connect)
    } else {
        let lower = target
            .get(..8)
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        if lower.starts_with("https://") {
            return Err(bad("https:// URLs go through CONNECT (set HTTPS_PROXY)"));
        }
        let Some(rest) = lower
            .starts_with("http://")
            .then(|| target.get(7..))
            .flatten()
        else {
            return Err(bad("a proxy request needs an absolute http:// URL"));
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (auth, path) = rest.split_at(end);
        let path = match path {
            "" => "/".to_string(),
            p if p.starts_with('/') => p.to_string(),
            p => format!("/{p}"),
        };
        let path = path.split('#').next().unwrap_or("/").to_string();
        (auth, Target::Http { path })
    };
    if authority.contains('@') {
        return Err(bad("credentials in the URL are not forwarded"));
    }
    let (host, port) = split_host_port(authority).map_err(|e| bad(e.to_string()))?;
    let port = match (port, &target_kind) {
        (Some(p), _) => p,
        (None, Target::Http { .. }) => 80,
        (None, Target::Connect) => return Err(bad("CONNECT needs host:port")),
    };
    let host = Host::parse(host).map_err(|e| bad(e.to_string()))?;
    Ok(Request {
        method: method.to_string(),
        host,
        port,
        target: target_kind,
        version: version.to_string(),
        headers,
    })
}

impl Request {
    /// The length of the request body that follows the head: `Content-Length` (0 if absent).
    /// Chunked or otherwise transfer-encoded bodies, and conflicting lengths, are refused: the
    /// proxy forwards exactly one request per connection and must know where it ends.
    pub fn body_length(&self) -> Result<u64, String> {
        let mut length: Option<u64> = None;
        for (k, v) in &self.headers {
            if k.eq_ignore_ascii_case("transfer-encoding") {
                return Err("transfer-encoded request bodies are not forwarded".into());
            }
            if k.eq_ignore_ascii_case("content-length") {
                let v = v.trim();
                if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!("bad Content-Length {v:?}"));
                }
                let n: u64 = v.parse().map_err(|_| format!("bad Content-Length {v:?}"))?;
                if length.is_some_and(|l| l != n) {
                    return Err("conflicting Content-Length headers".into());
                }
                length = Some(n);
            }
        }
        Ok(length.unwrap_or(0))
    }

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
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Request, HeadError> {
        parse(s.as_bytes())
    }

    #[test]
    fn connect_and_absolute_form() {
        let r = p("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n").unwrap();
        assert_eq!(
            (r.host.to_string(), r.port, r.target),
            ("pypi.org".into(), 443, Target::Connect)
        );
        let r =
            p("GET http://Example.com/a?b=1#frag HTTP/1.1\r\nHost: example.com\r\n\r\n").unwrap();
        assert_eq!((r.host.to_string(), r.port), ("example.com".into(), 80));
        assert_eq!(
            r.target,
            Target::Http {
                path: "/a?b=1".into()
            }
        );
        let r = p("GET http://[::1]:8080 HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!((r.host.to_string(), r.port), ("[::1]".into(), 8080));
        assert_eq!(r.target, Target::Http { path: "/".into() });
    }

    #[test]
    fn rejects_what_it_does_not_serve() {
        for s in [
            "GET /relative HTTP/1.1\r\n\r\n",
            "GET https://x.example/ HTTP/1.1\r\n\r\n",
            "CONNECT x.example HTTP/1.1\r\n\r\n",
            "GET http://user:pw@x.example/ HTTP/1.1\r\n\r\n",
            "GET http://x.example/ HTTP/2\r\n\r\n",
            "GET  http://x.example/ HTTP/1.1\r\n\r\n",
            "G(T http://x.example/ HTTP/1.1\r\n\r\n",
            "GET http://x.example/ HTTP/1.1\r\nBad Header: 1\r\n\r\n",
            "GET http://x.example/ HTTP/1.1\r\nA: 1\r\n folded\r\n\r\n",
            "POST http://x.example/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "GET http://x.example:0/ HTTP/1.1\r\n\r\n",
            "GET http://bad_host!/ HTTP/1.1\r\n\r\n",
        ] {
            assert!(matches!(p(s), Err(HeadError::Bad(_))), "{s:?} accepted");
        }
    }

    #[test]
    fn origin_head_drops_hop_by_hop_and_closes() {
        let r = p(
            "GET http://x.example:8080/p HTTP/1.1\r\nProxy-Authorization: secret\r\n\
                   Connection: keep-alive, X-Drop\r\nX-Drop: 1\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        let head = String::from_utf8(r.origin_head()).unwrap();
        assert_eq!(
            head,
            "GET /p HTTP/1.1\r\nAccept: */*\r\nHost: x.example:8080\r\nConnection: close\r\n\r\n"
        );
    }

    #[tokio::test]
    async fn read_head_is_bounded_and_keeps_the_rest() {
        let mut input: &[u8] = b"CONNECT a.example:443 HTTP/1.1\r\n\r\n\x16\x03\x01";
        let (head, rest) = read_head(&mut input, 1024).await.unwrap();
        assert!(head.ends_with(b"\r\n\r\n"));
        assert_eq!(rest, b"\x16\x03\x01");
        let big = format!(
            "GET http://a.example/ HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(5000)
        );
        let mut input = big.as_bytes();
        assert_eq!(read_head(&mut input, 4096).await, Err(HeadError::TooLarge));
        let mut endless: &[u8] = &[b'a'; 10_000];
        assert_eq!(
            read_head(&mut endless, 4096).await,
            Err(HeadError::TooLarge)
        );
        let mut short: &[u8] = b"GET http://a.example/ HTTP/1.1\r\n";
        assert_eq!(read_head(&mut short, 4096).await, Err(HeadError::Closed));
    }
}
