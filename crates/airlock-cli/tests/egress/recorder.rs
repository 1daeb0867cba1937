//! An origin stand-in that records every byte each connection brings, and reads them back as
//! leniently as the most forgiving origin would (a bare LF or CR ends a line, a request line
//! anywhere starts a request), so a request smuggled past the proxy is counted, not missed.
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a recorder serves at most.
const LIFETIME: Duration = Duration::from_secs(60);
/// Most bytes kept per connection.
const MAX_BYTES: usize = 1 << 16;

pub struct Recorder {
    pub addr: SocketAddr,
    conns: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
}

/// One request as a lenient origin reads it: its request line and every Host value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub line: String,
    pub hosts: Vec<String>,
}

impl Recorder {
    /// Record on `ip` (a loopback address), on a free port. Each connection is read to its
    /// end (the proxy half-closes after the one request it forwards), kept, then answered.
    pub fn start(ip: &str) -> Recorder {
        let l = TcpListener::bind((ip, 0)).unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let conns = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (c2, s2) = (conns.clone(), stop.clone());
        std::thread::spawn(move || {
            let until = Instant::now() + LIFETIME;
            while Instant::now() < until && !s2.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((c, _)) => {
                        let c3 = c2.clone();
                        std::thread::spawn(move || record(c, &c3));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Recorder { addr, conns, stop }
    }

    /// What each connection carried, in order of arrival.
    pub fn connections(&self) -> Vec<Vec<u8>> {
        self.conns.lock().unwrap().clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn record(mut c: std::net::TcpStream, into: &Mutex<Vec<Vec<u8>>>) {
    let _ = c.set_nonblocking(false);
    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < MAX_BYTES {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    into.lock().unwrap().push(got);
    let body = "recorded";
    let resp = format!(
        "HTTP/1.0 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = c.write_all(resp.as_bytes());
}

/// The requests in `raw` as a lenient origin would see them.
pub fn requests(raw: &[u8]) -> Vec<Seen> {
    let text = String::from_utf8_lossy(raw)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    let mut out: Vec<Seen> = Vec::new();
    for line in text.split('\n') {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.len() >= 2 && words.last().is_some_and(|w| w.starts_with("HTTP/")) {
            out.push(Seen {
                line: line.to_string(),
                hosts: Vec::new(),
            });
        } else if let Some((name, value)) = line.split_once(':') {
            if name.trim().eq_ignore_ascii_case("host") {
                if let Some(last) = out.last_mut() {
                    last.hosts.push(value.trim().to_string());
                }
            }
        }
    }
    out
}
