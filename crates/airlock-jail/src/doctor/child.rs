//! Running a probe in a forked child, safely even when the caller is multi-threaded.
//!
//! The child runs only async-signal-safe code (raw syscalls on stack or pre-built data; no
//! allocation, no locks), reports the first failing step and its errno through a pipe, and is
//! killed by `SIGALRM` if it hangs.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A failed step: its index in the check's step list, and the errno (0 when the step ran but
/// its result was wrong).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StepFailure {
    pub step: u32,
    pub errno: i32,
}

/// What came back from a child probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Every step worked.
    Ok,
    /// A step failed.
    Failed(StepFailure),
    /// The child died without reporting (signal, or the probe itself broke).
    Died(i32),
}

/// The pipe end a child (or grandchild) reports on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reporter(RawFd);

impl Reporter {
    /// Reports a failure (async-signal-safe: one `write`).
    pub(crate) fn fail(self, step: u32, errno: i32) {
        let mut buf = [0u8; 8];
        buf[..4].copy_from_slice(&step.to_ne_bytes());
        buf[4..].copy_from_slice(&errno.to_ne_bytes());
        // SAFETY: writes 8 bytes from a stack buffer to our pipe.
        unsafe { libc::write(self.0, buf.as_ptr().cast(), buf.len()) };
    }
}

/// The current errno (async-signal-safe).
pub(crate) fn errno() -> i32 {
    // SAFETY: reads this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Forks, runs `probe` in the child (which must return `Err(failure)` on the first failed step
/// and must only use async-signal-safe operations), and collects the outcome.
pub(crate) fn run<F>(probe: F) -> Outcome
where
    F: FnOnce(Reporter) -> Result<(), StepFailure>,
{
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
        return Outcome::Died(-errno());
    }
    // SAFETY: pipe2 just gave us these two fds; we own them.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the child only runs async-signal-safe code (the `probe` contract) and `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid == -1 {
        return Outcome::Died(-errno());
    }
    if pid == 0 {
        let reporter = Reporter(wr.as_raw_fd());
        // SAFETY: alarm only takes an integer; SIGALRM's default action ends a hung probe.
        unsafe { libc::alarm(10) };
        let code = match probe(reporter) {
            Ok(()) => 0,
            Err(f) => {
                reporter.fail(f.step, f.errno);
                1
            }
        };
        // SAFETY: _exit never returns and runs no destructors or atexit handlers.
        unsafe { libc::_exit(code) };
    }
    drop(wr);
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid out pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r != -1 || errno() != libc::EINTR {
            break;
        }
    }
    let mut buf = [0u8; 8];
    // SAFETY: reads at most 8 bytes into a stack buffer.
    let n = unsafe { libc::read(rd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n == 8 {
        let step = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let errno = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
        return Outcome::Failed(StepFailure { step, errno });
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Outcome::Ok
    } else if libc::WIFSIGNALED(status) {
        Outcome::Died(libc::WTERMSIG(status))
    } else {
        Outcome::Died(0)
    }
}

/// `Err(StepFailure)` for `step` with the current errno when `ret == -1`.
pub(crate) fn step(ret: libc::c_long, step: u32) -> Result<libc::c_long, StepFailure> {
    if ret == -1 {
        Err(StepFailure {
            step,
            errno: errno(),
        })
    } else {
        Ok(ret)
    }
}

/// [`step`] for calls that return a `c_int`.
pub(crate) fn step_int(ret: libc::c_int, s: u32) -> Result<libc::c_int, StepFailure> {
    if ret == -1 {
        Err(StepFailure {
            step: s,
            errno: errno(),
        })
    } else {
        Ok(ret)
    }
}

/// Writes `data` to the NUL-terminated `path` (async-signal-safe).
pub(crate) fn write_path(path: &[u8], data: &[u8], s: u32) -> Result<(), StepFailure> {
    debug_assert_eq!(path.last(), Some(&0));
    let fd = step_int(
        // SAFETY: `path` is NUL-terminated (all callers pass literals ending in \0).
        unsafe { libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC) },
        s,
    )?;
    // SAFETY: writes `data` to the fd we just opened.
    let w = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    let e = errno();
    // SAFETY: closes the fd we opened.
    unsafe { libc::close(fd) };
    if w == -1 {
        return Err(StepFailure { step: s, errno: e });
    }
    Ok(())
}

/// Forks a grandchild inside the probe (e.g. pid 1 of a new pid namespace), runs `f` there,
/// and waits; the grandchild reports failures on the same pipe.
pub(crate) fn in_grandchild<F>(r: Reporter, s: u32, f: F) -> Result<(), StepFailure>
where
    F: FnOnce() -> Result<(), StepFailure>,
{
    // SAFETY: we are the single-threaded probe child; the grandchild only runs `f`, which
    // follows the same async-signal-safe contract.
    let pid = step_int(unsafe { libc::fork() }, s)?;
    if pid == 0 {
        let code = match f() {
            Ok(()) => 0,
            Err(fail) => {
                r.fail(fail.step, fail.errno);
                1
            }
        };
        // SAFETY: _exit never returns.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    step_int(
        // SAFETY: `status` is a valid out pointer; pid is our child.
        unsafe { libc::waitpid(pid, &mut status, 0) },
        s,
    )?;
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else if libc::WIFSIGNALED(status) {
        // Killed before it could report: blame the step that started it.
        Err(StepFailure { step: s, errno: 0 })
    } else {
        // The grandchild already reported its own step; this exit avoids a second report.
        // SAFETY: _exit never returns.
        unsafe { libc::_exit(1) }
    }
}
