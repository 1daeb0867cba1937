//! The smallest HTTP/1.1 client OTLP/HTTP needs: one `POST` per export over a fresh plain TCP
//! connection (`http://` only: a collector on loopback or a sidecar; TLS is not spoken), with
//! a deadline on connect and one on the whole exchange after it (every write and read gets
//! only the time left, so a collector that drips its answer a byte at a time cannot hold the
//! export past it), and a bounded read of the answer (the collector is across a trust
//! boundary). It runs on the batch processor's own thread, never on the server's runtime, so
//! blocking I/O here cannot slow a run.
//!
//! Not on hyper's client (issue 39, measured with hyper 1.13.0): this runs on a blocking
//! thread, where hyper's client needs a runtime of its own per export; and hyper writes header
//! names in
//! lower case, or all in title case, and
//! `tests::a_post_reaches_a_loopback_server_and_its_status_and_body_come_back` pins the
//! exporter's `content-type` in lower case beside this client's `Content-Length`: on hyper one
//! of the two fails whichever case it writes (everything else there passed).
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};

/// Most of an answer read: OTLP answers are a few bytes (a partial-success message at most).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Bytes written or read at once, each with the time left before the deadline.
const IO_CHUNK: usize = 16 * 1024;

/// Posts OTLP bodies over plain HTTP.
#[derive(Debug, Clone)]
pub struct HttpPost {
    /// Bound on connecting, and on the whole request and answer after it.
    pub timeout: Duration,
}

/// Why an export did not get an answer.
#[derive(Debug, thiserror::Error)]
enum PostError {
    #[error("only http:// endpoints are supported, not {0:?}")]
    Scheme(String),
    #[error("the endpoint has no host")]
    NoHost,
    #[error("{0} resolves to no address")]
    NoAddress(String),
    #[error("the collector's answer has no status line")]
    NoStatus,
    #[error("the collector did not take the request and answer it in time")]
    Deadline,
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Http(#[from] http::Error),
}

impl HttpPost {
    fn post(&self, request: &Request<Bytes>) -> Result<Response<Bytes>, PostError> {
        let uri = request.uri();
        if uri.scheme_str() != Some("http") {
            return Err(PostError::Scheme(uri.scheme_str().unwrap_or("").into()));
        }
        let authority = uri.authority().ok_or(PostError::NoHost)?;
        let port = authority.port_u16().unwrap_or(80);
        let addr = (authority.host(), port)
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| PostError::NoAddress(authority.to_string()))?;
        let mut stream = TcpStream::connect_timeout(&addr, self.timeout)?;
        let deadline = Instant::now() + self.timeout;
        write_by(&mut stream, &head(request, authority.as_str()), deadline)?;
        write_by(&mut stream, request.body(), deadline)?;
        parse_answer(&read_by(&mut stream, deadline)?)
    }
}

/// The time left before `deadline` (an error once there is none).
fn left(deadline: Instant) -> Result<Duration, PostError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(PostError::Deadline);
    }
    Ok(left)
}

/// Write all of `bytes` by `deadline`.
fn write_by(stream: &mut TcpStream, bytes: &[u8], deadline: Instant) -> Result<(), PostError> {
    for chunk in bytes.chunks(IO_CHUNK) {
        stream.set_write_timeout(Some(left(deadline)?))?;
        stream.write_all(chunk)?;
    }
    Ok(())
}

/// Read the answer until the collector closes, at most [`MAX_ANSWER_BYTES`], by `deadline`.
fn read_by(stream: &mut TcpStream, deadline: Instant) -> Result<Vec<u8>, PostError> {
    let mut answer = Vec::new();
    let mut chunk = vec![0u8; IO_CHUNK];
    while answer.len() < MAX_ANSWER_BYTES {
        stream.set_read_timeout(Some(left(deadline)?))?;
        let room = (MAX_ANSWER_BYTES - answer.len()).min(IO_CHUNK);
        match stream.read(&mut chunk[..room]) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(answer)
}

/// The request line and headers (the exporter's, then ours).
fn head(request: &Request<Bytes>, authority: &str) -> Vec<u8> {
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    let mut head = format!("POST {path} HTTP/1.1\r\nHost: {authority}\r\n").into_bytes();
    for (name, value) in request.headers() {
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    let tail = format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        request.body().len()
    );
    head.extend_from_slice(tail.as_bytes());
    head
}

/// The status and body of an answer (a body cut at the read bound, or chunked, is only ever
/// read for a partial-success note, which then fails to decode: harmless).
fn parse_answer(answer: &[u8]) -> Result<Response<Bytes>, PostError> {
    let line_end = answer
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or(PostError::NoStatus)?;
    let status = std::str::from_utf8(&answer[..line_end])
        .ok()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or(PostError::NoStatus)?;
    let body = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(&[][..], |i| &answer[i + 4..]);
    Ok(Response::builder()
        .status(status)
        .body(Bytes::copy_from_slice(body))?)
}

#[async_trait::async_trait]
impl HttpClient for HttpPost {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        self.post(&request).map_err(|e| Box::new(e) as HttpError)
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    #[test]
    fn a_post_reaches_a_loopback_server_and_its_status_and_body_come_back() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            // The whole request (head, then its 2-byte body, in as many reads as it takes)
            // before the answer: closing on unread bytes would reset the connection.
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            let whole = |got: &[u8]| {
                let head = got.windows(4).position(|w| w == b"\r\n\r\n");
                head.is_some_and(|at| got.len() >= at + 4 + 2)
            };
            while !whole(&got) {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "the request ended early");
                got.extend_from_slice(&buf[..n]);
            }
            s.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\nok")
                .unwrap();
            String::from_utf8_lossy(&got).into_owned()
        });
        let req = Request::post(format!("http://127.0.0.1:{port}/v1/traces"))
            .header("content-type", "application/x-protobuf")
            .body(Bytes::from_static(b"\x01\x02"))
            .unwrap();
        let client = HttpPost {
            timeout: Duration::from_secs(5),
        };
        let resp = client.post(&req).unwrap();
        assert_eq!(resp.status(), 202);
        assert_eq!(resp.body().as_ref(), b"ok");
        let sent = server.join().unwrap();
        assert!(sent.starts_with("POST /v1/traces HTTP/1.1\r\n"), "{sent}");
        assert!(
            sent.contains("content-type: application/x-protobuf\r\n"),
            "{sent}"
        );
        assert!(sent.contains("Content-Length: 2\r\n"), "{sent}");
    }

    /// A hostile collector that answers one byte every 100 ms, forever (each byte well within
    /// any per-read timeout): the post gives up at its deadline, not when the collector stops.
    #[test]
    fn a_collector_dripping_its_answer_cannot_hold_an_export_past_the_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut got = vec![0u8; 4096];
            let _ = s.read(&mut got);
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\n");
            for _ in 0..600 {
                std::thread::sleep(Duration::from_millis(100));
                if s.write_all(b"x").is_err() {
                    return;
                }
            }
        });
        let req = Request::post(format!("http://127.0.0.1:{port}/v1/traces"))
            .body(Bytes::from_static(b"\x01"))
            .unwrap();
        let client = HttpPost {
            timeout: Duration::from_millis(700),
        };
        let t0 = Instant::now();
        let got = client.post(&req);
        let took = t0.elapsed();
        assert!(took < Duration::from_secs(3), "held for {took:?}: {got:?}");
        assert!(got.is_err(), "{got:?}");
    }

    #[test]
    fn https_and_a_closed_port_are_errors_not_panics() {
        let client = HttpPost {
            timeout: Duration::from_secs(2),
        };
        let https = Request::post("https://127.0.0.1:1/v1/traces")
            .body(Bytes::new())
            .unwrap();
        assert!(matches!(client.post(&https), Err(PostError::Scheme(_))));
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let closed = Request::post(format!("http://127.0.0.1:{port}/v1/traces"))
            .body(Bytes::new())
            .unwrap();
        assert!(matches!(client.post(&closed), Err(PostError::Io(_))));
        assert!(parse_answer(b"garbage").is_err());
    }
}
