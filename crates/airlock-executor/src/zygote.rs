//! The zygote's side of a run: a pristine, pre-initialised CPython (`guest/zygote.py`) that
//! never runs untrusted code forks one child per run, and that child isolates itself with the
//! very stage code a spawned `airlock __executor` runs ([`crate::stage::zygote_stage`]).
//!
//! The interpreter reaches this code through `libairlock_zygote.so` (crate `airlock-zygote`,
//! loaded with ctypes) and calls [`wait`] then [`fork`] in a loop:
//!
//! 1. Wait on the control socket (fd [`CONTROL_FD`]) for a request: the run's descriptors,
//!    one message each, tagged with the number each must have in the stage (the run's socket
//!    as stdin, its stdout and stderr pipes, the sandbox or hand-over channel, the egress
//!    channel), then [`END`].
//! 2. `clone(CLONE_PARENT)`: the child is the *broker's* child, as a spawned stage is, so the
//!    broker waits for it, kills it and cgroups it exactly the same way; its parent-death
//!    signal watches the broker.
//! 3. The zygote answers the child's pid (4 bytes, native order; a negative errno on failure)
//!    and waits for the next request; it never sees the run again.
//! 4. The child places the descriptors, closes every other one (the control socket first of
//!    all) and runs the stage: identity, user + mount namespace and root, every other
//!    namespace, fork; the stage process supervises, and pid 1 mounts /proc, pivots, sets
//!    rlimits, Landlock, drops capabilities and sets no_new_privs, then returns here as
//!    [`Next::Guest`]. The interpreter then runs the bootstrap as a cold guest does: seccomp
//!    from fd 4, attestation, `execute`.
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Mutex, OnceLock};

use airlock_jail::{fdpass, process};

use crate::config::{EGRESS_CHANNEL_FD, SANDBOX_CHANNEL_FD, SANDBOX_MNTNS_FD};
use crate::stage;

/// The control socket's number in the zygote.
pub const CONTROL_FD: i32 = 3;
/// Tag of the message that ends a request.
pub const END: u8 = b'E';
/// The version of this request protocol; the library and the broker must agree.
pub const ABI: i64 = 1;
/// The numbers a run's descriptor may be given in the stage.
const TARGETS: [i32; 6] = [
    0,
    1,
    2,
    EGRESS_CHANNEL_FD,
    SANDBOX_CHANNEL_FD,
    SANDBOX_MNTNS_FD,
];
/// The answer to a request that could not be served (EINVAL).
const EINVAL: i32 = 22;
/// The most descriptors one request carries.
const MAX_FDS: usize = TARGETS.len();

/// What [`wait`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// A request is held; call [`fork`].
    Ready,
    /// The broker closed the control socket; exit.
    Closed,
    /// A malformed request was answered with an error; call [`wait`] again.
    Refused,
}

/// What [`fork`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Forked {
    /// In the zygote: the run's stage was forked (its pid), and the broker told.
    Stage(i32),
    /// In the child: this is pid 1 of the run, isolated up to seccomp; run the bootstrap.
    Guest,
    /// In the zygote: no request was held, or the fork failed (the broker was told).
    Failed,
}

static CONTROL: OnceLock<Option<UnixStream>> = OnceLock::new();
static HELD: Mutex<Option<Vec<(OwnedFd, i32)>>> = Mutex::new(None);

fn control() -> Option<&'static UnixStream> {
    CONTROL
        .get_or_init(|| {
            fdpass::take_inherited(CONTROL_FD)
                .ok()
                .map(UnixStream::from)
        })
        .as_ref()
}

fn held() -> std::sync::MutexGuard<'static, Option<Vec<(OwnedFd, i32)>>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// Block until the broker's next request and hold it (see the module documentation).
pub fn wait() -> Request {
    let Some(control) = control() else {
        return Request::Closed;
    };
    match receive(control) {
        Ok(Some(fds)) => {
            *held() = Some(fds);
            Request::Ready
        }
        Ok(None) => Request::Closed,
        Err(_) => {
            answer(control, -EINVAL);
            Request::Refused
        }
    }
}

/// Fork the held request's stage. Must be called from a single-threaded process; the child
/// returns only as pid 1 of its run ([`Forked::Guest`]).
pub fn fork() -> Forked {
    let (Some(control), Some(fds)) = (control(), held().take()) else {
        return Forked::Failed;
    };
    match process::fork_as_sibling() {
        Ok(process::Fork::Parent { child }) => {
            drop(fds);
            answer(control, child);
            Forked::Stage(child)
        }
        Ok(process::Fork::Child) => {
            become_stage(fds);
            Forked::Guest
        }
        Err(_) => {
            answer(control, -EINVAL);
            Forked::Failed
        }
    }
}

/// One request's descriptors with their target numbers; None at end of stream.
fn receive(control: &UnixStream) -> std::io::Result<Option<Vec<(OwnedFd, i32)>>> {
    let mut fds = Vec::new();
    loop {
        match fdpass::recv_tagged(control.as_fd())? {
            None if fds.is_empty() => return Ok(None),
            None => return Err(std::io::Error::other("request cut short")),
            Some((END, None)) => return Ok(Some(fds)),
            Some((tag, Some(fd))) => {
                let target = i32::from(tag);
                if !TARGETS.contains(&target) || fds.len() == MAX_FDS {
                    return Err(std::io::Error::other(format!("bad target {target}")));
                }
                fds.push((fd, target));
            }
            Some((tag, None)) => {
                return Err(std::io::Error::other(format!(
                    "tag {tag} without a descriptor"
                )))
            }
        }
    }
}

fn answer(control: &UnixStream, value: i32) {
    // A broker that stopped listening sees its socket closed; nothing to do about it here.
    let _ = (&*control).write_all(&value.to_ne_bytes());
}

/// The child: the run's descriptors at their numbers, nothing else open (the zygote's control
/// socket included), then the stage. Returns only in pid 1.
fn become_stage(fds: Vec<(OwnedFd, i32)>) {
    let targets: Vec<i32> = fds.iter().map(|(_, t)| *t).collect();
    if fdpass::place_fds(fds).is_err() || process::close_fds_except(&targets).is_err() {
        process::exit_now(crate::EXIT_REFUSED);
    }
    stage::zygote_stage();
}
