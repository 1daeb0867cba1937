//! seccomp scenarios: `seccomp run|exec CASE`. Cases that must be killed return `Ok(false)`
//! if they survive, so a kill is the only passing outcome (the test checks for SIGSYS).

use airlock_jail::seccomp::{self, Profile};
use airlock_jail::{caps, process};

use crate::report::{check, errno};

fn denied(ret: libc::c_long, want: i32, what: &str) -> bool {
    let e = errno();
    check(
        &format!("{what} -> ret {ret} errno {e} (want errno {want})"),
        ret == -1 && e == want,
    )
}

pub(crate) fn run(args: &[String]) -> Result<bool, String> {
    let [profile, case] = args else {
        return Err("seccomp run|exec CASE".into());
    };
    let profile = match profile.as_str() {
        "run" => Profile::Run,
        "exec" => Profile::Exec,
        p => return Err(format!("bad profile {p}")),
    };
    caps::set_no_new_privs().map_err(|e| e.to_string())?;
    seccomp::install(profile).map_err(|e| e.to_string())?;
    if seccomp::current_mode().map_err(|e| e.to_string())? != 2 {
        return Ok(check("seccomp mode is 2 (filter)", false));
    }
    // SAFETY (all blocks below): raw syscalls with integer or valid pointer arguments; the
    // point of each is to be refused or to kill the process.
    Ok(match case.as_str() {
        "execve" => {
            let path = c"/bin/true";
            let argv = [path.as_ptr(), std::ptr::null()];
            let envp = [std::ptr::null()];
            // SAFETY: null-terminated argv/envp of NUL-terminated strings.
            let r = unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
            denied(r.into(), libc::EPERM, "execve")
        }
        "fork" => {
            // SAFETY: fork in a single-threaded process; a child (which should not exist) exits.
            let r = unsafe { libc::fork() };
            if r == 0 {
                // SAFETY: _exit in the child.
                unsafe { libc::_exit(0) };
            }
            // SAFETY: raw fork/vfork syscalls; a child would exit at once.
            let raw = unsafe { libc::syscall(libc::SYS_fork) };
            if raw == 0 {
                // SAFETY: _exit in the child.
                unsafe { libc::_exit(0) };
            }
            let a = denied(r.into(), libc::EPERM, "fork()");
            let b = denied(raw, libc::EPERM, "syscall(SYS_fork)");
            let spawn = std::process::Command::new("/bin/true").status();
            let c = check(
                &format!("std Command spawn fails: {spawn:?}"),
                spawn.is_err(),
            );
            a && b && c
        }
        "clone3" => {
            // SAFETY: clone3 with a null args pointer is refused before it is read.
            let r = unsafe { libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0usize) };
            denied(r, libc::ENOSYS, "clone3")
        }
        "clone-newns" => {
            let flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNET | libc::SIGCHLD;
            // SAFETY: a fork-like clone; a child (which should not exist) exits at once.
            let r = unsafe { libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) };
            if r == 0 {
                // SAFETY: _exit in the child.
                unsafe { libc::_exit(0) };
            }
            denied(r, libc::EPERM, "clone(CLONE_NEWUSER|CLONE_NEWNET)")
        }
        "socket" => {
            // SAFETY: socket only takes integers.
            let a = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
            // SAFETY: socket only takes integers.
            let b = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
            let mut sv = [0; 2];
            let c =
                // SAFETY: sv has room for two fds.
                unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, sv.as_mut_ptr()) };
            // A connected unix stream pair (asyncio's self-pipe) is the one socket allowed.
            let d =
                // SAFETY: sv has room for two fds.
                unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()) };
            if d == 0 {
                // SAFETY: the two fds socketpair just made are ours.
                unsafe {
                    libc::close(sv[0]);
                    libc::close(sv[1]);
                }
            }
            denied(a.into(), libc::EPERM, "socket(AF_INET)")
                & denied(b.into(), libc::EPERM, "socket(AF_UNIX)")
                & denied(c.into(), libc::EPERM, "socketpair(AF_UNIX, SOCK_DGRAM)")
                & check("socketpair(AF_UNIX, SOCK_STREAM) allowed", d == 0)
        }
        "threads" => {
            let handles: Vec<_> = (0..4).map(|i| std::thread::spawn(move || i * 2)).collect();
            let sum: i32 = handles.into_iter().map(|h| h.join().unwrap_or(-100)).sum();
            check(&format!("4 threads ran and joined (sum {sum})"), sum == 12)
        }
        "tiocsti" => {
            let c: libc::c_char = b'x' as libc::c_char;
            // SAFETY: TIOCSTI reads one byte from `c`.
            let r = unsafe { libc::ioctl(0, libc::TIOCSTI, &c) };
            let ok = denied(r.into(), libc::EPERM, "ioctl(TIOCSTI)");
            let disc: libc::c_int = 0; // N_TTY
                                       // SAFETY: TIOCSETD reads one int from `disc`.
            let r = unsafe { libc::ioctl(0, libc::TIOCSETD, &disc) };
            let ok = ok & denied(r.into(), libc::EPERM, "ioctl(TIOCSETD)");
            // SAFETY: TIOCCONS takes no argument.
            let r = unsafe { libc::ioctl(0, libc::TIOCCONS) };
            let ok = ok & denied(r.into(), libc::EPERM, "ioctl(TIOCCONS)");
            // An unrelated ioctl still reaches the kernel (ENOTTY/EBADF, not EPERM).
            let mut n: libc::c_int = 0;
            // SAFETY: FIONREAD writes an int.
            let r2 = unsafe { libc::ioctl(-1, libc::FIONREAD, &mut n) };
            ok & denied(
                r2.into(),
                libc::EBADF,
                "ioctl(-1, FIONREAD) passes the filter",
            )
        }
        "personality-query" => {
            // SAFETY: a query does not change the persona.
            let r = unsafe { libc::personality(0xffff_ffff) };
            check(&format!("personality(query) allowed -> {r}"), r != -1)
        }
        // The cases below must die by SIGSYS; surviving is a failure.
        "personality-set" => {
            // SAFETY: would only change this process's persona.
            unsafe { libc::personality(libc::ADDR_NO_RANDOMIZE as libc::c_ulong) };
            check("survived personality(ADDR_NO_RANDOMIZE)", false)
        }
        "ptrace" => {
            // SAFETY: PTRACE_TRACEME takes no pointers.
            unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) };
            check("survived ptrace", false)
        }
        "io_uring" => {
            // SAFETY: would be rejected for the null params anyway.
            unsafe { libc::syscall(libc::SYS_io_uring_setup, 1, std::ptr::null::<u8>()) };
            check("survived io_uring_setup", false)
        }
        "unshare" => {
            // SAFETY: flags only.
            unsafe { libc::unshare(libc::CLONE_NEWUSER) };
            check("survived unshare", false)
        }
        "mount" => {
            // SAFETY: null pointers are allowed by mount(2) for this (failing) call.
            unsafe {
                libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    0,
                    std::ptr::null(),
                )
            };
            check("survived mount", false)
        }
        "x32" => {
            // SAFETY: getpid through the x32 ABI bit; takes no arguments.
            unsafe { libc::syscall(libc::SYS_getpid | 0x4000_0000) };
            check("survived an x32 syscall", false)
        }
        "i386" => {
            i386_getpid();
            check("survived an int 0x80 (i386 ABI) syscall", false)
        }
        "exec-works" => exec_works(),
        other => return Err(format!("unknown seccomp case {other}")),
    })
}

#[cfg(target_arch = "x86_64")]
fn i386_getpid() {
    let mut eax: u32 = 20; // __NR_getpid in the i386 table
                           // SAFETY: int 0x80 with eax = getpid takes no memory arguments; it clobbers only eax
                           // (and the filter should kill us before it returns).
    unsafe { std::arch::asm!("int 0x80", inout("eax") eax, options(nostack)) };
    println!("int 0x80 returned {eax}");
}

#[cfg(not(target_arch = "x86_64"))]
fn i386_getpid() {}

/// Exec profile: fork and exec work; new sockets do not.
fn exec_works() -> bool {
    let status = std::process::Command::new("/bin/sh")
        .args(["-c", "exit 7"])
        .status();
    let a = check(
        &format!("sh -c 'exit 7' ran: {status:?}"),
        matches!(status.map(|s| s.code()), Ok(Some(7))),
    );
    let b = match process::fork() {
        Ok(process::Fork::Child) => process::exit_like(process::WaitStatus::Exited(3)),
        Ok(process::Fork::Parent { child }) => {
            let st = process::wait_child(child);
            check(
                &format!("fork + wait -> {st:?}"),
                matches!(st, Ok(process::WaitStatus::Exited(3))),
            )
        }
        Err(e) => check(&format!("fork: {e}"), false),
    };
    let s = std::net::UdpSocket::bind("127.0.0.1:0");
    let c = check(
        &format!("socket denied: {:?}", s.as_ref().map(|_| ())),
        matches!(&s, Err(e) if e.raw_os_error() == Some(libc::EPERM)),
    );
    a && b && c
}
