//! `seccomp-handover`: the broker's side of a copy-on-write fork, across processes as it
//! will be. A child (the kernel's part) installs the forkable profile and asks for a branch
//! clone; this process (the broker's part, no filter) takes the child's listener with
//! `pidfd_getfd`, sees the notification come from that child, places a pipe at fd 100 in it
//! (`ADDFD`) and lets the clone go on: the branch is born holding what the broker put there.
//! A helper of the broker's then joins the branch's user and mount namespaces and makes a
//! procfs of the branch's pid namespace from outside it: it lists one process, pid 1.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use airlock_jail::process::{exit_now, fork, Fork};
use airlock_jail::seccomp::notify::{install_forkable, Listener};
use airlock_jail::seccomp::{Network, BRANCH_CLONE_FLAGS};
use airlock_jail::{caps, fsmount, identity, pidfd};

use crate::report::check;

/// Where the broker puts the branch's channel in the kernel.
const CHANNEL_FD: i32 = 100;
const GREETING: &str = "from the broker";

pub(crate) fn run(args: &[String]) -> Result<bool, String> {
    if !args.is_empty() {
        return Err("seccomp-handover takes no arguments".into());
    }
    let (from_kernel, to_probe) = pipe()?;
    let kernel = match fork().map_err(|e| e.to_string())? {
        Fork::Child => kernel_part(to_probe.as_fd()),
        Fork::Parent { child } => child,
    };
    drop(to_probe);
    let mut lines = LineReader(std::fs::File::from(from_kernel));
    let listener_fd: i32 = lines.next_parsed()?;
    let kernel_fd = pidfd::open(kernel).map_err(|e| e.to_string())?;
    let listener = Listener::from_fd(
        pidfd::take_fd(kernel_fd.as_fd(), listener_fd).map_err(|e| e.to_string())?,
    );
    let mut ok = true;
    let n = listener.recv().map_err(|e| e.to_string())?;
    ok &= check(
        &format!("the notification is the kernel's branch clone: {n:?}"),
        u32::try_from(kernel).ok() == Some(n.pid)
            && i64::from(n.nr) == libc::SYS_clone
            && n.args[0] == u64::from(BRANCH_CLONE_FLAGS),
    );
    let (channel, channel_in) = pipe()?;
    say(channel_in.as_fd(), GREETING);
    drop(channel_in);
    listener
        .add_fd(n.id, channel.as_fd(), CHANNEL_FD)
        .map_err(|e| e.to_string())?;
    listener.allow(n.id).map_err(|e| e.to_string())?;
    drop(channel);

    // The kernel's and the branch's lines, in whichever order they came.
    let (mut branch, mut said) = (None, None);
    for _ in 0..2 {
        let line = lines.next_line()?;
        match line.split_once(' ') {
            Some(("branch", pid)) => branch = pid.parse::<i32>().ok(),
            Some(("found", what)) => said = Some(what.to_owned()),
            _ => return Err(format!("unexpected line {line:?}")),
        }
    }
    let (Some(branch), Some(said)) = (branch, said) else {
        return Err("the kernel or the branch did not report".into());
    };
    ok &= check(
        &format!("the branch was born holding the broker's pipe: {said:?}"),
        said == GREETING,
    );
    let procs = helper_lists_branch_proc(branch)?;
    ok &= check(
        &format!("the branch's own procfs, made from outside, lists pid 1 alone: {procs:?}"),
        procs == ["1"],
    );
    let branch_fd = pidfd::open(branch).map_err(|e| e.to_string())?;
    let _ = pidfd::send_signal(branch_fd.as_fd(), libc::SIGKILL);
    // SAFETY: reaping our own child (the kernel's part); a null status pointer is allowed.
    unsafe { libc::waitpid(kernel, std::ptr::null_mut(), 0) };
    Ok(ok)
}

/// The kernel's part: install the forkable filter, tell the broker its listener's fd, ask for
/// a branch. The branch reports its pid as the kernel saw it and what it found at fd 100,
/// then waits to be killed.
fn kernel_part(out: BorrowedFd<'_>) -> ! {
    let said = (|| -> Result<(), String> {
        caps::set_no_new_privs().map_err(|e| e.to_string())?;
        let listener = install_forkable(Network::None).map_err(|e| e.to_string())?;
        say(out, &listener.as_fd().as_raw_fd().to_string());
        // SAFETY: as in `sec_branch::raw_clone`: a fork with flags; the child below uses only
        // async-signal-safe calls.
        let child = unsafe {
            libc::syscall(
                libc::SYS_clone,
                libc::c_ulong::from(BRANCH_CLONE_FLAGS),
                0,
                0,
                0,
                0,
            )
        };
        if child == 0 {
            let mut buf = [0u8; 70];
            buf[..6].copy_from_slice(b"found ");
            // SAFETY: read into our own buffer from the fd the broker placed (its line
            // ends in a newline).
            let n = unsafe { libc::read(CHANNEL_FD, buf[6..].as_mut_ptr().cast(), 64) };
            let got = &buf[..6 + usize::try_from(n).unwrap_or(0)];
            // SAFETY: write from our buffer; then wait for the broker's SIGKILL.
            unsafe {
                libc::write(out.as_raw_fd(), got.as_ptr().cast(), got.len());
                loop {
                    libc::pause();
                }
            }
        }
        say(out, &format!("branch {child}"));
        Ok(())
    })();
    exit_now(i32::from(said.is_err()))
}

/// A helper of the broker's: joins the branch's user and mount namespaces (single-threaded,
/// as `setns` of a user namespace requires), makes a procfs of its pid namespace, and lists
/// the numeric entries.
fn helper_lists_branch_proc(branch: i32) -> Result<Vec<String>, String> {
    let open = |ns: &str| {
        std::fs::File::open(format!("/proc/{branch}/ns/{ns}")).map_err(|e| format!("{ns}: {e}"))
    };
    let (user, mnt, pid) = (open("user")?, open("mnt")?, open("pid")?);
    let (from_helper, to_probe) = pipe()?;
    match fork().map_err(|e| e.to_string())? {
        Fork::Child => {
            let listed = (|| -> Result<String, String> {
                identity::join_user_namespace(user.as_fd()).map_err(|e| e.to_string())?;
                identity::join_mount_namespace(mnt.as_fd()).map_err(|e| e.to_string())?;
                let proc = fsmount::detached_proc(pid.as_fd()).map_err(|e| e.to_string())?;
                let dir = format!("/proc/self/fd/{}", proc.as_raw_fd());
                let mut pids: Vec<String> = std::fs::read_dir(dir)
                    .map_err(|e| e.to_string())?
                    .filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
                    .collect();
                pids.sort();
                Ok(pids.join(" "))
            })();
            say(
                to_probe.as_fd(),
                &listed.unwrap_or_else(|e| format!("error: {e}")),
            );
            exit_now(0)
        }
        Fork::Parent { child } => {
            drop(to_probe);
            let line = LineReader(std::fs::File::from(from_helper)).next_line()?;
            // SAFETY: reaping our own child; a null status pointer is allowed.
            unsafe { libc::waitpid(child, std::ptr::null_mut(), 0) };
            if line.starts_with("error") {
                return Err(line);
            }
            Ok(line.split_whitespace().map(str::to_owned).collect())
        }
    }
}

fn say(fd: BorrowedFd<'_>, line: &str) {
    let line = format!("{line}\n");
    // SAFETY: write from our own buffer.
    unsafe { libc::write(fd.as_raw_fd(), line.as_ptr().cast(), line.len()) };
}

struct LineReader(std::fs::File);

impl LineReader {
    fn next_line(&mut self) -> Result<String, String> {
        use std::io::Read;
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while line.len() < 4096 {
            match self.0.read(&mut byte) {
                Ok(1) if byte[0] == b'\n' => break,
                Ok(1) => line.push(byte[0]),
                Ok(_) => return Err("the other side closed its end".into()),
                Err(e) => return Err(e.to_string()),
            }
        }
        String::from_utf8(line).map_err(|e| e.to_string())
    }

    fn next_parsed<T: std::str::FromStr>(&mut self) -> Result<T, String> {
        let line = self.next_line()?;
        line.parse().map_err(|_| format!("not a number: {line:?}"))
    }
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
