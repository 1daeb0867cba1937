//! Request smuggling through the proxy, attacked from inside the sandbox with raw sockets:
//! malformed heads (bare LF/CR/TAB in the target, obs-fold, duplicate Host, CL+TE, ...) get a
//! 400 and reach no one; a forged `Host`, a pipelined or body-hidden second request each put
//! exactly one request, with the vetted Host, at the origin. The origin is a recorder that
//! reads its bytes as leniently as the most forgiving server would.
use std::time::Duration;

use super::recorder::{requests, Recorder};
use crate::support::*;

/// Python that sends each `(name, head, later)` on its own connection to the proxy (`later`
/// after a pause, on the same connection) and prints the name and the first answer line.
fn raw_py(cases: &[Case]) -> String {
    let list: Vec<String> = cases
        .iter()
        .map(|(n, h, l)| format!("({n:?}, {:?}, {:?})", hex(h), hex(l)))
        .collect();
    format!(
        "import socket, time\n\
         def one(name, head, later):\n\
         \x20   s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n\
         \x20   got = b''\n\
         \x20   try:\n\
         \x20       s.sendall(head)\n\
         \x20       if later:\n            time.sleep(0.3); s.sendall(later)\n\
         \x20       while True:\n\
         \x20           c = s.recv(4096)\n\
         \x20           if not c: break\n\
         \x20           got += c\n\
         \x20   except OSError as e:\n        got += b' <' + str(e).encode() + b'>'\n\
         \x20   print(name, '|', got.split(b'\\r\\n')[0].decode(errors='replace'))\n\
         for n, h, l in [{}]:\n    one(n, bytes.fromhex(h), bytes.fromhex(l))\n",
        list.join(", ")
    )
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn allow_flags(r: &Recorder) -> Vec<String> {
    vec![
        "--allow-host".into(),
        r.addr.to_string(),
        "--allow-private".into(),
        "127.0.0.2/32".into(),
    ]
}

/// Each malformed head, aimed at the allowed origin (`{a}` is its `127.0.0.2:PORT`).
const MALFORMED: [(&str, &str); 14] = [
    (
        "lf-in-target",
        "GET http://{a}/a\nb HTTP/1.1\r\nHost: {a}\r\n\r\n",
    ),
    (
        "cr-in-target",
        "GET http://{a}/a\rb HTTP/1.1\r\nHost: {a}\r\n\r\n",
    ),
    (
        "tab-in-target",
        "GET http://{a}/a\tb HTTP/1.1\r\nHost: {a}\r\n\r\n",
    ),
    (
        "ctl-in-target",
        "GET http://{a}/a\x01b HTTP/1.1\r\nHost: {a}\r\n\r\n",
    ),
    (
        "smuggle-in-target",
        "GET http://{a}/a\nHost:evil.example\n\nGET\t/b HTTP/1.1\r\nHost: {a}\r\n\r\n",
    ),
    ("lf-line-ends", "GET http://{a}/ HTTP/1.1\nHost: {a}\n\n"),
    (
        "two-spaces",
        "GET  http://{a}/ HTTP/1.1\r\nHost: {a}\r\n\r\n",
    ),
    (
        "obs-fold",
        "GET http://{a}/ HTTP/1.1\r\nX: 1\r\n Host: evil.example\r\nHost: {a}\r\n\r\n",
    ),
    (
        "space-before-colon",
        "GET http://{a}/ HTTP/1.1\r\nHost : evil.example\r\n\r\n",
    ),
    (
        "nul-in-value",
        "GET http://{a}/ HTTP/1.1\r\nX: a\0b\r\n\r\n",
    ),
    (
        "duplicate-host",
        "GET http://{a}/ HTTP/1.1\r\nHost: {a}\r\nHost: evil.example\r\n\r\n",
    ),
    (
        "cl-and-te",
        "POST http://{a}/ HTTP/1.1\r\nContent-Length: 5\r\n\
         Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ),
    (
        "te-chunked-smuggle",
        "POST http://{a}/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n\
         GET /smuggled HTTP/1.1\r\nHost: evil.example\r\n\r\n",
    ),
    (
        "two-content-lengths",
        "POST http://{a}/ HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 44\r\n\r\n",
    ),
];

/// Requests the proxy forwards, each trying to reach the origin twice or under another name;
/// the third part is sent 0.3 s later on the same connection.
const FORGED: [(&str, &str, &str); 4] = [
    (
        "forged-host",
        "GET http://{a}/forged HTTP/1.1\r\nHost: evil.example\r\n\r\n",
        "",
    ),
    (
        "pipelined",
        "GET http://{a}/first HTTP/1.1\r\nHost: {a}\r\n\r\n\
         GET http://{a}/second HTTP/1.1\r\nHost: evil.example\r\n\r\n",
        "",
    ),
    (
        "after-body",
        "POST http://{a}/post HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 4\r\n\r\n\
         bodyGET /second HTTP/1.1\r\nHost: evil.example\r\n\r\n",
        "",
    ),
    (
        "pipelined-late",
        "GET http://{a}/late HTTP/1.1\r\nHost: {a}\r\n\r\n",
        "GET http://{a}/second HTTP/1.1\r\nHost: evil.example\r\n\r\n",
    ),
];

type Case = (&'static str, Vec<u8>, Vec<u8>);

fn cases(table: &[(&'static str, &str, &str)], a: &str) -> Vec<Case> {
    let at = |t: &str| t.replace("{a}", a).into_bytes();
    table.iter().map(|(n, h, l)| (*n, at(h), at(l))).collect()
}

#[test]
fn malformed_heads_get_a_400_and_the_origin_records_nothing() {
    for who in identities() {
        let origin = Recorder::start("127.0.0.2");
        let a = origin.addr.to_string();
        let table: Vec<_> = MALFORMED.iter().map(|(n, h)| (*n, *h, "")).collect();
        let cases = cases(&table, &a);
        let flags = allow_flags(&origin);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let v = run_py(who, &raw_py(&cases), &flags);
        assert_completed(&v);
        let out = v["stdout"].as_str().unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), cases.len(), "{v:#}");
        for ((name, _, _), line) in cases.iter().zip(&lines) {
            assert_eq!(*line, format!("{name} | HTTP/1.1 400 Bad Request"), "{v:#}");
        }
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            origin.connections(),
            Vec::<Vec<u8>>::new(),
            "a malformed head reached the origin ({who:?})"
        );
        let egress = v["egress"].as_array().unwrap();
        assert_eq!(egress.len(), cases.len(), "{v:#}");
        assert!(
            egress
                .iter()
                .all(|d| d["reason"] == "bad_request" && d["decision"] == "deny"),
            "{v:#}"
        );
    }
}

#[test]
fn forged_host_and_second_requests_put_one_request_with_the_vetted_host_at_the_origin() {
    for who in identities() {
        let origin = Recorder::start("127.0.0.2");
        let a = origin.addr.to_string();
        let cases = cases(&FORGED, &a);
        let flags = allow_flags(&origin);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let v = run_py(who, &raw_py(&cases), &flags);
        assert_completed(&v);
        let out = v["stdout"].as_str().unwrap();
        for (name, _, _) in &cases {
            assert!(
                out.contains(&format!("{name} | HTTP/1.0 200 OK")),
                "{name} was not answered by the origin: {v:#}"
            );
        }
        std::thread::sleep(Duration::from_millis(100));
        let conns = origin.connections();
        assert_eq!(
            conns.len(),
            cases.len(),
            "one connection per case ({who:?})"
        );
        let mut paths: Vec<String> = Vec::new();
        for raw in &conns {
            let text = String::from_utf8_lossy(raw);
            let seen = requests(raw);
            assert_eq!(
                seen.len(),
                1,
                "not exactly one request at the origin: {text:?}"
            );
            assert_eq!(seen[0].hosts, [a.as_str()], "not the vetted Host: {text:?}");
            assert!(
                !text.contains("evil.example") && !text.contains("/second"),
                "{text:?}"
            );
            paths.push(seen[0].line.split(' ').nth(1).unwrap_or("").to_string());
        }
        paths.sort();
        assert_eq!(paths, ["/first", "/forged", "/late", "/post"], "{conns:?}");
        let egress = v["egress"].as_array().unwrap();
        assert_eq!(
            egress.len(),
            cases.len(),
            "one decision per connection: {v:#}"
        );
        assert!(egress.iter().all(|d| d["decision"] == "allow"), "{v:#}");
    }
}
