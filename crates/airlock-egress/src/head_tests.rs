//! The head parser, table-driven: every malformed case is refused with the reason named, what
//! is accepted re-serialises cleanly, and the reader refuses a bare line end as it arrives.
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::*;

fn p(s: &[u8]) -> Result<Request, HeadError> {
    parse(s)
}

/// A valid absolute-form request with `mid` spliced in before the final CRLF CRLF.
fn with_fields(fields: &str) -> Vec<u8> {
    format!("GET http://x.example/a HTTP/1.1\r\n{fields}\r\n\r\n").into_bytes()
}

/// Malformed heads, each with the words its refusal must contain.
fn malformed() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let line = |target: &[u8]| [b"GET ".as_slice(), target, b" HTTP/1.1\r\n\r\n"].concat();
    let many = (0..=MAX_HEADERS)
        .map(|i| format!("X-{i}: 1"))
        .collect::<Vec<_>>();
    vec![
        // The request target (the reported attack: bare LF/CR/TAB were forwarded).
        (
            "bare LF in target",
            line(b"http://x.example/a\nb"),
            "bare LF",
        ),
        (
            "bare CR in target",
            line(b"http://x.example/a\rb"),
            "bare CR",
        ),
        (
            "TAB in target",
            line(b"http://x.example/a\tb"),
            "request target",
        ),
        (
            "NUL in target",
            line(b"http://x.example/a\0b"),
            "request target",
        ),
        (
            "SOH in target",
            line(b"http://x.example/\x01"),
            "request target",
        ),
        (
            "ESC in target",
            line(b"http://x.example/\x1b[0m"),
            "request target",
        ),
        (
            "DEL in target",
            line(b"http://x.example/\x7f"),
            "request target",
        ),
        (
            "non-ASCII in target",
            line("http://x.example/é".as_bytes()),
            "request target",
        ),
        (
            "smuggled second request in target",
            line(b"http://x.example/a\nHost:evil.example\n\nGET\t/b"),
            "bare LF",
        ),
        (
            "CRLF-free LF head",
            b"GET http://x.example/ HTTP/1.1\n\n".to_vec(),
            "CRLF",
        ),
        // The request line's shape.
        (
            "two spaces after method",
            b"GET  http://x.example/ HTTP/1.1\r\n\r\n".to_vec(),
            "METHOD SP",
        ),
        (
            "two spaces before version",
            b"GET http://x.example/  HTTP/1.1\r\n\r\n".to_vec(),
            "METHOD SP",
        ),
        (
            "leading space",
            b" GET http://x.example/ HTTP/1.1\r\n\r\n".to_vec(),
            "METHOD SP",
        ),
        (
            "trailing space",
            b"GET http://x.example/ HTTP/1.1 \r\n\r\n".to_vec(),
            "METHOD SP",
        ),
        (
            "TAB as separator",
            b"GET\thttp://x.example/ HTTP/1.1\r\n\r\n".to_vec(),
            "METHOD SP",
        ),
        (
            "no version",
            b"GET http://x.example/\r\n\r\n".to_vec(),
            "METHOD SP",
        ),
        (
            "empty line first",
            b"\r\nGET http://x.example/ HTTP/1.1\r\n\r\n".to_vec(),
            "METHOD SP",
        ),
        (
            "method not a token",
            b"G(T http://x.example/ HTTP/1.1\r\n\r\n".to_vec(),
            "token",
        ),
        (
            "HTTP/2",
            b"GET http://x.example/ HTTP/2\r\n\r\n".to_vec(),
            "HTTP/1.0 and HTTP/1.1",
        ),
        (
            "HTTP/1.2",
            b"GET http://x.example/ HTTP/1.2\r\n\r\n".to_vec(),
            "HTTP/1.0 and HTTP/1.1",
        ),
        (
            "lower-case version",
            b"GET http://x.example/ http/1.1\r\n\r\n".to_vec(),
            "HTTP/1.0 and",
        ),
        (
            "HTTP/1.10",
            b"GET http://x.example/ HTTP/1.10\r\n\r\n".to_vec(),
            "HTTP/1.0 and",
        ),
        // Line ends.
        (
            "bare LF ending the request line",
            with_fields_raw(b"GET http://x.example/ HTTP/1.1\nA: 1"),
            "bare LF",
        ),
        (
            "bare CR ending the request line",
            with_fields_raw(b"GET http://x.example/ HTTP/1.1\rA: 1"),
            "bare CR",
        ),
        (
            "bare LF ending a header",
            with_fields("A: 1\nB: 2"),
            "bare LF",
        ),
        (
            "bare CR ending a header",
            with_fields("A: 1\rB: 2"),
            "bare CR",
        ),
        (
            "LF CRLF end of head",
            b"GET http://x.example/ HTTP/1.1\r\nA: 1\n\r\n".to_vec(),
            "bare LF",
        ),
        (
            "no end of head",
            b"GET http://x.example/ HTTP/1.1\r\n".to_vec(),
            "CRLF CRLF",
        ),
        // Field lines.
        (
            "obs-fold with SP",
            with_fields("A: 1\r\n folded"),
            "obs-fold",
        ),
        (
            "obs-fold with HTAB",
            with_fields("A: 1\r\n\tfolded"),
            "obs-fold",
        ),
        (
            "space before colon",
            with_fields("Host : x.example"),
            "whitespace between",
        ),
        (
            "tab before colon",
            with_fields("Host\t: x.example"),
            "whitespace between",
        ),
        (
            "space inside name",
            with_fields("Bad Header: 1"),
            "not a token",
        ),
        ("empty name", with_fields(": 1"), "not a token"),
        ("non-token name", with_fields("X(: 1"), "not a token"),
        ("no colon", with_fields("NoColon"), "no ':'"),
        ("NUL in value", with_fields("A: x\0y"), "control byte"),
        ("SOH in value", with_fields("A: \x01"), "control byte"),
        ("ESC in value", with_fields("A: \x1b[2J"), "control byte"),
        ("DEL in value", with_fields("A: x\x7f"), "control byte"),
        ("VT in value", with_fields("A: x\x0by"), "control byte"),
        (
            "not UTF-8 in value",
            [b"GET http://x.example/ HTTP/1.1\r\nA: \xff\r\n\r\n".as_slice()].concat(),
            "UTF-8",
        ),
        (
            "too many headers",
            with_fields(&many.join("\r\n")),
            "too many header lines",
        ),
        // Host.
        (
            "two Host headers",
            with_fields("Host: x.example\r\nHost: evil.example"),
            "more than one Host",
        ),
        (
            "two equal Host headers",
            with_fields("Host: x.example\r\nhost: x.example"),
            "more than one Host",
        ),
        (
            "Host with a space",
            with_fields("Host: x.example evil.example"),
            "Host header",
        ),
        (
            "Host with credentials",
            with_fields("Host: u@x.example"),
            "Host header",
        ),
        (
            "Host with a bad port",
            with_fields("Host: x.example:99999"),
            "Host header",
        ),
        // Framing.
        (
            "CL and TE",
            with_fields("Content-Length: 4\r\nTransfer-Encoding: chunked"),
            "both",
        ),
        (
            "TE and CL",
            with_fields("Transfer-Encoding: chunked\r\nContent-Length: 4"),
            "both",
        ),
        (
            "TE chunked",
            with_fields("Transfer-Encoding: chunked"),
            "Transfer-Encoding",
        ),
        (
            "TE gzip, chunked",
            with_fields("Transfer-Encoding: gzip, chunked"),
            "Transfer-Encoding",
        ),
        (
            "TE on CONNECT",
            b"CONNECT x.example:443 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec(),
            "Transfer-Encoding",
        ),
        (
            "two equal CL",
            with_fields("Content-Length: 4\r\nContent-Length: 4"),
            "more than one Content-Length",
        ),
        (
            "two CL",
            with_fields("Content-Length: 4\r\nContent-Length: 40"),
            "more than one Content-Length",
        ),
        (
            "CL list",
            with_fields("Content-Length: 4, 4"),
            "bad Content-Length",
        ),
        (
            "CL sign",
            with_fields("Content-Length: +4"),
            "bad Content-Length",
        ),
        (
            "CL negative",
            with_fields("Content-Length: -1"),
            "bad Content-Length",
        ),
        (
            "CL hex",
            with_fields("Content-Length: 0x10"),
            "bad Content-Length",
        ),
        (
            "CL empty",
            with_fields("Content-Length:"),
            "bad Content-Length",
        ),
        (
            "CL huge",
            with_fields("Content-Length: 99999999999999999999"),
            "bad Content-Length",
        ),
        // Targets this proxy does not serve.
        (
            "origin form",
            b"GET /relative HTTP/1.1\r\n\r\n".to_vec(),
            "absolute http://",
        ),
        (
            "https URL",
            b"GET https://x.example/ HTTP/1.1\r\n\r\n".to_vec(),
            "CONNECT",
        ),
        (
            "CONNECT without port",
            b"CONNECT x.example HTTP/1.1\r\n\r\n".to_vec(),
            "host:port",
        ),
        (
            "credentials in URL",
            b"GET http://u:p@x.example/ HTTP/1.1\r\n\r\n".to_vec(),
            "credentials",
        ),
        (
            "port 0",
            b"GET http://x.example:0/ HTTP/1.1\r\n\r\n".to_vec(),
            "port",
        ),
        (
            "bad host",
            b"GET http://bad_host!/ HTTP/1.1\r\n\r\n".to_vec(),
            "label",
        ),
        (
            "backslash authority",
            b"GET http://x.example\\@evil.example/ HTTP/1.1\r\n\r\n".to_vec(),
            "credentials",
        ),
    ]
}

fn with_fields_raw(start: &[u8]) -> Vec<u8> {
    [start, b"\r\n\r\n"].concat()
}

#[test]
fn every_malformed_head_is_refused_for_its_reason() {
    for (name, head, why) in malformed() {
        match p(&head) {
            Err(HeadError::Bad(m)) => assert!(m.contains(why), "{name}: refused for {m:?}"),
            other => panic!("{name}: {head:?} gave {other:?}"),
        }
    }
}

#[test]
fn well_formed_heads_are_accepted() {
    let r = p(b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n").unwrap();
    assert_eq!(
        (r.host.to_string(), r.port, r.target),
        ("pypi.org".into(), 443, Target::Connect)
    );
    let r = p(b"GET http://Example.com/a?b=1#frag HTTP/1.1\r\nHost: example.com\r\n\r\n").unwrap();
    assert_eq!((r.host.to_string(), r.port), ("example.com".into(), 80));
    assert_eq!(
        r.target,
        Target::Http {
            path: "/a?b=1".into()
        }
    );
    let r = p(b"GET HTTP://[::1]:8080 HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!((r.host.to_string(), r.port), ("[::1]".into(), 8080));
    assert_eq!(r.target, Target::Http { path: "/".into() });
    // OWS around a value is trimmed; HTAB inside and UTF-8 obs-text are field content.
    let r = p(&with_fields(
        "A: \t x\ty é \t\r\nContent-Length: 12\r\nHost:",
    ))
    .unwrap();
    assert_eq!(r.headers[0], ("A".into(), "x\ty é".into()));
    assert_eq!(r.body_length, 12);
    let exactly = (0..MAX_HEADERS)
        .map(|i| format!("X-{i}: 1"))
        .collect::<Vec<_>>();
    assert_eq!(
        p(&with_fields(&exactly.join("\r\n")))
            .unwrap()
            .headers
            .len(),
        MAX_HEADERS
    );
}

#[test]
fn origin_head_names_only_the_vetted_authority_and_closes() {
    let r = p(
        b"GET http://x.example:8080/p HTTP/1.1\r\nHost: evil.example\r\n\
                Proxy-Authorization: secret\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\n\
                Accept: */*\r\n\r\n",
    )
    .unwrap();
    let head = String::from_utf8(r.origin_head()).unwrap();
    assert_eq!(
        head,
        "GET /p HTTP/1.1\r\nAccept: */*\r\nHost: x.example:8080\r\nConnection: close\r\n\r\n"
    );
    let r = p(b"GET http://[::1]/ HTTP/1.0\r\n\r\n").unwrap();
    assert!(r
        .origin_head()
        .ends_with(b"Host: [::1]\r\nConnection: close\r\n\r\n"));
}

/// Whatever single byte is spliced in anywhere, a head that still parses re-serialises as
/// clean CRLF lines, one request, one Host: the vetted one.
#[test]
fn no_spliced_byte_survives_into_a_second_line_or_host() {
    let base = b"POST http://x.example/a?q HTTP/1.1\r\nHost: x.example\r\nA: b\r\nContent-Length: 1\r\n\r\n";
    for at in 0..base.len() - 4 {
        for byte in 0..=255u8 {
            let head = [&base[..at], &[byte], &base[at..]].concat();
            let Ok(r) = p(&head) else { continue };
            let out = r.origin_head();
            let text = String::from_utf8(out.clone()).unwrap();
            let body = text.strip_suffix("\r\n\r\n").unwrap();
            let lines: Vec<&str> = body.split("\r\n").collect();
            assert!(
                lines.iter().all(|l| !l.contains(['\r', '\n'])),
                "{head:?} -> {text:?}"
            );
            let parts: Vec<&str> = lines[0].split(' ').collect();
            assert_eq!(parts.len(), 3, "{text:?}");
            assert!(
                parts[1].starts_with('/') && parts[2] == "HTTP/1.1",
                "{text:?}"
            );
            let hosts: Vec<&&str> = lines
                .iter()
                .filter(|l| l.to_ascii_lowercase().starts_with("host:"))
                .collect();
            assert_eq!(hosts.len(), 1, "{text:?}");
            assert_eq!(hosts[0].to_ascii_lowercase(), format!("host: {}", r.host));
        }
    }
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

#[tokio::test]
async fn read_head_refuses_a_bare_line_end_without_waiting_for_more() {
    for early in [
        b"GET http://a.example/ HTTP/1.1\nHost: a".as_slice(),
        b"GET http://a.example/\r HTTP/1.1",
        b"GET http://a.example/ HTTP/1.1\r\nA: 1\n",
    ] {
        let (mut near, mut far) = tokio::io::duplex(1024);
        far.write_all(early).await.unwrap();
        // `far` stays open: the head never ends, yet the answer comes now.
        let got = tokio::time::timeout(Duration::from_secs(2), read_head(&mut near, 4096))
            .await
            .unwrap();
        assert!(matches!(got, Err(HeadError::Bad(_))), "{early:?}: {got:?}");
    }
    // A CR at the end of one read and its LF in the next is a CRLF.
    let (mut near, mut far) = tokio::io::duplex(1024);
    far.write_all(b"CONNECT a.example:443 HTTP/1.1\r")
        .await
        .unwrap();
    let reader = tokio::spawn(async move { read_head(&mut near, 4096).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    far.write_all(b"\n\r\n").await.unwrap();
    let (head, _) = reader.await.unwrap().unwrap();
    assert!(parse(&head).is_ok());
}

/// A reader handing out one byte per read: the smallest pieces a client can send.
struct ByteAtATime<'a>(&'a [u8]);

impl tokio::io::AsyncRead for ByteAtATime<'_> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if let Some((&b, rest)) = self.0.split_first() {
            buf.put_slice(&[b]);
            self.0 = rest;
        }
        std::task::Poll::Ready(Ok(()))
    }
}

/// Each byte is checked once as it arrives, so a head sent a byte at a time gets the verdict
/// the same bytes get in one piece: a bare CR or LF wherever it sits (the first byte, the
/// byte after a CR, the last), and a CRLF split between two reads accepted.
#[tokio::test]
async fn a_head_read_a_byte_at_a_time_gets_the_verdict_of_the_whole() {
    let good = b"GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nA: 1\r\n\r\nrest";
    for bad in [
        b"\nGET http://a.example/ HTTP/1.1\r\n\r\n".as_slice(),
        b"GET http://a.example/ HTTP/1.1\r\r\n\r\n",
        b"GET http://a.example/ HTTP/1.1\r\nA: 1\n\r\n",
        b"GET http://a.example/ HTTP/1.1\r\nA: 1\r\n\n",
    ] {
        let whole = read_head(&mut &bad[..], 4096).await;
        let pieces = read_head(&mut ByteAtATime(bad), 4096).await;
        assert!(
            matches!(pieces, Err(HeadError::Bad(_))),
            "{bad:?}: {pieces:?}"
        );
        assert_eq!(pieces, whole, "{bad:?}");
    }
    let (head, rest) = read_head(&mut ByteAtATime(good), 4096).await.unwrap();
    assert_eq!(
        (head.len(), rest.as_slice()),
        (good.len() - 4, b"".as_slice())
    );
    assert!(parse(&head).is_ok());
}
