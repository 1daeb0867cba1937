//! Handing descriptors across processes: `SCM_RIGHTS` over a Unix socket, claiming a
//! descriptor a spawner placed at a fixed number, and placing one there at spawn.
//!
//! The egress proxy uses all three: the broker maps one end of a socketpair into the stage at
//! a fixed number ([`map_fd_at_spawn`]); pid 1 claims it ([`take_inherited`]), creates the
//! proxy listener inside the sandbox's network namespace and sends it back
//! ([`send_fd`]); the broker receives it ([`recv_fd`]). The guest never holds either.
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{JailError, Result};

/// Space for one `int` of `SCM_RIGHTS` payload, aligned for `cmsghdr`.
#[repr(C)]
union CmsgBuf {
    _align: libc::cmsghdr,
    bytes: [u8; 64],
}

/// `sizeof(int)`, as the CMSG macros take it.
fn fd_size() -> libc::c_uint {
    libc::c_uint::try_from(std::mem::size_of::<RawFd>()).unwrap_or(4)
}

fn cmsg_space_one_fd() -> usize {
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(fd_size()) };
    space as usize
}

/// Send `fd` over the connected Unix socket `sock`, with one byte of payload.
pub fn send_fd(sock: BorrowedFd<'_>, fd: BorrowedFd<'_>) -> Result<()> {
    send_tagged(sock, b'F', Some(fd))
}

/// Send one byte, `tag`, over the connected Unix socket `sock`, with `fd` attached if given.
/// Each call is one message a [`recv_tagged`] reads whole.
pub fn send_tagged(sock: BorrowedFd<'_>, tag: u8, fd: Option<BorrowedFd<'_>>) -> Result<()> {
    let mut byte = [tag];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut buf = CmsgBuf { bytes: [0; 64] };
    // SAFETY: an all-zero msghdr is a valid "no name, no iov, no control" header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        // SAFETY: taking the address of a union field is how the control buffer is lent out.
        msg.msg_control = unsafe { buf.bytes.as_mut_ptr() }.cast();
        msg.msg_controllen = cmsg_space_one_fd() as _;
        // SAFETY: `msg` points at a control buffer of CMSG_SPACE(int) bytes (<= 64), so
        // CMSG_FIRSTHDR returns a pointer inside it; we write one header and one int.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            if c.is_null() {
                return Err(JailError::InvalidInput("control buffer too small".into()));
            }
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(fd_size()) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd.as_raw_fd());
        }
    }
    loop {
        // SAFETY: `msg` and everything it points at (iov, byte, control buffer) outlive the
        // call; the kernel only reads them.
        let r = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if r >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(JailError::io("sendmsg(SCM_RIGHTS)", e));
        }
    }
}

/// Receive one descriptor sent by [`send_fd`] (close-on-exec set). `Ok(None)` at end of
/// stream; `WouldBlock` on a non-blocking socket with nothing queued. A message carrying more
/// than one descriptor, or a truncated one, is an error (the kernel closes what did not fit).
pub fn recv_fd(sock: BorrowedFd<'_>) -> io::Result<Option<OwnedFd>> {
    match recv_tagged(sock)? {
        None => Ok(None),
        Some((_, Some(fd))) => Ok(Some(fd)),
        Some((_, None)) => Err(io::Error::other("message carried no descriptor")),
    }
}

/// Receive one message of [`send_tagged`]: its byte and the descriptor it carried, if any
/// (close-on-exec set). `Ok(None)` at end of stream. More than one descriptor, or a truncated
/// control message, is an error (the kernel closes what did not fit; extras are closed here).
pub fn recv_tagged(sock: BorrowedFd<'_>) -> io::Result<Option<(u8, Option<OwnedFd>)>> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut buf = CmsgBuf { bytes: [0; 64] };
    let space = cmsg_space_one_fd();
    // SAFETY: an all-zero msghdr is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    // SAFETY: lending the union's byte view as the control buffer.
    msg.msg_control = unsafe { buf.bytes.as_mut_ptr() }.cast();
    msg.msg_controllen = space as _;
    let r = loop {
        // SAFETY: `msg` points at buffers that live across the call and whose sizes it states.
        let r = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if r >= 0 {
            break r;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut got: Option<OwnedFd> = None;
    let mut extra = false;
    // SAFETY: walking the control messages the kernel wrote into our buffer with the CMSG_*
    // macros, which stay inside `msg_controllen`. Every SCM_RIGHTS int is a fresh descriptor
    // now owned by this process, so wrapping each in an OwnedFd exactly once is sound.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                let header = libc::CMSG_LEN(0) as usize;
                let n =
                    ((*c).cmsg_len as usize).saturating_sub(header) / std::mem::size_of::<RawFd>();
                for i in 0..n {
                    let fd = OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i)));
                    if got.is_none() {
                        got = Some(fd);
                    } else {
                        extra = true;
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 || extra {
        return Err(io::Error::other("expected at most one descriptor"));
    }
    if r == 0 && got.is_none() {
        return Ok(None);
    }
    Ok(Some((byte[0], got)))
}

/// Place each descriptor at its target number in *this* process (without close-on-exec),
/// safe against a source colliding with another's target: all are first duplicated above
/// [`STAGING_FLOOR`]. Targets must be distinct and below the floor; the staged copies are
/// closed again.
pub fn place_fds(fds: Vec<(OwnedFd, RawFd)>) -> Result<()> {
    let mut targets: Vec<RawFd> = fds.iter().map(|(_, t)| *t).collect();
    targets.sort_unstable();
    targets.dedup();
    if targets.len() != fds.len() || targets.iter().any(|t| *t < 0 || *t >= STAGING_FLOOR) {
        return Err(JailError::InvalidInput(format!(
            "bad fd targets {targets:?}"
        )));
    }
    let mut staged = Vec::with_capacity(fds.len());
    for (fd, target) in fds {
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a descriptor we own returns a fresh one.
        let s = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, STAGING_FLOOR) };
        if s < 0 {
            return Err(JailError::last_os("fcntl(F_DUPFD_CLOEXEC)"));
        }
        // SAFETY: `s` is the fresh descriptor fcntl just returned; nothing else owns it.
        staged.push((unsafe { OwnedFd::from_raw_fd(s) }, target));
        drop(fd);
    }
    for (fd, target) in &staged {
        crate::process::dup2(fd.as_raw_fd(), *target)?;
    }
    Ok(())
}

/// Descriptors below 64 already claimed by [`take_inherited`] in this process.
static TAKEN: AtomicU64 = AtomicU64::new(0);

/// Claim a descriptor this process inherited at the fixed number `fd` (placed by whoever
/// spawned it, e.g. with [`map_fd_at_spawn`]). Only numbers 3..64 can be claimed, each once;
/// an unopened number is an error.
pub fn take_inherited(fd: RawFd) -> Result<OwnedFd> {
    let bit = match u32::try_from(fd) {
        Ok(n @ 3..=63) => 1u64 << n,
        _ => {
            return Err(JailError::InvalidInput(format!(
                "fd {fd} cannot be claimed"
            )))
        }
    };
    if TAKEN.fetch_or(bit, Ordering::SeqCst) & bit != 0 {
        return Err(JailError::InvalidInput(format!("fd {fd} already claimed")));
    }
    // SAFETY: F_GETFD only queries the descriptor table.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(JailError::last_os("fcntl(F_GETFD) on an inherited fd"));
    }
    // SAFETY: the descriptor is open (checked above) and, by the spawn convention this
    // function documents, owned by nothing else in this process; TAKEN makes sure this
    // wrapper is created at most once per number.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Arrange for `fd` to be open at number `target` (without close-on-exec) in the child
/// `cmd` spawns, and nowhere else: the parent's copy keeps close-on-exec, so concurrent
/// spawns of other children never inherit it. `target` must be 3 or higher.
pub fn map_fd_at_spawn(cmd: &mut std::process::Command, fd: OwnedFd, target: RawFd) -> Result<()> {
    if target < 3 {
        return Err(JailError::InvalidInput(format!(
            "target fd {target} is stdio"
        )));
    }
    let closure = move || {
        let src = fd.as_raw_fd();
        if src == target {
            // SAFETY: async-signal-safe fcntl on a descriptor we own; clears FD_CLOEXEC.
            if unsafe { libc::fcntl(src, libc::F_SETFD, 0) } < 0 {
                return Err(io::Error::last_os_error());
            }
        // SAFETY: async-signal-safe dup2 between two plain numbers; `src` is open (the
        // closure owns it), and dup2 onto `target` yields a copy without FD_CLOEXEC.
        } else if unsafe { libc::dup2(src, target) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    };
    // SAFETY: the closure runs in the forked child before exec and only calls fcntl/dup2,
    // which are async-signal-safe; it allocates nothing and takes no locks.
    unsafe {
        cmd.pre_exec(closure);
    }
    Ok(())
}

/// Like [`map_fd_at_spawn`] for several descriptors at once, safe against a source number
/// colliding with another mapping's target: every source is first duplicated above
/// [`STAGING_FLOOR`], then placed. Targets must be distinct, 3 or higher and below the floor.
pub fn map_fds_at_spawn(cmd: &mut std::process::Command, fds: Vec<(OwnedFd, RawFd)>) -> Result<()> {
    let mut targets: Vec<RawFd> = fds.iter().map(|(_, t)| *t).collect();
    targets.sort_unstable();
    targets.dedup();
    if targets.len() != fds.len() || targets.iter().any(|t| *t < 3 || *t >= STAGING_FLOOR) {
        return Err(JailError::InvalidInput(format!(
            "bad fd targets {targets:?}"
        )));
    }
    let closure = move || {
        let mut staged = [0 as RawFd; 16];
        if fds.len() > staged.len() {
            return Err(io::Error::other("too many descriptors"));
        }
        for (i, (fd, _)) in fds.iter().enumerate() {
            // SAFETY: async-signal-safe fcntl on a descriptor the closure owns.
            let s = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, STAGING_FLOOR) };
            if s < 0 {
                return Err(io::Error::last_os_error());
            }
            staged[i] = s;
        }
        for (i, (_, target)) in fds.iter().enumerate() {
            // SAFETY: async-signal-safe dup2 between plain numbers; the staged copy is open
            // and above every target, so no placement clobbers a later source.
            if unsafe { libc::dup2(staged[i], *target) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    };
    // SAFETY: the closure runs in the forked child before exec and only calls fcntl/dup2,
    // which are async-signal-safe; it allocates nothing and takes no locks.
    unsafe {
        cmd.pre_exec(closure);
    }
    Ok(())
}

/// Staged copies of mapped descriptors live at or above this number until placed.
pub const STAGING_FLOOR: RawFd = 200;

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    use super::*;

    #[test]
    fn a_descriptor_round_trips_and_eof_is_none() {
        let (a, b) = UnixStream::pair().unwrap();
        let (r, w) = std::io::pipe().unwrap();
        send_fd(a.as_fd(), w.as_fd()).unwrap();
        drop(w);
        let got = recv_fd(b.as_fd()).unwrap().unwrap();
        let mut f = std::fs::File::from(got);
        std::io::Write::write_all(&mut f, b"via scm_rights").unwrap();
        drop(f);
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(OwnedFd::from(r)), &mut s).unwrap();
        assert_eq!(s, "via scm_rights");
        drop(a);
        assert!(recv_fd(b.as_fd()).unwrap().is_none());
    }

    #[test]
    fn plain_bytes_are_not_a_descriptor() {
        let (mut a, b) = UnixStream::pair().unwrap();
        std::io::Write::write_all(&mut a, b"x").unwrap();
        assert!(recv_fd(b.as_fd()).is_err());
    }

    #[test]
    fn map_fd_places_the_descriptor_in_the_child_only() {
        let (r, w) = std::io::pipe().unwrap();
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", "echo mapped >&9"]);
        map_fd_at_spawn(&mut cmd, OwnedFd::from(w), 9).unwrap();
        let st = cmd.status().unwrap();
        assert!(st.success());
        drop(cmd);
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(OwnedFd::from(r)), &mut s).unwrap();
        assert_eq!(s, "mapped\n");
        // An unmapped number is not open in a child.
        let st = std::process::Command::new("/bin/sh")
            .args(["-c", "echo x >&9"])
            .status()
            .unwrap();
        assert!(!st.success());
    }

    #[test]
    fn take_inherited_claims_once_and_only_open_numbers() {
        assert!(take_inherited(1).is_err());
        assert!(take_inherited(64).is_err());
        assert!(
            take_inherited(62).is_err(),
            "fd 62 is not open in the test process"
        );
    }
}
