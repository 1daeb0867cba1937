//! `seccomp-ipc run|exec`: the filter on the real kernel for memory outside every bound and
//! TCP Fast Open. Sockets are made *before* the filter (it denies new ones): then memfd and
//! SysV IPC are ENOSYS; `sendto`/`sendmsg`/`sendmmsg` with `MSG_FASTOPEN` and the Fast Open
//! socket options are EPERM, and the listener the sends aimed at gets nothing; UDP on loopback
//! still goes through all three send calls without the flag.

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use airlock_jail::caps;
use airlock_jail::seccomp::{self, Profile};

use crate::report::{check, errno};

const PAYLOAD: &[u8] = b"GET / HTTP/1.0\r\n\r\n";

pub(crate) fn run(args: &[String]) -> Result<bool, String> {
    let profile = match args {
        [p] if p == "run" => Profile::Run,
        [p] if p == "exec" => Profile::Exec,
        _ => return Err("seccomp-ipc run|exec".into()),
    };
    let e = |e: std::io::Error| e.to_string();
    let listener = TcpListener::bind("127.0.0.1:0").map_err(e)?;
    listener.set_nonblocking(true).map_err(e)?;
    let target = sockaddr(listener.local_addr().map_err(e)?)?;
    // Without the filter the same call connects: the check below is not vacuous.
    let control = fast_open(tcp()?.as_raw_fd(), libc::SYS_sendto, &target);
    std::thread::sleep(Duration::from_millis(50));
    let reached = listener.accept().is_ok();
    println!("info control: sendto(MSG_FASTOPEN) unfiltered -> {control:?}, connected {reached}");
    let rx = UdpSocket::bind("127.0.0.1:0").map_err(e)?;
    rx.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(e)?;
    let tx = UdpSocket::bind("127.0.0.1:0").map_err(e)?;
    let rx_addr = sockaddr(rx.local_addr().map_err(e)?)?;
    let tcps = [tcp()?, tcp()?, tcp()?, tcp()?];

    caps::set_no_new_privs().map_err(|e| e.to_string())?;
    seccomp::install(profile).map_err(|e| e.to_string())?;

    let mut ok = memory_is_enosys();
    for (fd, nr) in tcps
        .iter()
        .zip([libc::SYS_sendto, libc::SYS_sendmsg, libc::SYS_sendmmsg])
    {
        let r = fast_open(fd.as_raw_fd(), nr, &target);
        ok &= check(
            &format!("syscall {nr} with MSG_FASTOPEN -> {r:?} (want EPERM)"),
            r == Err(libc::EPERM),
        );
    }
    ok &= sockopts_refused(tcps[3].as_raw_fd());
    std::thread::sleep(Duration::from_millis(50));
    ok &= check(
        "the listener the Fast Open sends aimed at got no connection",
        listener.accept().is_err(),
    );
    Ok(ok & udp_still_sends(&tx, &rx, &rx_addr))
}

/// An IPv4 TCP socket (made before the filter).
fn tcp() -> Result<OwnedFd, String> {
    // SAFETY: socket only takes integers.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!("socket: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just returned by socket and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn sockaddr(a: SocketAddr) -> Result<libc::sockaddr_in, String> {
    let SocketAddr::V4(v4) = a else {
        return Err(format!("not IPv4: {a}"));
    };
    // SAFETY: sockaddr_in is plain data; all-zero is a valid value.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::sa_family_t::try_from(libc::AF_INET).map_err(|e| e.to_string())?;
    sa.sin_port = v4.port().to_be();
    sa.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
    Ok(sa)
}

/// The size of `T` as a `socklen_t` (every socket struct here is a few bytes).
fn socklen<T>() -> libc::socklen_t {
    libc::socklen_t::try_from(std::mem::size_of::<T>()).unwrap_or(0)
}

/// Sends [`PAYLOAD`] to `to` through syscall `nr` (sendto, sendmsg or sendmmsg) with `flags`;
/// `Err(errno)` on failure.
fn send_via(fd: RawFd, nr: libc::c_long, to: &libc::sockaddr_in, flags: i32) -> Result<(), i32> {
    let len = socklen::<libc::sockaddr_in>();
    let mut iov = libc::iovec {
        iov_base: PAYLOAD.as_ptr().cast_mut().cast(),
        iov_len: PAYLOAD.len(),
    };
    // SAFETY: msghdr/mmsghdr are plain data; all-zero is valid (no control data).
    let mut msg: libc::mmsghdr = unsafe { std::mem::zeroed() };
    msg.msg_hdr.msg_name = std::ptr::from_ref(to).cast_mut().cast();
    msg.msg_hdr.msg_namelen = len;
    msg.msg_hdr.msg_iov = &mut iov;
    msg.msg_hdr.msg_iovlen = 1;
    let to_ptr = std::ptr::from_ref(to);
    let hdr = &raw const msg.msg_hdr;
    let vec = &raw mut msg;
    // SAFETY: every pointer refers to live locals above, sized as passed; the kernel only reads
    // them (sendmmsg writes `msg_len` into `msg`, which is mutable).
    let r = unsafe {
        match nr {
            libc::SYS_sendto => {
                libc::syscall(nr, fd, PAYLOAD.as_ptr(), PAYLOAD.len(), flags, to_ptr, len)
            }
            libc::SYS_sendmsg => libc::syscall(nr, fd, hdr, flags),
            _ => libc::syscall(nr, fd, vec, 1, flags),
        }
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

fn fast_open(fd: RawFd, nr: libc::c_long, to: &libc::sockaddr_in) -> Result<(), i32> {
    send_via(fd, nr, to, libc::MSG_FASTOPEN)
}

fn memory_is_enosys() -> bool {
    let refused = |name: &str, r: libc::c_long| {
        let e = errno();
        check(
            &format!("{name} -> ret {r} errno {e} (want ENOSYS)"),
            r == -1 && e == libc::ENOSYS,
        )
    };
    // SAFETY: a valid NUL-terminated name and integers; refused before anything is read (the
    // same holds for the three calls below).
    let memfd = unsafe { libc::syscall(libc::SYS_memfd_create, c"x".as_ptr(), 0) };
    let mut ok = refused("memfd_create", memfd);
    // SAFETY: see above.
    let shm = unsafe { libc::syscall(libc::SYS_shmget, 0, 1 << 20, 0o1600) };
    ok &= refused("shmget", shm);
    // SAFETY: see above.
    let msg = unsafe { libc::syscall(libc::SYS_msgget, 0, 0o1600) };
    ok &= refused("msgget", msg);
    // SAFETY: see above.
    let sem = unsafe { libc::syscall(libc::SYS_semget, 0, 1, 0o1600) };
    ok & refused("semget", sem)
}

fn sockopts_refused(fd: RawFd) -> bool {
    let one: libc::c_int = 1;
    let set = |level, opt| {
        // SAFETY: `one` is a live int and its size is passed.
        let r = unsafe {
            libc::setsockopt(
                fd,
                level,
                opt,
                std::ptr::from_ref(&one).cast(),
                socklen::<libc::c_int>(),
            )
        };
        if r == 0 {
            0
        } else {
            errno()
        }
    };
    let mut ok = true;
    for opt in [libc::TCP_FASTOPEN, libc::TCP_FASTOPEN_CONNECT] {
        let e = set(libc::IPPROTO_TCP, opt);
        ok &= check(
            &format!("setsockopt(TCP, {opt}) errno {e} (want EPERM)"),
            e == libc::EPERM,
        );
    }
    let e = set(libc::IPPROTO_TCP, libc::TCP_NODELAY);
    ok & check(
        &format!("setsockopt(TCP_NODELAY) errno {e} (want 0)"),
        e == 0,
    )
}

/// UDP on loopback: sendto (std's `send_to` passes MSG_NOSIGNAL), sendmsg and sendmmsg
/// without the flag all deliver.
fn udp_still_sends(tx: &UdpSocket, rx: &UdpSocket, to: &libc::sockaddr_in) -> bool {
    let addr = rx.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let mut ok = check(
        &format!("UDP send_to {addr}"),
        tx.send_to(PAYLOAD, &addr).is_ok(),
    );
    for nr in [libc::SYS_sendmsg, libc::SYS_sendmmsg] {
        let r = send_via(tx.as_raw_fd(), nr, to, libc::MSG_DONTWAIT);
        ok &= check(&format!("UDP syscall {nr} -> {r:?}"), r.is_ok());
    }
    let mut buf = [0u8; 64];
    let got = (0..3)
        .filter(|_| rx.recv(&mut buf).is_ok_and(|n| n == PAYLOAD.len()))
        .count();
    ok & check(&format!("{got} of 3 UDP datagrams arrived"), got == 3)
}
