//! A forkable kernel's door: the seccomp listener of its filter, taken from the guest at
//! start (`pidfd_getfd`), answered on a thread of its own. A clone with the branch flags from
//! the kernel waits here; it goes on only while a fork the broker asked for has branches left
//! to make, each born holding the channel the broker made for it (`ADDFD`). Anything else the
//! filter hands over is refused with `EPERM` and logged.
use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use airlock_jail::seccomp::notify::{Listener, Notification, Waited};

/// Where a branch finds its channel, stdout and stderr, placed before its clone goes on.
pub(crate) const BRANCH_FDS: [i32; 3] = [100, 101, 102];
/// How often the answering thread looks whether the door was closed.
const POLL_MS: i32 = 200;

/// The fds of one branch to be born, in [`BRANCH_FDS`] order.
pub(crate) type BranchFds = [OwnedFd; 3];

/// What the door lets through now.
#[derive(Default)]
struct Allowance {
    /// The kernel's host pid, the only caller a clone is allowed for.
    pid: u32,
    /// One entry per clone still allowed.
    branches: VecDeque<BranchFds>,
    /// Clones refused since the door opened.
    refused: u64,
}

/// The listener and the thread answering it; closing (dropping) it refuses everything after.
pub(crate) struct Door {
    allowance: Arc<Mutex<Allowance>>,
    closed: Arc<AtomicBool>,
}

impl Door {
    /// Answer `listener`'s notifications from now on: every one refused until [`Door::allow`].
    pub(crate) fn open(listener: Listener) -> std::io::Result<Door> {
        let allowance = Arc::new(Mutex::new(Allowance::default()));
        let closed = Arc::new(AtomicBool::new(false));
        let (a, c) = (Arc::clone(&allowance), Arc::clone(&closed));
        std::thread::Builder::new()
            .name("airlock-kernel-door".into())
            .spawn(move || answer(&listener, &a, &c))?;
        Ok(Door { allowance, closed })
    }

    /// Let `pid` clone one branch per entry of `branches`, each born holding its fds.
    #[allow(
        dead_code,
        reason = "the fork that asks for branches is the next step of issue 27"
    )]
    pub(crate) fn allow(&self, pid: u32, branches: Vec<BranchFds>) {
        let mut a = lock(&self.allowance);
        a.pid = pid;
        a.branches = branches.into();
    }

    /// Take back what was allowed and not used; how many clones were refused so far.
    pub(crate) fn shut(&self) -> u64 {
        let mut a = lock(&self.allowance);
        a.branches.clear();
        a.refused
    }
}

impl Drop for Door {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::Relaxed);
        self.shut();
    }
}

fn lock(m: &Mutex<Allowance>) -> std::sync::MutexGuard<'_, Allowance> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The answering thread: until the door is closed or no process holds the filter any more.
fn answer(listener: &Listener, allowance: &Mutex<Allowance>, closed: &AtomicBool) {
    while !closed.load(Ordering::Relaxed) {
        match listener.wait(POLL_MS) {
            Ok(Waited::Quiet) => continue,
            Ok(Waited::Notified) => {}
            Ok(Waited::Gone) | Err(_) => return, // the kernel is gone
        }
        let Ok(n) = listener.recv() else {
            continue; // the caller went away before it was read
        };
        let fds = take_allowed(allowance, &n);
        let answered = match fds {
            Some(fds) => place_and_allow(listener, &n, &fds),
            None => {
                tracing::warn!(
                    pid = n.pid,
                    nr = n.nr,
                    flags = n.args[0],
                    "a kernel asked for a clone the broker did not ask for: refused"
                );
                listener.refuse(n.id)
            }
        };
        if let Err(e) = answered {
            tracing::debug!(error = %e, "a kernel's clone was not answered (it went away)");
        }
    }
}

/// The fds of the next allowed branch, if `n` is the clone they are for.
fn take_allowed(allowance: &Mutex<Allowance>, n: &Notification) -> Option<BranchFds> {
    let mut a = lock(allowance);
    let is_branch = n.is_branch_clone() && n.pid == a.pid;
    let fds = if is_branch {
        a.branches.pop_front()
    } else {
        None
    };
    if fds.is_none() {
        a.refused += 1;
    }
    fds
}

fn place_and_allow(
    listener: &Listener,
    n: &Notification,
    fds: &BranchFds,
) -> airlock_jail::Result<()> {
    for (fd, at) in fds.iter().zip(BRANCH_FDS) {
        listener.add_fd(n.id, fd.as_fd(), at)?;
    }
    listener.allow(n.id)
}
