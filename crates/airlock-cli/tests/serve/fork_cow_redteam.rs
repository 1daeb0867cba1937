//! Red team of the copy-on-write fork (`--fork-copy-on-write`), through the real binary, the
//! server as root and as `airlock-test`. Untrusted code owns the kernel's Python process and
//! runs in each branch from the instant of its clone (here `os.register_at_fork` hooks a cell
//! left, and the bootstrap's own globals rebound), so every attack below is set up by a cell
//! before the fork and carried out by a branch after it; each asserts by external evidence
//! (the parent's files, the frozen kernel's state in the host's `/proc`, the server's
//! processes) that the branch reaches nothing of its parent, its siblings or its frozen kernel.
use serde_json::json;

use super::fork_cow::refused;
use super::snapshots::{cell, kernel_pid, sh, stateful, StateDir, IDENTITIES};
use super::support::*;

/// The setups' common part: a file of the parent's and a variable.
const PARENT: &str = "import os, builtins\nopen('/work/f', 'w').write('parent')\nx = 1\n";

/// A hook that keeps the kernel's `/proc` (its pid namespace's: the frozen kernel, the parent
/// and every sibling) at fd 0, a number the broker allows a branch to hold.
const PROC_AT_FD0: &str = "os.register_at_fork(after_in_child=lambda: \
os.dup2(os.open('/proc', os.O_RDONLY | os.O_DIRECTORY), 0))\n";

/// A hook that makes the kernel's `/proc` the branch's working directory, and the bootstrap's
/// `chdir`s no-ops so it stays there (a working directory on procfs is not the parent's files).
const PROC_AS_CWD: &str = "def hook():\n    os.chdir('/proc')\n    os.chdir = lambda p: None\n\
os.register_at_fork(after_in_child=hook)\n";

/// What a branch does with a handle (`h`) on its kernel's `/proc`: for every process there
/// (the frozen kernel, the parent, every sibling), write a file through its root, send it
/// SIGCONT through its `/proc` directory (a pidfd for `pidfd_send_signal`) and open its
/// status, environment and memory; prints what each attempt did.
const THROUGH_HANDLE: &str = r#"
import os, ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
out = {}
for p in sorted(q for q in os.listdir(h) if q.isdigit()):
    got = []
    try:
        fd = os.open(p + '/root/work/pwned', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=h)
        os.write(fd, b'a branch')
        os.close(fd)
        got.append('wrote')
    except OSError as e:
        got.append('write ' + str(e.errno))
    try:
        d = os.open(p, os.O_RDONLY | os.O_DIRECTORY, dir_fd=h)
        rc = libc.syscall(424, d, 18, None, 0)
        got.append('sigcont ' + (str(ctypes.get_errno()) if rc else 'sent'))
    except OSError as e:
        got.append('open ' + str(e.errno))
    for f in ('status', 'environ', 'mem'):
        try:
            os.close(os.open(p + '/' + f, os.O_RDONLY, dir_fd=h))
            got.append(f)
        except OSError as e:
            got.append(f + ' ' + str(e.errno))
    out[p] = got
print(json.dumps(out))
"#;

/// The single-letter state of host process `pid` (`T` stopped), if it lives.
fn state_of(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// The host pid of `pid`'s parent.
fn ppid(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = stat.rsplit_once(')').unwrap().1;
    after.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A fork whose branches kept a handle on their kernel's `/proc` must be refused; if it went
/// through, branch 1 attacks through the handle and the test fails with what it reached.
async fn keeps_proc(c: &mut WsClient, server: i32, hook: &str, handle: &str, why: &str) {
    let parent = stateful(c).await;
    cell(c, &parent, &format!("{PARENT}{hook}")).await;
    let r = c
        .call("sandbox.fork", json!({ "sandbox_id": parent, "count": 2 }))
        .await;
    if r.get("error").is_some() {
        // Back to the start: the standard refusal, checked in full on a fresh parent.
        return refused(c, server, &format!("{PARENT}{hook}"), why).await;
    }
    let r = result_of(&r).clone();
    let frozen = ppid(kernel_pid(c, server, &parent).await);
    let frozen_before = state_of(frozen);
    let branch = r["sandbox_ids"][0].as_str().unwrap();
    let done = cell(c, branch, &format!("h = {handle}\n{THROUGH_HANDLE}")).await;
    let parent_sees = cell(
        c,
        &parent,
        "print(sorted(os.listdir('/work')), open('/work/f').read())",
    )
    .await;
    panic!(
        "the fork let a branch keep its kernel's /proc ({why}); through it: {done}\
         the parent's /work: {parent_sees}the frozen kernel {frozen}: {frozen_before:?} -> {:?}",
        state_of(frozen)
    );
}

async fn no_handle_on_the_kernels_proc(user: Option<&str>) {
    let state = StateDir::new(user);
    let server = state.serve_cow(user, true);
    let mut c = server.connect().await;
    keeps_proc(&mut c, server.pid(), PROC_AT_FD0, "0", "fd 0").await;
    keeps_proc(
        &mut c,
        server.pid(),
        PROC_AS_CWD,
        "'.'",
        "working directory",
    )
    .await;
}

/// A branch that kept its kernel's `/proc` (at an fd number it may hold, or as its working
/// directory) could write its parent's and siblings' files through their roots and resume the
/// frozen kernel: the broker refuses such a branch (its fds are the four it was given, by
/// identity; its working directory is its root), and the fork leaves nothing behind.
#[tokio::test(flavor = "multi_thread")]
async fn a_branch_keeps_no_handle_on_its_kernels_proc() {
    for user in IDENTITIES {
        no_handle_on_the_kernels_proc(user).await;
    }
}

/// A kernel that names its branches' pids in the wrong order (the bootstrap's `_fork_branches`
/// rebound through `call_tool`'s globals): the broker would pair one branch's process (its
/// checks, cgroup and filesystem) with another's channel.
const REVERSED_PIDS: &str = "g = call_tool.__globals__\n\
forked = g['_fork_branches']\n\
g['_fork_branches'] = lambda n: (lambda p: p if p is None else p[::-1])(forked(n))\n";

async fn pids_in_order(user: Option<&str>) {
    let state = StateDir::new(user);
    let server = state.serve_cow(user, true);
    let mut c = server.connect().await;
    let parent = stateful(&mut c).await;
    cell(&mut c, &parent, &format!("{PARENT}{REVERSED_PIDS}")).await;
    let r = c
        .call("sandbox.fork", json!({ "sandbox_id": parent, "count": 2 }))
        .await;
    if r.get("error").is_some() {
        return refused(
            &mut c,
            server.pid(),
            &format!("{PARENT}{REVERSED_PIDS}"),
            // Usually "fd 3" (the branch holds another's channel); under load another check
            // may see the crossing first: what matters is that it is refused, whole.
            "could not be forked",
        )
        .await;
    }
    // It went through: each sandbox's files (written by a process of its own) must be the ones
    // its kernel sees.
    let mut all = vec![parent.clone()];
    for b in result_of(&r)["sandbox_ids"].as_array().unwrap() {
        all.push(b.as_str().unwrap().to_owned());
    }
    let mut seen = Vec::new();
    for (i, s) in all.iter().enumerate() {
        sh(&mut c, s, &format!("echo {i} > /work/by_{i}")).await;
    }
    for s in &all {
        seen.push(
            cell(
                &mut c,
                s,
                "print(sorted(n for n in os.listdir('/work') if n.startswith('by_')))",
            )
            .await,
        );
    }
    panic!("{user:?}: a kernel that named its branches out of order was forked; each sandbox's kernel sees files {seen:?}");
}

/// A kernel that answers its branches' pids out of order cannot cross one branch's process
/// with another's channel: the broker knows each branch by the socket it was born holding
/// (fd 3, by identity) and refuses the fork.
#[tokio::test(flavor = "multi_thread")]
async fn a_kernel_naming_its_branches_out_of_order_is_refused() {
    for user in IDENTITIES {
        pids_in_order(user).await;
    }
}

/// A kernel that, between its clones (an `after_in_parent` hook), makes itself the owner of
/// every branch's socket and pipes with SIGCONT as their signal (`F_SETOWN`, `F_SETSIG`: a
/// file's state, shared with the branch, shown nowhere in `/proc`), makes itself dumpable and
/// leaves a SIGCONT handler that, in the frozen kernel only, writes into every process's
/// `/work` through its `/proc` (the kernel's user namespace owns each branch's: the owner rule
/// gives it `CAP_SYS_PTRACE` there). A branch that turns on `O_ASYNC` and writes to stderr then
/// resumes the frozen kernel each time the broker reads it.
const OWNER_IS_THE_KERNEL: &str = r#"
import fcntl, signal, ctypes
ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)
KERNEL_NS = os.readlink('/proc/self/ns/pid')
def resumed(*_):
    if os.readlink('/proc/self/ns/pid') != KERNEL_NS:
        return
    for p in os.listdir('/proc'):
        if p.isdigit() and p != str(os.getpid()):
            try:
                open('/proc/%s/root/work/pwned' % p, 'w').write('the frozen kernel')
            except OSError:
                pass
signal.signal(signal.SIGCONT, resumed)
def own():
    for fd in (100, 101, 102):
        fcntl.fcntl(fd, fcntl.F_SETOWN, os.getpid())
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGCONT)
os.register_at_fork(after_in_parent=own)
"#;

/// What a branch does to fire it: `O_ASYNC` on its socket and pipes, then output for the
/// broker to read.
const ARM: &str = "import fcntl, time\nfor fd in (1, 2, 3):\n    \
fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)\n\
for _ in range(64):\n    os.write(2, b'x' * 4096)\n    time.sleep(0.01)\nprint('armed')";

async fn signal_owner(user: Option<&str>) {
    let state = StateDir::new(user);
    let server = state.serve_cow(user, true);
    let mut c = server.connect().await;
    let setup = format!("{PARENT}{OWNER_IS_THE_KERNEL}");
    let parent = stateful(&mut c).await;
    cell(&mut c, &parent, &setup).await;
    let r = c
        .call("sandbox.fork", json!({ "sandbox_id": parent, "count": 2 }))
        .await;
    if r.get("error").is_some() {
        return refused(&mut c, server.pid(), &setup, "signal owner").await;
    }
    let frozen = ppid(kernel_pid(&mut c, server.pid(), &parent).await);
    let frozen_before = state_of(frozen);
    let branch = result_of(&r)["sandbox_ids"][1].as_str().unwrap().to_owned();
    cell(&mut c, &branch, ARM).await;
    std::thread::sleep(std::time::Duration::from_millis(500));
    let seen = cell(&mut c, &parent, "print(sorted(os.listdir('/work')))").await;
    panic!(
        "{user:?}: a branch's channel kept its frozen kernel as its signal owner: the frozen \
         kernel {frozen} {frozen_before:?} -> {:?}; the parent's /work: {seen}",
        state_of(frozen)
    );
}

/// A kernel cannot leave a branch's channel set to signal another process (its frozen self,
/// the parent, a sibling): the broker refuses a branch whose socket or pipes have a signal
/// owner, so nothing a branch does resumes the frozen kernel.
#[tokio::test(flavor = "multi_thread")]
async fn a_branch_channel_cannot_resume_its_frozen_kernel() {
    for user in IDENTITIES {
        signal_owner(user).await;
    }
}
