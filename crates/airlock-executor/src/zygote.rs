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
//!    channel), or with [`TASKS`] (a v1 cgroup's `tasks` file) or [`CGROUP2`] (the run's
//!    cgroup2 directory), then [`END`].
//! 2. `clone3(CLONE_PARENT | CLONE_INTO_CGROUP)`: the child is the *broker's* child, as a
//!    spawned stage is, so the broker waits for it and kills it the same way, and its
//!    parent-death signal watches the broker; it is born in the run's cgroup2 directory and
//!    moves itself into the v1 ones before anything else (writing `0` to each `tasks`), so the
//!    run's cgroups hold it from its first instruction, without the kernel's migration lock.
//! 3. The zygote answers the child's pid (4 bytes, native order; a negative errno on failure)
//!    and waits for the next request; it never sees the run again.
//! 4. The child leads a process group of its own (the zygote's is no run's), places the
//!    descriptors, closes every other one (the control socket first of
//!    all) and runs the stage: identity, user + mount namespace and root, every other
//!    namespace, fork; the stage process supervises, and pid 1 mounts /proc, pivots, sets
//!    rlimits, Landlock, drops capabilities and sets no_new_privs, then returns here as
//!    [`Next::Guest`]. The interpreter then runs the bootstrap as a cold guest does: seccomp
//!    from fd 4, attestation, `execute`.
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Mutex, OnceLock};

use airlock_jail::{cgroup, fdpass, process};

use crate::config::{
    EGRESS_CHANNEL_FD, MACHINE_IPC_FD, MACHINE_NET_FD, MACHINE_PID_FD, MACHINE_UTS_FD,
    SANDBOX_CHANNEL_FD, SANDBOX_MNTNS_FD,
};
use crate::stage;

/// The control socket's number in the zygote.
pub const CONTROL_FD: i32 = 3;
/// Tag of the message that ends a request.
pub const END: u8 = b'E';
/// Tag of a v1 cgroup `tasks` file the child enters.
pub const TASKS: u8 = b'T';
/// Tag of the cgroup2 directory the child is born in.
pub const CGROUP2: u8 = b'C';
/// The most `tasks` files one request carries (memory, pids, cpu).
const MAX_TASKS: usize = 3;
/// The version of this request protocol; the library and the broker must agree.
pub const ABI: i64 = 1;

/// A fingerprint of the sources of the stage (this crate and airlock-jail) this build was
/// made from: a library from another build (a stale one beside a rebuilt binary) is refused
/// by the zygote at start, even where [`ABI`] matches.
pub fn build() -> i64 {
    env!("AIRLOCK_STAGE_BUILD").parse().unwrap_or(0)
}
/// The numbers a run's descriptor may be given in the stage.
const TARGETS: [i32; 10] = [
    0,
    1,
    2,
    EGRESS_CHANNEL_FD,
    SANDBOX_CHANNEL_FD,
    SANDBOX_MNTNS_FD,
    MACHINE_NET_FD,
    MACHINE_PID_FD,
    MACHINE_IPC_FD,
    MACHINE_UTS_FD,
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
static HELD: Mutex<Option<Held>> = Mutex::new(None);

/// One request's descriptors.
#[derive(Default)]
struct Held {
    /// Placed at these numbers in the child.
    placed: Vec<(OwnedFd, i32)>,
    /// v1 `tasks` files the child enters.
    tasks: Vec<OwnedFd>,
    /// The cgroup2 directory the child is born in.
    cgroup2: Option<OwnedFd>,
}

fn control() -> Option<&'static UnixStream> {
    CONTROL
        .get_or_init(|| {
            fdpass::take_inherited(CONTROL_FD)
                .ok()
                .map(UnixStream::from)
        })
        .as_ref()
}

fn held() -> std::sync::MutexGuard<'static, Option<Held>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// Block until the broker's next request and hold it (see the module documentation).
pub fn wait() -> Request {
    let Some(control) = control() else {
        return Request::Closed;
    };
    match receive(control) {
        Ok(Some(request)) => {
            *held() = Some(request);
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
    let (Some(control), Some(request)) = (control(), held().take()) else {
        return Forked::Failed;
    };
    match process::fork_as_sibling(request.cgroup2.as_ref().map(AsFd::as_fd)) {
        Ok(process::Fork::Parent { child }) => {
            drop(request);
            answer(control, child);
            Forked::Stage(child)
        }
        Ok(process::Fork::Child) => {
            become_stage(request);
            Forked::Guest
        }
        Err(_) => {
            answer(control, -EINVAL);
            Forked::Failed
        }
    }
}

/// One request; None at end of stream. A malformed request is read to its [`END`] before it
/// is refused, so that the one answer it gets is the last thing said about it: the next
/// request starts in step (a refusal mid-request would leave its rest to be taken for a
/// request of its own, and its answer for the next request's).
fn receive(control: &UnixStream) -> std::io::Result<Option<Held>> {
    let mut request = Held::default();
    let mut any = false;
    let mut wrong: Option<String> = None;
    loop {
        let message = match fdpass::recv_tagged(control.as_fd()) {
            Ok(m) => m,
            // A message the kernel cut short (its descriptors closed): still one message.
            Err(e) if e.kind() == std::io::ErrorKind::Other => {
                wrong.get_or_insert_with(|| e.to_string());
                any = true;
                continue;
            }
            Err(e) => return Err(e),
        };
        match message {
            None if !any => return Ok(None),
            None => return Err(std::io::Error::other("request cut short")),
            Some((END, None)) => {
                return match wrong {
                    None => Ok(Some(request)),
                    Some(why) => Err(std::io::Error::other(why)),
                }
            }
            Some((TASKS, Some(fd))) if request.tasks.len() < MAX_TASKS => request.tasks.push(fd),
            Some((CGROUP2, Some(fd))) if request.cgroup2.is_none() => request.cgroup2 = Some(fd),
            Some((tag, Some(fd))) => {
                let target = i32::from(tag);
                if !TARGETS.contains(&target)
                    || request.placed.len() == MAX_FDS
                    || request.placed.iter().any(|(_, t)| *t == target)
                {
                    wrong.get_or_insert_with(|| format!("bad target {target}"));
                } else {
                    request.placed.push((fd, target));
                }
            }
            Some((tag, None)) => {
                wrong.get_or_insert_with(|| format!("tag {tag} without a descriptor"));
            }
        }
        any = true;
    }
}

fn answer(control: &UnixStream, value: i32) {
    // A broker that stopped listening sees its socket closed; nothing to do about it here.
    let _ = (&*control).write_all(&value.to_ne_bytes());
}

/// The child: a process group of its own (the zygote's is shared by nothing of a run: a
/// `kill(0, ..)` from the run reaches only the run, as from a spawned stage), into the run's v1
/// cgroups (the broker checks that it got there, and moves it itself otherwise), then the run's
/// descriptors at their numbers, nothing else open (the zygote's control socket included),
/// then the stage. Returns only in pid 1.
fn become_stage(request: Held) {
    if process::own_process_group().is_err() {
        process::exit_now(crate::exit_status::EXIT_REFUSED);
    }
    for tasks in request.tasks {
        let _ = cgroup::enter_self(tasks);
    }
    drop(request.cgroup2);
    let targets: Vec<i32> = request.placed.iter().map(|(_, t)| *t).collect();
    if fdpass::place_fds(request.placed).is_err() || process::close_fds_except(&targets).is_err() {
        process::exit_now(crate::exit_status::EXIT_REFUSED);
    }
    stage::zygote_stage();
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::net::UnixStream;

    use airlock_jail::fdpass;

    use super::{receive, END, TASKS};

    fn null() -> OwnedFd {
        std::fs::File::open("/dev/null").unwrap().into()
    }

    fn send(sock: &UnixStream, tag: u8, fd: bool) {
        let fd = fd.then(null);
        fdpass::send_tagged(sock.as_fd(), tag, fd.as_ref().map(AsFd::as_fd)).unwrap();
    }

    #[test]
    fn a_malformed_request_is_read_to_its_end_and_the_next_one_is_served_in_step() {
        let (broker, zygote) = UnixStream::pair().unwrap();
        // Malformed three ways (a target twice, a target no run has, a tag without a
        // descriptor, a fourth tasks file), each followed by more of the same request.
        send(&broker, 0, true);
        send(&broker, 0, true);
        send(&broker, 9, true);
        send(&broker, 1, false);
        for _ in 0..4 {
            send(&broker, TASKS, true);
        }
        send(&broker, 2, true);
        send(&broker, END, false);
        // The next request, well formed.
        for target in [0, 1, 2] {
            send(&broker, target, true);
        }
        send(&broker, END, false);
        drop(broker);
        assert!(
            receive(&zygote).is_err(),
            "the malformed request was served"
        );
        let next = receive(&zygote).unwrap().expect("the next request");
        let mut targets: Vec<i32> = next.placed.iter().map(|(_, t)| *t).collect();
        targets.sort_unstable();
        assert_eq!(targets, [0, 1, 2]);
        assert!(next.tasks.is_empty() && next.cgroup2.is_none());
        assert!(receive(&zygote).unwrap().is_none(), "end of stream");
    }
}
