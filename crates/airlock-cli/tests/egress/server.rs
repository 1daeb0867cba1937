//! A counting HTTP stand-in: answers every connection with a fixed body, for a bounded time.
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a stand-in serves at most (its accept loop is bounded by this).
const LIFETIME: Duration = Duration::from_secs(60);

pub struct Server {
    pub addr: SocketAddr,
    pub body: String,
    hits: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Server {
    /// Serve on `ip` (a loopback address), on a free port.
    pub fn start(ip: &str) -> Server {
        let l = TcpListener::bind((ip, 0)).unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let body = format!("stand-in {addr} answered");
        let hits = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s, b) = (hits.clone(), stop.clone(), body.clone());
        std::thread::spawn(move || {
            let until = Instant::now() + LIFETIME;
            while Instant::now() < until && !s.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((mut c, _)) => {
                        h.fetch_add(1, Ordering::SeqCst);
                        let _ = c.set_nonblocking(false);
                        let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                        let mut buf = [0u8; 4096];
                        let mut got = Vec::new();
                        while !got.windows(4).any(|w| w == b"\r\n\r\n") && got.len() < 65536 {
                            match c.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => got.extend_from_slice(&buf[..n]),
                            }
                        }
                        let resp = format!(
                            "HTTP/1.0 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
                            b.len()
                        );
                        let _ = c.write_all(resp.as_bytes());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Server {
            addr,
            body,
            hits,
            stop,
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Connections accepted so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Python that fetches `url` through the proxy and prints the body, or the HTTP error code
/// and body, or the OS error.
pub fn fetch_py(url: &str) -> String {
    format!(
        "import urllib.request, urllib.error\n\
         try:\n    print('OK', urllib.request.urlopen({url:?}, timeout=10).read().decode())\n\
         except urllib.error.HTTPError as e:\n    print('HTTP', e.code, e.read().decode())\n\
         except OSError as e:\n    print('OSERR', e)\n"
    )
}

/// Python that opens a CONNECT tunnel to `target` by hand and, if it is established, sends
/// one GET through it; prints the proxy's status line, then the tunnelled answer or the
/// proxy's body.
pub fn connect_py(target: &str) -> String {
    format!(
        "import socket\n\
         s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n\
         s.sendall(b'CONNECT {target} HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n')\n\
         data = b''\n\
         while b'\\r\\n\\r\\n' not in data:\n    chunk = s.recv(4096)\n    if not chunk: break\n    data += chunk\n\
         head, _, rest = data.partition(b'\\r\\n\\r\\n')\n\
         print('STATUS', head.split(b'\\r\\n')[0].decode())\n\
         if b' 200 ' in head.split(b'\\r\\n')[0]:\n    s.sendall(b'GET /tunnel HTTP/1.0\\r\\n\\r\\n')\n\
         while True:\n    chunk = s.recv(4096)\n    if not chunk: break\n    rest += chunk\n\
         print('BODY', rest.decode(errors='replace'))\n"
    )
}
