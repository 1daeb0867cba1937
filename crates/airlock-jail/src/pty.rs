//! Pseudo-terminals for a sandbox's interactive processes: a pair from the host's `/dev/ptmx`,
//! its window size, and the child-side step that makes the terminal a session's controlling tty.
//!
//! The slave is opened from the master with `TIOCGPTPEER`, never by its `/dev/pts/N` name: a
//! path could be swapped between `ptsname` and `open`, and the devpts the caller sees may not
//! be the one the master came from. Both ends are `O_CLOEXEC` and `O_NOCTTY`: neither becomes
//! anybody's controlling tty by accident; [`become_session_leader_with_tty`] does it on purpose.

use std::ffi::CStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::sys::check;
use crate::{JailError, Result};

/// The host's pseudo-terminal multiplexer.
const PTMX: &CStr = c"/dev/ptmx";

/// Opens a new pseudo-terminal pair with a window of `rows` x `cols`: `(master, slave)`.
///
/// The master comes from the host's `/dev/ptmx` (`O_RDWR | O_NOCTTY | O_CLOEXEC`), is unlocked
/// (`TIOCSPTLCK` 0) and sized (`TIOCSWINSZ`); the slave comes from the master itself
/// (`TIOCGPTPEER`, Linux 4.13), with the same flags. The terminal starts in the kernel's
/// default mode (canonical, echo, signals from `^C`/`^Z`/`^\`).
pub fn open_pair(rows: u16, cols: u16) -> Result<(OwnedFd, OwnedFd)> {
    open_pair_from(PTMX, rows, cols)
}

fn open_pair_from(ptmx: &CStr, rows: u16, cols: u16) -> Result<(OwnedFd, OwnedFd)> {
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: `ptmx` is a NUL-terminated string that outlives the call; open takes no other
    // pointer.
    let fd = unsafe { libc::open(ptmx.as_ptr(), flags) };
    if fd == -1 {
        let source = std::io::Error::last_os_error();
        return Err(match source.raw_os_error() {
            Some(libc::ENOENT | libc::ENXIO | libc::ENODEV) => JailError::Unsupported {
                what: format!("pseudo-terminals ({}: {source})", ptmx.to_string_lossy()),
                fix: "mount devpts on /dev/pts and provide /dev/ptmx (the device, or a symlink \
                      to pts/ptmx)"
                    .into(),
            },
            _ => JailError::io("open /dev/ptmx", source),
        });
    }
    // SAFETY: open returned a fresh descriptor that nothing else owns.
    let master = unsafe { OwnedFd::from_raw_fd(fd) };
    let unlock: libc::c_int = 0;
    check(
        // SAFETY: TIOCSPTLCK reads one int from `unlock`, which outlives the call.
        unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSPTLCK, &unlock) },
        "ioctl(TIOCSPTLCK)",
    )?;
    set_size(master.as_fd(), rows, cols)?;
    // SAFETY: TIOCGPTPEER takes the open flags as an integer argument and no pointer.
    let peer = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGPTPEER, flags) };
    if peer == -1 {
        let source = std::io::Error::last_os_error();
        return Err(match source.raw_os_error() {
            Some(libc::EINVAL | libc::ENOTTY) => JailError::Unsupported {
                what: format!("TIOCGPTPEER ({source})"),
                fix: "run on Linux 4.13 or newer".into(),
            },
            _ => JailError::io("ioctl(TIOCGPTPEER)", source),
        });
    }
    // SAFETY: TIOCGPTPEER returned a fresh descriptor that nothing else owns.
    let slave = unsafe { OwnedFd::from_raw_fd(peer) };
    Ok((master, slave))
}

/// Sets the window size of the terminal behind `master` (`TIOCSWINSZ`); the kernel sends
/// `SIGWINCH` to the terminal's foreground process group when it changes.
pub fn set_size(master: BorrowedFd<'_>, rows: u16, cols: u16) -> Result<()> {
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    check(
        // SAFETY: TIOCSWINSZ reads one `struct winsize` from `ws`, which outlives the call.
        unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &ws) },
        "ioctl(TIOCSWINSZ)",
    )?;
    Ok(())
}

/// The window size of the terminal behind `fd` (either end): `(rows, cols)`.
pub fn get_size(fd: BorrowedFd<'_>) -> Result<(u16, u16)> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    check(
        // SAFETY: TIOCGWINSZ writes one `struct winsize` into `ws`, which outlives the call.
        unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) },
        "ioctl(TIOCGWINSZ)",
    )?;
    Ok((ws.ws_row, ws.ws_col))
}

/// In a freshly forked child, before it puts `slave` on 0/1/2: `setsid()`, then the slave
/// becomes the new session's controlling terminal (`TIOCSCTTY` 0, never stealing one from
/// another session) and this process group its foreground group, so `^C` on the master
/// interrupts it and a shell gets job control.
///
/// Allocates nothing, success or failure, so it may run between `fork` and `exec` (e.g. in
/// `Command::pre_exec`).
pub fn become_session_leader_with_tty(slave: BorrowedFd<'_>) -> Result<()> {
    // SAFETY: setsid takes no arguments; it fails (EPERM) for a process group leader.
    check(unsafe { libc::setsid() }, "setsid")?;
    check(
        // SAFETY: TIOCSCTTY takes an integer argument (0: do not steal) and no pointer.
        unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCSCTTY, 0) },
        "ioctl(TIOCSCTTY)",
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::*;

    /// Reads from `fd` until `done` holds for what was read, or `limit` passes (then panics).
    fn read_until(fd: &OwnedFd, limit: Duration, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + limit;
        let mut file = std::fs::File::from(fd.try_clone().unwrap());
        let mut got = Vec::new();
        while !done(&String::from_utf8_lossy(&got)) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "timed out; read {:?}",
                String::from_utf8_lossy(&got)
            );
            let mut pfd = libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = libc::c_int::try_from(left.as_millis()).unwrap_or(libc::c_int::MAX);
            // SAFETY: one valid pollfd, for the duration of the call.
            let n = unsafe { libc::poll(&mut pfd, 1, ms) };
            if n <= 0 {
                continue;
            }
            let mut buf = [0u8; 256];
            let k = file.read(&mut buf).unwrap();
            got.extend_from_slice(&buf[..k]);
        }
        String::from_utf8_lossy(&got).into_owned()
    }

    fn cloexec(fd: &OwnedFd) -> bool {
        // SAFETY: F_GETFD takes no pointer.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) };
        flags != -1 && flags & libc::FD_CLOEXEC != 0
    }

    #[test]
    fn a_line_written_to_the_master_is_read_from_the_slave() {
        let (master, slave) = open_pair(24, 80).unwrap();
        assert!(cloexec(&master) && cloexec(&slave));
        std::fs::File::from(master.try_clone().unwrap())
            .write_all(b"hello\n")
            .unwrap();
        // Canonical mode: the slave reads the whole line, the master gets the echo back.
        assert_eq!(
            read_until(&slave, Duration::from_secs(2), |s| s.ends_with('\n')),
            "hello\n"
        );
        let echo = read_until(&master, Duration::from_secs(2), |s| s.ends_with('\n'));
        assert_eq!(echo, "hello\r\n");
    }

    #[test]
    fn the_window_size_round_trips_on_both_ends() {
        let (master, slave) = open_pair(24, 80).unwrap();
        assert_eq!(get_size(master.as_fd()).unwrap(), (24, 80));
        assert_eq!(get_size(slave.as_fd()).unwrap(), (24, 80));
        set_size(master.as_fd(), 50, 132).unwrap();
        assert_eq!(get_size(slave.as_fd()).unwrap(), (50, 132));
        assert_eq!(get_size(master.as_fd()).unwrap(), (50, 132));
    }

    #[test]
    fn a_missing_ptmx_is_a_clear_unsupported_error() {
        let err = open_pair_from(c"/nonexistent/ptmx", 24, 80).unwrap_err();
        assert!(matches!(err, JailError::Unsupported { .. }), "{err}");
        assert!(err.to_string().contains("devpts"), "{err}");
    }

    #[test]
    fn get_size_of_a_non_tty_is_a_sys_error() {
        let f = std::fs::File::open("/dev/null").unwrap();
        let err = get_size(f.as_fd()).unwrap_err();
        assert_eq!(err.errno(), Some(libc::ENOTTY), "{err}");
    }

    /// `program` with the slave as stdin/stdout/stderr, in its own session with the slave as
    /// its controlling terminal, every signal at its default disposition (as a sandbox's
    /// processes start: a test run from a background job inherits SIGINT ignored, and `^C`
    /// would then interrupt nothing).
    fn spawn_on(slave: &OwnedFd, program: &str, args: &[&str]) -> std::process::Child {
        let raw: RawFd = slave.as_raw_fd();
        let mut cmd = Command::new(program);
        crate::process::default_signals_at_spawn(&mut cmd);
        cmd.args(args)
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave.try_clone().unwrap()));
        // SAFETY: the closure only makes async-signal-safe syscalls and allocates nothing
        // (become_session_leader_with_tty's contract; from_raw_os_error does not allocate).
        // `raw` stays open in the child until exec: the parent holds `slave` across spawn.
        unsafe {
            cmd.pre_exec(move || {
                // SAFETY: `raw` is the slave, open in this (forked) child until exec.
                let fd = BorrowedFd::borrow_raw(raw);
                become_session_leader_with_tty(fd).map_err(|e| {
                    std::io::Error::from_raw_os_error(e.errno().unwrap_or(libc::EINVAL))
                })
            });
        }
        cmd.spawn().unwrap()
    }

    /// Waits for `child` for at most `limit`, killing it (and failing) after that.
    fn wait_within(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("child still running after {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_child_on_the_slave_sees_the_window_size() {
        let (master, slave) = open_pair(33, 101).unwrap();
        let mut child = spawn_on(&slave, "/bin/sh", &["-c", "stty size"]);
        let out = read_until(&master, Duration::from_secs(2), |s| s.contains('\n'));
        assert_eq!(out, "33 101\r\n");
        assert!(wait_within(&mut child, Duration::from_secs(2)).success());
    }

    #[test]
    fn ctrl_c_on_the_master_interrupts_the_foreground_process() {
        let (master, slave) = open_pair(24, 80).unwrap();
        // spawn returns once the child has exec'd, so its pre_exec (setsid + TIOCSCTTY) is done
        // and `sleep` is the terminal's foreground process group.
        let mut child = spawn_on(&slave, "/bin/sleep", &["30"]);
        std::fs::File::from(master.try_clone().unwrap())
            .write_all(b"\x03")
            .unwrap();
        let st = wait_within(&mut child, Duration::from_secs(2));
        assert_eq!(st.signal(), Some(libc::SIGINT), "{st:?}");
    }
}
