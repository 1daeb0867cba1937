//! The sandbox has no network: a listener on the host's loopback sees nothing.
use std::net::TcpListener;
use std::time::Duration;

use super::support::*;

fn listener() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

fn assert_no_connection(l: &TcpListener) {
    std::thread::sleep(Duration::from_millis(50));
    match l.accept() {
        Ok((_, peer)) => panic!("the host listener got a connection from {peer}"),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock),
    }
}

#[test]
fn sandbox_blocks_connect_to_host_loopback() {
    for who in identities() {
        let (l, port) = listener();
        let code = format!(
            "import socket\ntry:\n    s=socket.create_connection(('127.0.0.1',{port}),timeout=2)\n    print('CONNECTED')\nexcept OSError as e:\n    print('blocked', type(e).__name__)"
        );
        let v = run_py(who, &code, &[]);
        assert_completed(&v);
        assert!(v["stdout"].as_str().unwrap().starts_with("blocked"), "{v}");
        assert_no_connection(&l);
    }
}

#[test]
fn sandbox_blocks_connect_from_commands() {
    // Commands: seccomp denies new sockets; the empty network namespace and Landlock back it.
    for who in identities() {
        let (l, port) = listener();
        let py = format!(
            "import socket\ntry:\n    socket.create_connection(('127.0.0.1',{port}),timeout=2); print('CONNECTED')\nexcept OSError as e:\n    print('blocked', e.errno)"
        );
        let v = exec(who, &["/usr/bin/python3", "-c", &py], &[]);
        assert_completed(&v);
        assert!(v["stdout"].as_str().unwrap().starts_with("blocked"), "{v}");
        assert_no_connection(&l);
    }
}

#[test]
fn sandbox_cannot_reach_the_outside_by_udp_or_dns() {
    let code = "import socket\nfor fam in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_PACKET):\n    try:\n        socket.socket(fam, socket.SOCK_DGRAM if fam != socket.AF_PACKET else socket.SOCK_RAW)\n        print('opened', fam)\n    except OSError as e:\n        print('denied', e.errno)";
    for who in identities() {
        let v = run_py(who, code, &[]);
        assert_completed(&v);
        assert_eq!(
            v["stdout"], "denied 1\ndenied 1\ndenied 1\ndenied 1\n",
            "{v}"
        );
    }
}

#[test]
fn asyncio_runs_on_its_unix_pair_and_subprocesses_stay_denied() {
    let code = r#"
import asyncio
async def worker(q, n):
    await asyncio.sleep(0.01)
    await q.put(n * n)
async def main():
    q = asyncio.Queue()
    await asyncio.gather(*(worker(q, n) for n in range(5)))
    got = sorted([q.get_nowait() for _ in range(5)])
    try:
        p = await asyncio.create_subprocess_exec('/bin/true')
        print('SPAWNED', await p.wait())
    except OSError as e:
        print('subprocess denied', e.errno)
    return got
print(asyncio.run(main()))
"#;
    for who in identities() {
        let v = run_py(who, code, &[]);
        assert_completed(&v);
        assert_eq!(
            v["stdout"], "subprocess denied 1\n[0, 1, 4, 9, 16]\n",
            "{v}"
        );
    }
}

#[test]
fn the_unix_pair_asyncio_needs_opens_no_other_socket() {
    // With socketpair(AF_UNIX, SOCK_STREAM) allowed, every other way to a socket stays shut:
    // new sockets of any family, a pair of another type, bind/connect on paths and abstract
    // names (tried on the pair's own sockets, the only ones the program can hold), listen.
    let (l, port) = listener();
    let code = format!(
        r#"
import socket, os
def tryit(name, f):
    try:
        f(); print(name, 'ALLOWED')
    except OSError as e:
        print(name, 'denied', e.errno)
for fam, ty in ((socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET6, socket.SOCK_STREAM),
                (socket.AF_NETLINK, socket.SOCK_RAW), (socket.AF_UNIX, socket.SOCK_STREAM)):
    tryit('socket', lambda: socket.socket(fam, ty))
tryit('pair-dgram', lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM))
a, b = socket.socketpair()
a.sendall(b'ping'); print('pair', b.recv(4))
tryit('bind-path', lambda: a.bind('/tmp/s'))
tryit('bind-abstract', lambda: a.bind('\0airlock'))
tryit('connect-path', lambda: a.connect('/tmp/s'))
tryit('connect-abstract', lambda: b.connect('\0airlock'))
tryit('connect-inet', lambda: socket.create_connection(('127.0.0.1', {port}), timeout=2))
tryit('listen', lambda: a.listen(1))
print('sock file', os.path.exists('/tmp/s'))
"#
    );
    for who in identities() {
        let v = run_py(who, &code, &[]);
        assert_completed(&v);
        assert_eq!(
            v["stdout"],
            "socket denied 1\nsocket denied 1\nsocket denied 1\nsocket denied 1\n\
             pair-dgram denied 1\npair b'ping'\nbind-path denied 1\nbind-abstract denied 1\n\
             connect-path denied 1\nconnect-abstract denied 1\nconnect-inet denied 1\n\
             listen denied 1\nsock file False\n",
            "{v}"
        );
        assert_no_connection(&l);
    }
}

#[test]
fn socket_buffers_cannot_be_enlarged_to_hold_memory_outside_the_limits() {
    // Bytes queued in socket buffers are kernel memory in no RSS (and, for a non-root broker,
    // in no cgroup). Enlarging the buffers is refused, so what every pair the fd limit allows
    // can hold stays near the kernel's default buffer size per socket (the red team queued
    // 2 GB under --memory 64 with 8 MiB buffers). Under a root broker the memory cgroup counts
    // those bytes too: the ~56 MiB the fd limit allows, with the interpreter's own, sit at the
    // edge of 64 MiB, so the limit here is 128 MiB and the run completes to report its count;
    // 8 MiB buffers would still be 2 GB, a memory limit (not `completed`) or far over 128 MiB.
    let code = r#"
import socket, errno
a, b = socket.socketpair()
for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF, 32, 33):
    try:
        a.setsockopt(socket.SOL_SOCKET, opt, 8 << 20)
        print('ENLARGED', opt)
    except OSError as e:
        print('refused', e.errno)
pairs, queued = [(a, b)], 0
while True:
    try:
        pairs.append(socket.socketpair())
    except OSError:
        break
chunk = b'x' * 65536
for x, y in pairs:
    for s in (x, y):
        s.setblocking(False)
        while True:
            try:
                queued += s.send(chunk)
            except BlockingIOError:
                break
print('pairs', len(pairs) > 50, 'queued MiB', queued >> 20)
"#;
    for who in identities() {
        let v = run_py(who, code, &["--memory", "128"]);
        assert_completed(&v);
        let out = v["stdout"].as_str().unwrap();
        assert!(
            out.starts_with("refused 1\nrefused 1\nrefused 1\nrefused 1\npairs True queued MiB "),
            "{out}"
        );
        let mib: u64 = out.trim().rsplit(' ').next().unwrap().parse().unwrap();
        assert!(mib <= 128, "{who:?}: {mib} MiB queued in socket buffers");
    }
}
