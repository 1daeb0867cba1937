//! `seccomp-branch`: a forkable kernel's door on the real kernel. With the forkable Run
//! profile installed and its listener held by a thread of this process (the broker's part): a
//! clone with exactly the branch flags waits for the listener; denied, it fails `EPERM` and no
//! child exists; allowed, the child is pid 1 of a new pid namespace, in new user, mount, net,
//! ipc, uts and cgroup namespaces. A clone with one namespace flag fewer never reaches the
//! listener (`EPERM` from the filter), and neither does a plain fork; `kill` of a process
//! group is `EPERM` (a branch shares its kernel's group); a second listener on
//! the same filter stack is refused (`EBUSY`), so the sandbox cannot take the door itself.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use airlock_jail::seccomp::notify::{install_forkable, Notification};
use airlock_jail::seccomp::{Network, BRANCH_CLONE_FLAGS};
use airlock_jail::{caps, JailError};

use crate::report::{check, errno};

const NAMESPACES: [&str; 7] = ["user", "mnt", "pid", "net", "ipc", "uts", "cgroup"];
/// The branch clones the listener answers: the first denied, the second allowed.
const ANSWERS: [bool; 2] = [false, true];

pub(crate) fn run(args: &[String]) -> Result<bool, String> {
    if !args.is_empty() {
        return Err("seccomp-branch takes no arguments".into());
    }
    let ours = namespaces()?;
    caps::set_no_new_privs().map_err(|e| e.to_string())?;
    let listener = install_forkable(Network::None).map_err(|e| e.to_string())?;
    // The door is ours alone: a second listener on the same filter stack is refused.
    let second = install_forkable(Network::None);
    let busy = matches!(&second, Err(JailError::Sys { source, .. })
        if source.raw_os_error() == Some(libc::EBUSY));
    let mut ok = check(
        &format!("a second listener is refused EBUSY ({second:?})"),
        busy,
    );
    let broker = std::thread::spawn(move || -> Result<Vec<Notification>, String> {
        let mut seen = Vec::new();
        let mut answered = 0;
        while answered < ANSWERS.len() {
            let n = listener.recv().map_err(|e| e.to_string())?;
            seen.push(n);
            let is_branch = i64::from(n.nr) == libc::SYS_clone
                && n.args[0] & 0xffff_ffff == u64::from(BRANCH_CLONE_FLAGS);
            if is_branch && ANSWERS[answered] {
                listener.allow(n.id).map_err(|e| e.to_string())?;
            } else {
                listener
                    .deny(n.id, libc::EPERM)
                    .map_err(|e| e.to_string())?;
            }
            answered += usize::from(is_branch);
        }
        Ok(seen)
    });
    let branch = libc::c_ulong::from(BRANCH_CLONE_FLAGS);

    let denied = raw_clone(branch);
    ok &= check(
        &format!(
            "a branch clone the listener denies fails EPERM ({denied}, errno {})",
            errno()
        ),
        denied == -1 && errno() == libc::EPERM,
    );
    let near = raw_clone(branch & !libc::c_ulong::from(libc::CLONE_NEWCGROUP as u32));
    ok &= check(
        &format!(
            "a clone one namespace short is EPERM by the filter ({near}, errno {})",
            errno()
        ),
        near == -1 && errno() == libc::EPERM,
    );
    // SAFETY: signal 0 only checks permission: to our own process group.
    let group = unsafe { libc::kill(0, 0) };
    let group_errno = errno();
    // SAFETY: as above, to this process.
    let own = unsafe { libc::kill(libc::getpid(), 0) };
    ok &= check(
        &format!("kill(0) is EPERM ({group}, errno {group_errno}), kill(own pid) allowed ({own})"),
        group == -1 && group_errno == libc::EPERM && own == 0,
    );
    let fork = raw_clone(libc::SIGCHLD as libc::c_ulong);
    ok &= check(
        &format!("a plain fork is EPERM ({fork}, errno {})", errno()),
        fork == -1 && errno() == libc::EPERM,
    );

    let (read, write) = pipe()?;
    let child = raw_clone(branch);
    if child == 0 {
        report_from_branch(write.as_raw_fd());
    }
    drop(write);
    ok &= check(
        &format!("the allowed branch clone made a child ({child})"),
        child > 0,
    );
    let theirs = read_all(read);
    if let Some(pid) = libc::pid_t::try_from(child).ok().filter(|p| *p > 0) {
        // SAFETY: reaping our own child; a null status pointer is allowed.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    }
    let mut lines = theirs.lines();
    ok &= check(
        "the branch is pid 1 of its own pid namespace",
        lines.next() == Some("1"),
    );
    for (name, (mine, its)) in NAMESPACES.iter().zip(ours.iter().zip(lines)) {
        ok &= check(
            &format!("{name}: ours {mine}, the branch's {its}"),
            mine != its,
        );
    }
    let seen = broker
        .join()
        .map_err(|_| "the listener thread panicked")??;
    ok &= check(
        &format!("the listener saw exactly the two branch clones: {seen:?}"),
        seen.len() == 2
            && seen.iter().all(|n| {
                i64::from(n.nr) == libc::SYS_clone
                    && n.args[0] == branch
                    && n.pid == std::process::id()
            }),
    );
    Ok(ok)
}

fn raw_clone(flags: libc::c_ulong) -> libc::c_long {
    // SAFETY: clone without CLONE_VM and with a null stack is fork(2) with flags: the child
    // gets a copy of this address space and, in it, only calls async-signal-safe functions
    // before `_exit` (`report_from_branch`).
    unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) }
}

/// In the branch: its pid and its namespaces' links, one per line, then `_exit`.
fn report_from_branch(fd: i32) -> ! {
    let mut out = [0u8; 1024];
    let mut len = 0;
    // SAFETY: getpid is async-signal-safe.
    let pid = unsafe { libc::getpid() };
    for b in pid.to_string().bytes().chain(std::iter::once(b'\n')) {
        out[len] = b;
        len += 1;
    }
    for path in [
        c"/proc/self/ns/user",
        c"/proc/self/ns/mnt",
        c"/proc/self/ns/pid",
        c"/proc/self/ns/net",
        c"/proc/self/ns/ipc",
        c"/proc/self/ns/uts",
        c"/proc/self/ns/cgroup",
    ] {
        let end = out.len() - 1;
        let room = &mut out[len..end];
        // SAFETY: readlink into a buffer of `room.len()` bytes we own.
        let n = unsafe { libc::readlink(path.as_ptr(), room.as_mut_ptr().cast(), room.len() - 1) };
        len += usize::try_from(n).unwrap_or(0);
        out[len] = b'\n';
        len += 1;
    }
    // SAFETY: write from our buffer, then leave without running anything of the parent's.
    unsafe {
        libc::write(fd, out.as_ptr().cast(), len);
        libc::_exit(0)
    }
}

fn namespaces() -> Result<Vec<String>, String> {
    NAMESPACES
        .iter()
        .map(|ns| {
            std::fs::read_link(format!("/proc/self/ns/{ns}"))
                .map(|p| p.display().to_string())
                .map_err(|e| e.to_string())
        })
        .collect()
}

fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two fds we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe2: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: both fds were just made and are owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn read_all(fd: OwnedFd) -> String {
    use std::io::Read;
    let mut s = String::new();
    let _ = std::fs::File::from(fd).take(4096).read_to_string(&mut s);
    s
}
