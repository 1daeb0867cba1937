//! Process plumbing for the executor stage: fork, parent-death signal, signal forwarding,
//! waiting, exiting "like" a child, execve, and fd hygiene.
//!
//! These are meant for a single-threaded process. [`fork`] refuses to run when `/proc` shows
//! more than one thread, because a forked child of a threaded process may deadlock on a lock
//! another thread held.

use std::ffi::{CStr, CString};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};

use crate::sys::{check, check_long, read_bounded};
use crate::{JailError, Result};

/// Which side of a [`fork`] we are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fork {
    /// The new process.
    Child,
    /// The original process, with the child's pid.
    Parent {
        /// The child's pid (in the parent's pid namespace).
        child: i32,
    },
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitStatus {
    /// It called `exit` with this code.
    Exited(i32),
    /// It was killed by this signal.
    Signaled(i32),
}

/// The number of threads of this process, from `/proc/self/stat`, if procfs is readable.
pub fn thread_count() -> Option<u64> {
    let stat = read_bounded(std::path::Path::new("/proc/self/stat"), 4096).ok()?;
    // Fields after the last ')' (the comm may contain spaces and parens); num_threads is
    // field 20 overall, i.e. the 18th after the comm.
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(17)?.parse().ok()
}

/// `fork(2)`. Refuses when this process visibly has more than one thread.
pub fn fork() -> Result<Fork> {
    if let Some(n) = thread_count() {
        if n > 1 {
            return Err(JailError::InvalidInput(format!(
                "fork from a process with {n} threads"
            )));
        }
    }
    // SAFETY: the process is single-threaded (checked above where procfs allows), so the child
    // inherits no lock held by another thread.
    let pid = check(unsafe { libc::fork() }, "fork")?;
    Ok(if pid == 0 {
        Fork::Child
    } else {
        Fork::Parent { child: pid }
    })
}

/// `clone3(CLONE_PARENT [| CLONE_INTO_CGROUP])`: a fork whose child is a *sibling* of the
/// caller — its parent (who waits for it, and whom its parent-death signal watches) is the
/// caller's parent — born in the cgroup2 directory `cgroup` if given (no migration afterwards,
/// so no global migration lock). A zygote uses it so that each run's stage is the broker's own
/// child, exactly as a spawned one is. Refuses when this process visibly has more than one
/// thread.
///
/// The child must not return into code that relies on the C library's per-thread state: the
/// raw syscall bypasses glibc's `fork` wrapper, so the child's thread descriptor still names
/// the caller's thread id (`raise`, `pthread_kill` and error-checking mutexes would act on the
/// wrong thread). The stage code it runs uses none of them ([`exit_like`] signals by pid), and
/// any further `fork` from it (glibc's) gives the grandchild correct state again.
pub fn fork_as_sibling(cgroup: Option<std::os::fd::BorrowedFd<'_>>) -> Result<Fork> {
    use std::os::fd::AsRawFd;
    if let Some(n) = thread_count() {
        if n > 1 {
            return Err(JailError::InvalidInput(format!(
                "fork from a process with {n} threads"
            )));
        }
    }
    // No exit signal of its own: with CLONE_PARENT the kernel gives the child the caller's
    // (SIGCHLD for a process its parent forked), and clone3 refuses one given.
    let mut args = CloneArgs {
        flags: libc::CLONE_PARENT as u64,
        ..CloneArgs::default()
    };
    if let Some(fd) = cgroup {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = u64::try_from(fd.as_raw_fd())
            .map_err(|_| JailError::InvalidInput("negative cgroup fd".into()))?;
    }
    // SAFETY: `args` is a valid clone_args of the size passed; with no stack and no CLONE_VM the
    // child gets a copy-on-write copy of this single-threaded process (checked above), like
    // fork(2); no flag asks the kernel to write through a pointer. The caveat about the child's
    // C-library thread state is documented above and honoured by the callers.
    let pid = check_long(
        unsafe {
            libc::syscall(
                libc::SYS_clone3,
                std::ptr::addr_of_mut!(args),
                std::mem::size_of::<CloneArgs>(),
            )
        },
        "clone3(CLONE_PARENT)",
    )?;
    Ok(if pid == 0 {
        Fork::Child
    } else {
        Fork::Parent {
            child: i32::try_from(pid)
                .map_err(|_| JailError::InvalidInput(format!("pid {pid} out of range")))?,
        }
    })
}

/// `CLONE_INTO_CGROUP` (Linux 5.7).
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` as of Linux 5.7 (`CLONE_ARGS_SIZE_VER2`).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// Ends this process at once with `code`: `_exit(2)`, no atexit handlers, no stdio flush —
/// for a process that shares a copy of someone else's address space (a zygote's child).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no Rust state.
    unsafe { libc::_exit(code) }
}

/// `setpgid(0, 0)`: this process becomes the leader of a process group of its own, as a child
/// spawned with `process_group(0)` is, so that a signal to "my process group" (`kill(0, ..)`)
/// from it or anything it forks reaches only its own tree, not the group it was forked in.
pub fn own_process_group() -> Result<()> {
    // SAFETY: setpgid only takes integers.
    check(unsafe { libc::setpgid(0, 0) }, "setpgid")?;
    Ok(())
}

/// `PR_SET_PDEATHSIG(SIGKILL)`: die when the parent (thread) dies. The caller closes the race
/// with a parent that died before the call (e.g. by checking [`parent_pid`] against the pid it
/// expects, or by a pipe from the parent).
pub fn set_parent_death_signal_kill() -> Result<()> {
    check(
        // SAFETY: prctl with integer arguments only.
        unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            )
        },
        "prctl(PR_SET_PDEATHSIG)",
    )?;
    Ok(())
}

/// `getppid(2)` (0 when the parent is outside our pid namespace).
pub fn parent_pid() -> i32 {
    // SAFETY: getppid cannot fail.
    unsafe { libc::getppid() }
}

/// The pid `forward_termination_signals` sends to; 0 means none.
static FORWARD_TO: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_handler(sig: libc::c_int) {
    // A negative target is a process group (see [`forward_signals_to_group`]).
    let child = FORWARD_TO.load(Ordering::SeqCst);
    if child != 0 {
        // SAFETY: kill is async-signal-safe; we save and restore errno around it.
        unsafe {
            let saved = *libc::__errno_location();
            libc::kill(child, sig);
            *libc::__errno_location() = saved;
        }
    }
}

/// Sends SIGTERM, SIGINT and SIGHUP received by this process on to `child`.
pub fn forward_termination_signals(child: i32) -> Result<()> {
    if child <= 0 {
        return Err(JailError::InvalidInput(format!("bad child pid {child}")));
    }
    FORWARD_TO.store(child, Ordering::SeqCst);
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        install_handler(sig, forward_handler)?;
    }
    Ok(())
}

/// The signal a background process's stage takes as "kill the process's whole group"
/// (SIGKILL itself cannot be caught, and killing the stage would end only the leader).
pub const KILL_GROUP_SIGNAL: i32 = 35; // SIGRTMIN + 1 (glibc reserves 32 and 33; 34 is SIGRTMIN)

/// The signals [`forward_signals_to_group`] passes on.
pub const GROUP_FORWARDED: [i32; 7] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGCONT,
];

extern "C" fn kill_group_handler(_sig: libc::c_int) {
    let target = FORWARD_TO.load(Ordering::SeqCst);
    if target < 0 {
        // SAFETY: kill is async-signal-safe; we save and restore errno around it.
        unsafe {
            let saved = *libc::__errno_location();
            libc::kill(target, libc::SIGKILL);
            *libc::__errno_location() = saved;
        }
    }
}

fn install_handler(sig: libc::c_int, handler: extern "C" fn(libc::c_int)) -> Result<()> {
    // SAFETY: sigaction is plain old data; all-zero is valid before we fill it.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler as *const () as libc::sighandler_t;
    act.sa_flags = libc::SA_RESTART;
    // SAFETY: `act.sa_mask` is ours; sigemptyset only writes it.
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    check(
        // SAFETY: `act` is initialised, the handler only calls async-signal-safe functions.
        unsafe { libc::sigaction(sig, &act, std::ptr::null_mut()) },
        "sigaction",
    )?;
    Ok(())
}

/// Sends each of [`GROUP_FORWARDED`] received by this process on to the process group
/// `leader` leads, and takes [`KILL_GROUP_SIGNAL`] as SIGKILL for that group: how the broker
/// signals a background process through its stage.
pub fn forward_signals_to_group(leader: i32) -> Result<()> {
    if leader <= 0 {
        return Err(JailError::InvalidInput(format!("bad leader pid {leader}")));
    }
    FORWARD_TO.store(-leader, Ordering::SeqCst);
    for sig in GROUP_FORWARDED {
        install_handler(sig, forward_handler)?;
    }
    install_handler(KILL_GROUP_SIGNAL, kill_group_handler)
}

/// Every signal back to its default disposition, none blocked: what a program expects to
/// inherit from `execve` (the broker's runtime ignores `SIGPIPE`, and an ignored disposition
/// survives `execve`, so `yes | head` would see `EPIPE` instead of dying quietly).
pub fn reset_signal_dispositions() -> Result<()> {
    reset_dispositions(1..=libc::SIGRTMAX())?;
    // SAFETY: sigset_t is plain old data; sigemptyset initialises it before use.
    let mut none: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `none` is ours; sigemptyset only writes it.
    unsafe { libc::sigemptyset(&mut none) };
    check(
        // SAFETY: `none` is an initialised, empty set; the old mask is not asked for.
        unsafe { libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) },
        "sigprocmask",
    )?;
    Ok(())
}

/// Makes `cmd`'s child start with every signal at its default disposition and none blocked,
/// as if its parent had none ignored: an ignored disposition survives `execve` (a server
/// started under `nohup` ignores `SIGHUP`), and a long-lived child forked from — the zygote —
/// would hand it to every run, which a cold run's stage resets before its own `execve`.
pub fn default_signals_at_spawn(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let closure = || {
        for sig in 1..=64 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                set_default(sig);
            }
        }
        let none = [0u64; 16];
        // SAFETY: async-signal-safe raw rt_sigprocmask with an empty 8-byte set; the old mask
        // is not asked for.
        if unsafe {
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_SETMASK,
                none.as_ptr(),
                std::ptr::null_mut::<u64>(),
                8usize,
            )
        } < 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    };
    // SAFETY: the closure runs in the forked child before exec and makes only raw,
    // async-signal-safe syscalls; it allocates nothing and takes no locks.
    unsafe {
        cmd.pre_exec(closure);
    }
}

/// The kernel's `struct sigaction` (what `rt_sigaction` takes; glibc's `sigaction` refuses the
/// two real-time signals it reserves, 32 and 33, which the broker's may have ignored).
#[repr(C)]
struct KernelSigaction {
    handler: libc::sighandler_t,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
}

/// The real-time signals (32 up) back to their default disposition: for a zygote's child,
/// whose interpreter owns the classic signals' handlers but never sets a real-time one, so that
/// it starts with the dispositions a cold run's interpreter has.
pub fn reset_realtime_signal_dispositions() -> Result<()> {
    reset_dispositions(32..=libc::SIGRTMAX())
}

fn reset_dispositions(signals: std::ops::RangeInclusive<i32>) -> Result<()> {
    for sig in signals {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            check_long(set_default(sig), "rt_sigaction")?;
        }
    }
    Ok(())
}

/// `rt_sigaction(sig, SIG_DFL)` with an empty mask and no flags; async-signal-safe (a raw
/// syscall on a stack value, nothing allocated). Answers the syscall's return.
fn set_default(sig: i32) -> libc::c_long {
    let default = KernelSigaction {
        handler: libc::SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    // SAFETY: `default` is a valid kernel sigaction (SIG_DFL, no flags, empty mask) for the
    // call; the old action is not asked for; the size is the kernel's sigset (8).
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            &default as *const KernelSigaction,
            std::ptr::null_mut::<KernelSigaction>(),
            8usize,
        )
    }
}

/// `setsid(2)`: a new session and process group led by the caller.
pub fn new_session() -> Result<()> {
    // SAFETY: setsid takes nothing.
    check(unsafe { libc::setsid() }, "setsid")?;
    Ok(())
}

/// Reaps every child that has ended, without blocking: how a pid namespace's init keeps
/// orphans from staying zombies. Returns how many were reaped.
pub fn reap_ended() -> usize {
    let mut n = 0;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a valid out pointer.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r <= 0 {
            return n;
        }
        n += 1;
    }
}

/// `waitpid(child)`, retrying `EINTR`, until it exits or is killed.
pub fn wait_child(child: i32) -> Result<WaitStatus> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a valid out pointer.
        let r = unsafe { libc::waitpid(child, &mut status, 0) };
        if r == -1 {
            if crate::sys::errno() == libc::EINTR {
                continue;
            }
            return Err(JailError::last_os("waitpid"));
        }
        if libc::WIFEXITED(status) {
            return Ok(WaitStatus::Exited(libc::WEXITSTATUS(status)));
        }
        if libc::WIFSIGNALED(status) {
            return Ok(WaitStatus::Signaled(libc::WTERMSIG(status)));
        }
        // Stopped/continued: keep waiting for termination.
    }
}

/// Ends this process the way the child ended: `_exit(code)`, or die by the same signal (its
/// disposition reset to default and unblocked first). Falls back to `_exit(128 + sig)` for a
/// signal whose default action does not terminate.
pub fn exit_like(status: WaitStatus) -> ! {
    match status {
        WaitStatus::Exited(code) => {
            // SAFETY: _exit never returns and touches no Rust state.
            unsafe { libc::_exit(code) }
        }
        WaitStatus::Signaled(sig) => {
            // SAFETY: resetting a disposition, unblocking one signal and raising it are all
            // plain syscalls on process state; sigset_t is plain old data.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, sig);
                libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                // kill(getpid()), not raise(): raise() addresses the thread by the C library's
                // cached thread id, which is stale in a child of [`fork_as_sibling`]. This
                // process is single-threaded, so the signal reaches this very thread.
                libc::kill(libc::getpid(), sig);
                libc::_exit(128 + (sig & 0x7f))
            }
        }
    }
}

/// `execve(2)`; returns only on failure, with the error.
pub fn execve(path: &CStr, argv: &[CString], envp: &[CString]) -> JailError {
    let mut argv_p: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_p.push(std::ptr::null());
    let mut envp_p: Vec<*const libc::c_char> = envp.iter().map(|e| e.as_ptr()).collect();
    envp_p.push(std::ptr::null());
    // SAFETY: `path` is NUL-terminated; both arrays are null-terminated arrays of pointers to
    // NUL-terminated strings that outlive the call.
    unsafe { libc::execve(path.as_ptr(), argv_p.as_ptr(), envp_p.as_ptr()) };
    JailError::last_os("execve")
}

/// Closes every fd except those in `keep` (0, 1 and 2 are closed too unless listed), with
/// `close_range(2)` over the gaps.
pub fn close_fds_except(keep: &[RawFd]) -> Result<()> {
    if let Some(bad) = keep.iter().find(|fd| **fd < 0) {
        return Err(JailError::InvalidInput(format!("negative fd {bad}")));
    }
    let mut keep: Vec<u32> = keep.iter().map(|fd| fd.unsigned_abs()).collect();
    keep.sort_unstable();
    keep.dedup();
    let mut first: u32 = 0;
    for fd in keep {
        if fd > first {
            close_range(first, fd - 1)?;
        }
        first = fd.saturating_add(1);
    }
    close_range(first, u32::MAX)
}

fn close_range(first: u32, last: u32) -> Result<()> {
    check_long(
        // SAFETY: close_range only takes integers; closing fds we do not use is the point.
        unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) },
        "close_range",
    )?;
    Ok(())
}

/// `dup2(2)`.
pub fn dup2(from: RawFd, to: RawFd) -> Result<()> {
    // SAFETY: dup2 only takes integers.
    check(unsafe { libc::dup2(from, to) }, "dup2")?;
    Ok(())
}

/// Sets or clears `FD_CLOEXEC` on `fd`.
pub fn set_cloexec(fd: RawFd, on: bool) -> Result<()> {
    // SAFETY: fcntl(F_GETFD) only takes integers.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFD) }, "fcntl(F_GETFD)")?;
    let new = if on {
        flags | libc::FD_CLOEXEC
    } else {
        flags & !libc::FD_CLOEXEC
    };
    check(
        // SAFETY: fcntl(F_SETFD) only takes integers.
        unsafe { libc::fcntl(fd, libc::F_SETFD, new) },
        "fcntl(F_SETFD)",
    )?;
    Ok(())
}

/// `PR_SET_DUMPABLE`: 0 keeps other same-uid processes from ptrace/`/proc/<pid>/mem` access.
pub fn set_dumpable(on: bool) -> Result<()> {
    let v: libc::c_ulong = if on { 1 } else { 0 };
    check(
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, v, 0, 0, 0) },
        "prctl(PR_SET_DUMPABLE)",
    )?;
    Ok(())
}

/// `kill(2)`.
pub fn kill(pid: i32, signal: i32) -> Result<()> {
    // SAFETY: kill only takes integers.
    check(unsafe { libc::kill(pid, signal) }, "kill")?;
    Ok(())
}
