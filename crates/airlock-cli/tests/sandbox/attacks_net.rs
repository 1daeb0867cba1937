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
