//! `seccomp-loopback run|exec`: in a fresh network namespace (only `lo`, brought up) under the
//! profile with [`Network::Loopback`], a TCP server on 127.0.0.1 works end to end (listen,
//! connect, accept, a byte each way, shutdown) while UDP, unix and netlink sockets are `EPERM`.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, UdpSocket};

use airlock_jail::ns::{self, Namespaces};
use airlock_jail::seccomp::{self, Network, Profile};
use airlock_jail::{caps, net, userns};

use crate::report::{check, errno};

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

pub(crate) fn run(args: &[String]) -> Result<bool, String> {
    let profile = match args {
        [p] if p == "run" => Profile::Run,
        [p] if p == "exec" => Profile::Exec,
        _ => return Err("seccomp-loopback run|exec".into()),
    };
    userns::enter_user_namespace(1000, 1000).map_err(s)?;
    ns::unshare(Namespaces {
        net: true,
        ..Namespaces::default()
    })
    .map_err(s)?;
    net::loopback_up().map_err(s)?;
    let names = net::interface_names().map_err(s)?;
    if names != ["lo"] {
        return Err(format!("interfaces {names:?}, want only lo"));
    }
    caps::set_no_new_privs().map_err(s)?;
    seccomp::install_for(profile, Network::Loopback).map_err(s)?;
    if seccomp::current_mode().map_err(s)? != 2 {
        return Ok(check("seccomp mode is 2 (filter)", false));
    }
    let a = match tcp_round_trip() {
        Ok(detail) => check(&format!("tcp on 127.0.0.1: {detail}"), true),
        Err(e) => check(&format!("tcp on 127.0.0.1: {e}"), false),
    };
    let udp = UdpSocket::bind("127.0.0.1:0");
    let b = check(
        &format!("udp socket denied: {:?}", udp.as_ref().map(|_| ())),
        matches!(&udp, Err(e) if e.raw_os_error() == Some(libc::EPERM)),
    );
    let mut c = true;
    for (domain, ty, what) in [
        (
            libc::AF_UNIX,
            libc::SOCK_STREAM,
            "socket(AF_UNIX, SOCK_STREAM)",
        ),
        (
            libc::AF_NETLINK,
            libc::SOCK_RAW,
            "socket(AF_NETLINK, SOCK_RAW)",
        ),
        (libc::AF_INET, libc::SOCK_RAW, "socket(AF_INET, SOCK_RAW)"),
    ] {
        // SAFETY: socket only takes integers; a socket it would make is leaked until exit.
        let r = unsafe { libc::socket(domain, ty, 0) };
        let e = errno();
        c &= check(
            &format!("{what} -> ret {r} errno {e} (want errno {})", libc::EPERM),
            r == -1 && e == libc::EPERM,
        );
    }
    Ok(a && b && c)
}

/// Listen, connect, accept; one byte each way; shut the client's side down.
fn tcp_round_trip() -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let mut client = TcpStream::connect(addr)?;
    let (mut server, peer) = listener.accept()?;
    client.write_all(b"p")?;
    let mut buf = [0u8; 1];
    server.read_exact(&mut buf)?;
    server.write_all(b"q")?;
    client.read_exact(&mut buf)?;
    client.shutdown(Shutdown::Write)?;
    let n = server.read(&mut buf)?;
    if n != 0 || buf != *b"q" || client.local_addr()? != peer {
        return Err(std::io::Error::other(format!(
            "bad exchange: eof read {n}, byte {buf:?}, peer {peer}"
        )));
    }
    Ok(format!("listen {addr}, accepted {peer}"))
}
