//! A sandbox's machine: the reaper that is pid 1 of the sandbox's own pid namespace and holds
//! the network, ipc and uts namespaces every later process of the sandbox joins.
//!
//! The stage of `airlock __executor` opened by an `init` frame joins the sandbox's user and
//! mount namespaces (as a run's stage does), unshares every other one and forks; the parent
//! supervises (and dies with the broker); the child is pid 1: a fresh /proc, the sandbox's root,
//! loopback up, then it hands the broker its namespaces (mount, network, pid, ipc, uts; one
//! `SCM_RIGHTS` message each on [`MACHINE_CHANNEL_FD`], tagged with its index in
//! [`MACHINE_NAMESPACES`]), locks itself
//! down (no file access, not dumpable, no capabilities, no_new_privs) and serves: it reaps
//! every orphan of the sandbox, and dials a port of its loopback for the broker on request
//! (`dial {"port"}` → one message tagged [`DIALED`] with the connected socket, or
//! [`NOT_DIALED`] without one). When the broker's end of the socket closes — disposal, or
//! the broker's death — pid 1 exits, and the kernel kills every process of the namespace.
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Duration;

use airlock_jail::{caps, fd, fdpass, identity, landlock, ns, process};
use airlock_protocol::Message;

use crate::channel::Channel;
use crate::config::{InitConfig, MACHINE_CHANNEL_FD, MACHINE_NAMESPACES};
use crate::enter::{enter_own_root, join_sandbox};
use crate::refusal::{refuse, Layer, Refusal};

/// The method of the broker's request for a connection to a port of the machine's loopback.
pub const DIAL_METHOD: &str = "dial";
/// Tag of the answer carrying the connected socket.
pub const DIALED: u8 = b'D';
/// Tag of the answer when nothing accepted the connection.
pub const NOT_DIALED: u8 = b'N';
/// How long pid 1 sleeps between reaping rounds when no request comes.
const REAP_EVERY_MS: i32 = 500;
/// How long one connect may take (loopback answers at once; this bounds a full backlog). With
/// IPv6 tried only after IPv4 was refused, a dial's answer comes within about this long.
const DIAL_TIMEOUT: Duration = Duration::from_secs(1);

/// Entry point of a stage opened by an `init` frame.
pub(crate) fn init_main(mut chan: Channel, cfg: &InitConfig) -> ! {
    let fds = match fdpass::take_inherited(MACHINE_CHANNEL_FD).layer("machine") {
        Ok(fd) => fd,
        Err(r) => refuse(&mut chan, &r),
    };
    if let Err(r) = isolate(cfg) {
        refuse(&mut chan, &r)
    }
    match process::fork().layer("fork") {
        Ok(process::Fork::Parent { child }) => {
            // Only pid 1 hands descriptors over: the broker sees EOF when it is gone.
            drop(fds);
            crate::supervise::supervise(chan, child, crate::supervise::Forward::Termination)
        }
        Ok(process::Fork::Child) => pid1(chan, &fds, cfg),
        Err(r) => refuse(&mut chan, &r),
    }
}

/// The sandbox's identity, its user and mount namespaces (as a run's stage joins them), then
/// every other namespace of its own.
fn isolate(cfg: &InitConfig) -> Result<(), Refusal> {
    let broker = std::os::unix::process::parent_id();
    join_sandbox(cfg.identity)?;
    if std::os::unix::process::parent_id() != broker {
        return Err(Refusal {
            layer: "pdeathsig",
            message: "broker exited during setup".into(),
        });
    }
    ns::unshare(ns::Namespaces::all()).layer("namespaces")
}

/// pid 1 of the machine: set up, hand the namespaces over, lock down, serve.
fn pid1(mut chan: Channel, fds: &OwnedFd, cfg: &InitConfig) -> ! {
    if let Err(r) = set_up(&chan, fds, cfg) {
        refuse(&mut chan, &r)
    }
    serve(chan, fds)
}

fn set_up(chan: &Channel, fds: &OwnedFd, cfg: &InitConfig) -> Result<(), Refusal> {
    process::set_parent_death_signal_kill().layer("pdeathsig")?;
    enter_own_root(&cfg.hostname)?;
    for (index, (name, _)) in MACHINE_NAMESPACES.iter().enumerate() {
        let fd = identity::own_namespace(name).layer("namespaces")?;
        let tag = u8::try_from(index).unwrap_or(u8::MAX);
        fdpass::send_tagged(fds.as_fd(), tag, Some(fd.as_fd())).layer("namespaces")?;
    }
    std::env::set_current_dir("/").layer("work dir")?;
    process::close_fds_except(&[chan.fd().as_raw_fd(), fds.as_raw_fd()]).layer("fds")?;
    process::set_dumpable(false).layer("dumpable")?;
    landlock::restrict_on_own_loopback(&landlock::FsPolicy::default()).layer("landlock")?;
    caps::drop_all().layer("capabilities")?;
    caps::set_no_new_privs().layer("no_new_privs")
}

/// Reap orphans; answer dials; end with the broker's socket.
fn serve(mut chan: Channel, fds: &OwnedFd) -> ! {
    loop {
        process::reap_ended();
        match fd::wait_readable(chan.fd(), REAP_EVERY_MS) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(_) => process::exit_now(0),
        }
        match chan.next_message() {
            Ok(Message::Notification(n)) if n.method == DIAL_METHOD => {
                let port = n
                    .params
                    .as_ref()
                    .and_then(|p| p.get("port"))
                    .and_then(serde_json::Value::as_u64)
                    .and_then(|p| u16::try_from(p).ok())
                    .filter(|p| *p != 0);
                let answer = port.and_then(dial);
                let sent = match &answer {
                    Some(stream) => fdpass::send_tagged(fds.as_fd(), DIALED, Some(stream.as_fd())),
                    None => fdpass::send_tagged(fds.as_fd(), NOT_DIALED, None),
                };
                if sent.is_err() {
                    process::exit_now(0);
                }
            }
            // The broker closed its end (disposal, or its death), or broke the protocol: the
            // machine ends, and with pid 1 every process in it.
            _ => process::exit_now(0),
        }
    }
}

/// A connection to `port` of this namespace's loopback: IPv4, and IPv6 only when IPv4 refused
/// at once (nothing listens there), so a port that accepts nothing costs one timeout.
fn dial(port: u16) -> Option<TcpStream> {
    let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    match TcpStream::connect_timeout(&v4, DIAL_TIMEOUT) {
        Ok(s) => Some(s),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, port));
            TcpStream::connect_timeout(&v6, DIAL_TIMEOUT).ok()
        }
        Err(_) => None,
    }
}
