//! The probes `doctor` runs, each in a forked child: every one actually performs the operation
//! the jail relies on, with raw syscalls only (see [`super::child`] for why).

use super::child::{errno, in_grandchild, step, step_int, write_path, Reporter, StepFailure};

fn fail(step: u32, errno: i32) -> StepFailure {
    StepFailure { step, errno }
}

/// The uid/gid the probes map inside their user namespace.
pub(crate) const INSIDE_ID: u32 = 1000;

/// Pre-built uid/gid map lines (built before fork: the child must not allocate).
pub(crate) struct Maps {
    pub uid: Vec<u8>,
    pub gid: Vec<u8>,
}

impl Maps {
    pub(crate) fn new() -> Self {
        // SAFETY: geteuid/getegid cannot fail.
        let (u, g) = unsafe { (libc::geteuid(), libc::getegid()) };
        Maps {
            uid: format!("{INSIDE_ID} {u} 1\n").into_bytes(),
            gid: format!("{INSIDE_ID} {g} 1\n").into_bytes(),
        }
    }
}

pub(crate) const USERNS_STEPS: &[&str] = &[
    "unshare(CLONE_NEWUSER)",
    "write /proc/self/setgroups",
    "write /proc/self/uid_map",
    "write /proc/self/gid_map",
    "getuid() is the mapped id",
];

pub(crate) fn userns(_r: Reporter, maps: &Maps) -> Result<(), StepFailure> {
    // SAFETY: unshare only takes flags.
    step(unsafe { libc::unshare(libc::CLONE_NEWUSER) }.into(), 0)?;
    write_path(b"/proc/self/setgroups\0", b"deny", 1)?;
    write_path(b"/proc/self/uid_map\0", &maps.uid, 2)?;
    write_path(b"/proc/self/gid_map\0", &maps.gid, 3)?;
    // SAFETY: getuid cannot fail.
    if unsafe { libc::getuid() } != INSIDE_ID {
        return Err(fail(4, 0));
    }
    Ok(())
}

pub(crate) const NETNS_STEPS: &[&str] = &[
    "unshare(CLONE_NEWUSER|CLONE_NEWNET)",
    "socket(AF_INET) in the new netns",
    "bring lo up (SIOCSIFFLAGS)",
    "only lo exists (ifindex 1 is lo, 2..=64 do not exist)",
];

fn ifreq_name(req: &mut libc::ifreq, name: &[u8]) {
    for (d, s) in req.ifr_name.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
}

pub(crate) fn netns(_r: Reporter) -> Result<(), StepFailure> {
    step(
        // SAFETY: unshare only takes flags.
        unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) }.into(),
        0,
    )?;
    let fd = step_int(
        // SAFETY: socket only takes integers.
        unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) },
        1,
    )?;
    // SAFETY: ifreq is plain old data; zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    ifreq_name(&mut req, b"lo\0");
    step(
        // SAFETY: the ioctl reads the name and writes the flags inside `req`.
        unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) }.into(),
        2,
    )?;
    // SAFETY: the kernel filled the flags member.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | crate::net::IFF_UP;
    step(
        // SAFETY: the ioctl reads the initialised `req`.
        unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) }.into(),
        2,
    )?;
    for index in 1..=64 {
        // SAFETY: zero is a valid ifreq.
        let mut q: libc::ifreq = unsafe { std::mem::zeroed() };
        q.ifr_ifru.ifru_ifindex = index;
        // SAFETY: SIOCGIFNAME reads the index and writes the name inside `q`.
        let r = unsafe { libc::ioctl(fd, libc::SIOCGIFNAME, &mut q) };
        let lo = q.ifr_name[..3]
            .iter()
            .map(|c| c.cast_unsigned())
            .eq(*b"lo\0");
        let ok = if index == 1 {
            r == 0 && lo
        } else {
            r == -1 && errno() == libc::ENODEV
        };
        if !ok {
            return Err(fail(3, 0));
        }
    }
    Ok(())
}

pub(crate) const PIDNS_STEPS: &[&str] = &[
    "unshare(CLONE_NEWUSER|CLONE_NEWPID)",
    "fork into the new pid namespace",
    "the first child is pid 1",
];

pub(crate) fn pidns(r: Reporter) -> Result<(), StepFailure> {
    step(
        // SAFETY: unshare only takes flags.
        unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) }.into(),
        0,
    )?;
    in_grandchild(r, 1, || {
        // SAFETY: getpid cannot fail.
        if unsafe { libc::getpid() } != 1 {
            return Err(fail(2, 0));
        }
        Ok(())
    })
}

pub(crate) const UTSNS_STEPS: &[&str] = &[
    "unshare(CLONE_NEWUSER|CLONE_NEWUTS)",
    "sethostname in the new uts namespace",
];

pub(crate) fn utsns(_r: Reporter) -> Result<(), StepFailure> {
    step(
        // SAFETY: unshare only takes flags.
        unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWUTS) }.into(),
        0,
    )?;
    let name = b"airlock";
    step(
        // SAFETY: the pointer and length describe `name`, a static byte string.
        unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) }.into(),
        1,
    )?;
    Ok(())
}

pub(crate) const MOUNTNS_STEPS: &[&str] = &[
    "unshare(CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNS)",
    "fork into the new pid namespace",
    "mount --make-rprivate /",
    "mount a fresh proc on /proc (nosuid,nodev,noexec)",
    "/proc/self is pid 1 in the new procfs",
];

pub(crate) fn mountns(r: Reporter) -> Result<(), StepFailure> {
    let flags = libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWNS;
    // SAFETY: unshare only takes flags.
    step(unsafe { libc::unshare(flags) }.into(), 0)?;
    in_grandchild(r, 1, || {
        let root = b"/\0";
        step(
            // SAFETY: valid NUL-terminated strings or null, as mount(2) allows.
            unsafe {
                libc::mount(
                    std::ptr::null(),
                    root.as_ptr().cast(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                )
            }
            .into(),
            2,
        )?;
        let proc_ = b"proc\0";
        let target = b"/proc\0";
        step(
            // SAFETY: valid NUL-terminated strings or null.
            unsafe {
                libc::mount(
                    proc_.as_ptr().cast(),
                    target.as_ptr().cast(),
                    proc_.as_ptr().cast(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                )
            }
            .into(),
            3,
        )?;
        let mut buf = [0u8; 16];
        let link = b"/proc/self\0";
        // SAFETY: readlink writes at most buf.len() bytes into the stack buffer.
        let n = unsafe { libc::readlink(link.as_ptr().cast(), buf.as_mut_ptr().cast(), buf.len()) };
        if n != 1 || buf[0] != b'1' {
            return Err(fail(4, if n == -1 { errno() } else { 0 }));
        }
        Ok(())
    })
}

pub(crate) const SECCOMP_STEPS: &[&str] = &[
    "prctl(PR_SET_NO_NEW_PRIVS)",
    "seccomp(SECCOMP_SET_MODE_FILTER, TSYNC) with the Run profile",
    "socket() is denied with EPERM",
];

pub(crate) fn seccomp(_r: Reporter, filter: &mut [libc::sock_filter]) -> Result<(), StepFailure> {
    step(
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }.into(),
        0,
    )?;
    let Ok(len) = u16::try_from(filter.len()) else {
        return Err(fail(1, libc::E2BIG));
    };
    let prog = libc::sock_fprog {
        len,
        filter: filter.as_mut_ptr(),
    };
    step(
        // SAFETY: `prog` points at `filter`, alive for the call.
        unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_TSYNC,
                &prog as *const libc::sock_fprog,
            )
        },
        1,
    )?;
    // SAFETY: socket only takes integers.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    if s != -1 || errno() != libc::EPERM {
        return Err(fail(2, 0));
    }
    Ok(())
}

pub(crate) const LANDLOCK_STEPS: &[&str] = &[
    "landlock_create_ruleset(read_file|read_dir)",
    "prctl(PR_SET_NO_NEW_PRIVS)",
    "landlock_restrict_self",
    "opening / is denied with EACCES",
];

pub(crate) fn landlock(_r: Reporter) -> Result<(), StepFailure> {
    #[repr(C)]
    struct RulesetAttr {
        handled_access_fs: u64,
    }
    const READ_FILE: u64 = 1 << 2;
    const READ_DIR: u64 = 1 << 3;
    let attr = RulesetAttr {
        handled_access_fs: READ_FILE | READ_DIR,
    };
    let fd = step(
        // SAFETY: `attr` is a valid ABI-1 ruleset attribute of the size we pass.
        unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const RulesetAttr,
                std::mem::size_of::<RulesetAttr>(),
                0u32,
            )
        },
        0,
    )?;
    step(
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }.into(),
        1,
    )?;
    step(
        // SAFETY: restrict_self takes the ruleset fd and flags.
        unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) },
        2,
    )?;
    let root = b"/\0";
    // SAFETY: open with a NUL-terminated path.
    let r = unsafe { libc::open(root.as_ptr().cast(), libc::O_RDONLY | libc::O_DIRECTORY) };
    if r != -1 || errno() != libc::EACCES {
        return Err(fail(3, 0));
    }
    Ok(())
}
