//! seccomp: two hand-assembled classic-BPF profiles, compiled from the reviewed table in
//! [`policy`].
//!
//! Hand-rolled rather than `seccompiler` so the first instructions are exactly the checks we
//! want, in the order we want: architecture (anything but `AUDIT_ARCH_X86_64`, i.e. i386 via
//! `int 0x80`, kills the process), then the x32 bit (kills), then one compare per rule. The
//! program is ~200 instructions, far below the kernel's 4096 limit.
//!
//! [`compile`] gives the raw `struct sock_filter` array for a guest that installs the Run
//! profile itself (after interpreter start-up); [`install`] installs a profile here.

mod bpf;
pub mod notify;
pub mod policy;
mod profile;

use bpf::{jeq, jset, load, off_arg_lo, ret, Insn, OFF_ARCH, OFF_NR};
pub use policy::{rules, rules_for, rules_forkable, Action, Rule};
pub use profile::{Network, Profile};

use crate::sys::check;
use crate::{JailError, Result};

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_USER_NOTIF: u32 = libc::SECCOMP_RET_USER_NOTIF;
const BPF_MAXINSNS: usize = 4096;
/// The tty ioctls every profile refuses (asm-generic/ioctls.h), as the 32-bit request the
/// kernel compares: [`Action::DenyTtyInjection`] says why each.
const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;
const TIOCSETD: u32 = 0x5423;
const TIOCCONS: u32 = 0x541D;

/// `MSG_FASTOPEN` in a send's flags (an `unsigned int` in the kernel).
const MSG_FASTOPEN: u32 = libc::MSG_FASTOPEN as u32;
/// The `IPPROTO_TCP` socket options of TCP Fast Open (linux/tcp.h).
const TCP_FASTOPEN_OPTS: [u32; 4] = [
    libc::TCP_FASTOPEN as u32,
    libc::TCP_FASTOPEN_CONNECT as u32,
    libc::TCP_FASTOPEN_KEY as u32,
    libc::TCP_FASTOPEN_NO_COOKIE as u32,
];

/// The `SOL_SOCKET` options that size a socket's buffers (socket(7)): queued bytes are kernel
/// memory in no RSS and, without a memory cgroup, in no per-run bound.
const SOCKET_BUFFER_OPTS: [u32; 4] = [
    libc::SO_SNDBUF as u32,
    libc::SO_RCVBUF as u32,
    libc::SO_SNDBUFFORCE as u32,
    libc::SO_RCVBUFFORCE as u32,
];

/// `socket(2)` type bits other than the base type that a TCP client may pass.
const SOCK_TYPE_FLAGS: u32 = (libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as u32;

/// Every `CLONE_NEW*` flag `clone(2)` can carry (not `CLONE_NEWTIME`, which overlaps the
/// exit-signal byte and is clone3-only).
const CLONE_NEW_MASK: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32;

/// The flags of the one `clone` a forkable kernel may ask the broker for: a child in new
/// user, mount, pid, net, ipc, uts and cgroup namespaces that signals `SIGCHLD` when it ends;
/// the low word of the syscall's first argument, all the kernel reads of it.
pub const BRANCH_CLONE_FLAGS: u32 = CLONE_NEW_MASK | libc::SIGCHLD as u32;

const fn errno(e: i32) -> u32 {
    RET_ERRNO | (e.cast_unsigned() & 0xffff)
}

/// The instructions that run when the syscall number matched `action`'s rule. Every block
/// ends in a `ret`, so the accumulator it clobbers is never reused.
fn action_block(action: Action) -> Vec<Insn> {
    let eperm = errno(libc::EPERM);
    match action {
        Action::Kill => vec![ret(RET_KILL_PROCESS)],
        Action::Errno(e) => vec![ret(errno(e))],
        Action::CloneThreadsOnly => vec![
            load(off_arg_lo(0)),
            jset(CLONE_NEW_MASK, 2, 0),
            jset(libc::CLONE_THREAD as u32, 0, 1),
            ret(RET_ALLOW),
            ret(eperm),
        ],
        // Exactly the branch flags (index 2) → the listener decides; any other namespace flag
        // → EPERM (index 6); threads are allowed (index 5), processes are not.
        Action::CloneThreadsOrBranch => vec![
            load(off_arg_lo(0)),
            jeq(BRANCH_CLONE_FLAGS, 0, 1),
            ret(RET_USER_NOTIF),
            jset(CLONE_NEW_MASK, 2, 0),
            jset(libc::CLONE_THREAD as u32, 0, 1),
            ret(RET_ALLOW),
            ret(eperm),
        ],
        // pid_t is an `int`: negative (index 4) or zero (index 4) is EPERM.
        Action::PositivePidOnly => vec![
            load(off_arg_lo(0)),
            jset(0x8000_0000, 2, 0),
            jeq(0, 1, 0),
            ret(RET_ALLOW),
            ret(eperm),
        ],
        Action::CloneNoNamespaces => {
            vec![
                load(off_arg_lo(0)),
                jset(CLONE_NEW_MASK, 0, 1),
                ret(eperm),
                ret(RET_ALLOW),
            ]
        }
        // ioctl's request is an `unsigned int` in the kernel: the low word is all that counts.
        // Each denied request jumps to the EPERM (index 5); the last one falls through to allow.
        Action::DenyTtyInjection => vec![
            load(off_arg_lo(1)),
            jeq(TIOCSTI, 3, 0),
            jeq(TIOCLINUX, 2, 0),
            jeq(TIOCSETD, 1, 0),
            jeq(TIOCCONS, 0, 1),
            ret(eperm),
            ret(RET_ALLOW),
        ],
        // socket(domain, type, protocol), all `int` in the kernel: AF_INET/AF_INET6, a base
        // type of exactly SOCK_STREAM (low nibble 1) plus only NONBLOCK/CLOEXEC, protocol 0
        // or IPPROTO_TCP. Anything else is EPERM (index 11).
        Action::TcpClientSocket => vec![
            load(off_arg_lo(0)),
            jeq(libc::AF_INET as u32, 1, 0),
            jeq(libc::AF_INET6 as u32, 0, 8),
            load(off_arg_lo(1)),
            jset(!(0xf | SOCK_TYPE_FLAGS), 6, 0),
            jset(0xe, 5, 0),
            jset(0x1, 0, 4),
            load(off_arg_lo(2)),
            jeq(0, 1, 0),
            jeq(libc::IPPROTO_TCP as u32, 0, 1),
            ret(RET_ALLOW),
            ret(eperm),
        ],
        // The flags of sendto/sendmsg/sendmmsg are an `unsigned int`: test the one bit.
        Action::NoFastOpenSend { flags_arg } => vec![
            load(off_arg_lo(flags_arg)),
            jset(MSG_FASTOPEN, 0, 1),
            ret(eperm),
            ret(RET_ALLOW),
        ],
        // setsockopt(fd, level, optname, ..): level and optname are `int`. IPPROTO_TCP: the
        // Fast Open options are EPERM (index 13); SOL_SOCKET: the buffer sizes are EPERM; every
        // other level and option is allowed (index 14).
        Action::NoFastOpenSockopt => vec![
            load(off_arg_lo(1)),
            jeq(libc::IPPROTO_TCP as u32, 0, 5),
            load(off_arg_lo(2)),
            jeq(TCP_FASTOPEN_OPTS[0], 9, 0),
            jeq(TCP_FASTOPEN_OPTS[1], 8, 0),
            jeq(TCP_FASTOPEN_OPTS[2], 7, 0),
            jeq(TCP_FASTOPEN_OPTS[3], 6, 7),
            jeq(libc::SOL_SOCKET as u32, 0, 6),
            load(off_arg_lo(2)),
            jeq(SOCKET_BUFFER_OPTS[0], 3, 0),
            jeq(SOCKET_BUFFER_OPTS[1], 2, 0),
            jeq(SOCKET_BUFFER_OPTS[2], 1, 0),
            jeq(SOCKET_BUFFER_OPTS[3], 0, 1),
            ret(eperm),
            ret(RET_ALLOW),
        ],
        // socketpair(domain, type, protocol, sv), all `int`: AF_UNIX, a base type of exactly
        // SOCK_STREAM (low nibble 1) plus only NONBLOCK/CLOEXEC, protocol 0. Anything else is
        // EPERM (index 9).
        Action::UnixStreamPair => vec![
            load(off_arg_lo(0)),
            jeq(libc::AF_UNIX as u32, 0, 7),
            load(off_arg_lo(1)),
            jset(!(0xf | SOCK_TYPE_FLAGS), 5, 0),
            jset(0xe, 4, 0),
            jset(0x1, 0, 3),
            load(off_arg_lo(2)),
            jeq(0, 0, 1),
            ret(RET_ALLOW),
            ret(eperm),
        ],
        // pid_t and the selectors are `int`: the low word is all that counts. EPERM is the
        // last instruction, allow the one before it.
        Action::OwnProcessOnly { pid_arg, which } => {
            let mut block = Vec::new();
            if let Some((arg, value)) = which {
                block.push(load(off_arg_lo(arg)));
                block.push(jeq(value, 0, 3));
            }
            block.extend([
                load(off_arg_lo(pid_arg)),
                jeq(0, 0, 1),
                ret(RET_ALLOW),
                ret(eperm),
            ]);
            block
        }
        // personality's argument is an `unsigned int` in the kernel.
        Action::PersonalityQueryOnly => vec![
            load(off_arg_lo(0)),
            jeq(0, 1, 0),
            jeq(0xffff_ffff, 0, 1),
            ret(RET_ALLOW),
            ret(RET_KILL_PROCESS),
        ],
    }
}

fn assemble(p: Profile) -> Result<Vec<Insn>> {
    assemble_for(p, Network::None)
}

fn assemble_for(p: Profile, n: Network) -> Result<Vec<Insn>> {
    assemble_rules(&rules_for(p, n))
}

fn assemble_rules(rules: &[Rule]) -> Result<Vec<Insn>> {
    if !cfg!(target_arch = "x86_64") {
        return Err(JailError::Unsupported {
            what: "seccomp profiles for this architecture".into(),
            fix: "run on x86_64 (only that syscall table is reviewed)".into(),
        });
    }
    let mut prog = vec![
        load(OFF_ARCH),
        jeq(AUDIT_ARCH_X86_64, 1, 0),
        ret(RET_KILL_PROCESS),
        load(OFF_NR),
        jset(X32_SYSCALL_BIT, 0, 1),
        ret(RET_KILL_PROCESS),
    ];
    for rule in rules {
        let block = action_block(rule.action);
        let skip = u8::try_from(block.len())
            .map_err(|_| JailError::InvalidInput(format!("rule {} too long", rule.name)))?;
        let nr = u32::try_from(rule.nr)
            .map_err(|_| JailError::InvalidInput(format!("bad syscall number {}", rule.nr)))?;
        prog.push(jeq(nr, 0, skip));
        prog.extend(block);
    }
    prog.push(ret(RET_ALLOW));
    if prog.len() > BPF_MAXINSNS {
        return Err(JailError::InvalidInput("seccomp program too long".into()));
    }
    Ok(prog)
}

/// The profile as a raw `struct sock_filter` array (8 bytes each, native endian), for
/// `seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &sock_fprog)`.
pub fn compile(p: Profile) -> Result<Vec<u8>> {
    Ok(bpf::to_bytes(&assemble(p)?))
}

/// [`compile`] with a network allowance.
pub fn compile_for(p: Profile, n: Network) -> Result<Vec<u8>> {
    Ok(bpf::to_bytes(&assemble_for(p, n)?))
}

/// The Run profile of a kernel that may be forked copy-on-write ([`rules_forkable`]), as
/// [`compile_for`] gives it. Its installer must ask for the filter's listener
/// (`SECCOMP_FILTER_FLAG_NEW_LISTENER`, with `TSYNC_ESRCH` beside `TSYNC`) and hand it to the
/// broker before any untrusted code runs: a branch's clone waits on it.
pub fn compile_forkable(n: Network) -> Result<Vec<u8>> {
    Ok(bpf::to_bytes(&assemble_rules(&rules_forkable(n))?))
}

/// Installs the profile on every thread of this process (`TSYNC`). Requires `no_new_privs`.
pub fn install(p: Profile) -> Result<()> {
    install_for(p, Network::None)
}

/// [`install`] with a network allowance.
pub fn install_for(p: Profile, n: Network) -> Result<()> {
    install_program(&assemble_for(p, n)?, libc::SECCOMP_FILTER_FLAG_TSYNC).map(|_| ())
}

/// Installs `prog` on this process with `flags`; the syscall's non-negative return (a
/// listener's fd when `flags` asks for one). Requires `no_new_privs`.
fn install_program(prog: &[Insn], flags: libc::c_ulong) -> Result<libc::c_long> {
    if !crate::caps::no_new_privs()? {
        return Err(JailError::InvalidInput(
            "seccomp install needs no_new_privs set first".into(),
        ));
    }
    let mut filter: Vec<libc::sock_filter> = prog
        .iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect();
    let len = u16::try_from(filter.len())
        .map_err(|_| JailError::InvalidInput("seccomp program too long".into()))?;
    let prog = libc::sock_fprog {
        len,
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: `prog` points at `filter`, which lives until after the call; the kernel copies it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &prog as *const libc::sock_fprog,
        )
    };
    let tsync = flags & libc::SECCOMP_FILTER_FLAG_TSYNC != 0;
    let listener = flags & libc::SECCOMP_FILTER_FLAG_NEW_LISTENER != 0;
    match r {
        -1 => Err(JailError::last_os("seccomp(SECCOMP_SET_MODE_FILTER)")),
        0 => Ok(0),
        tid if tsync && !listener => Err(JailError::InvalidInput(format!(
            "seccomp tsync failed on thread {tid}"
        ))),
        fd => Ok(fd),
    }
}

/// `PR_GET_SECCOMP`: 0 disabled, 1 strict, 2 filter.
pub fn current_mode() -> Result<u32> {
    let r = check(
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) },
        "prctl(PR_GET_SECCOMP)",
    )?;
    Ok(r.unsigned_abs())
}

#[cfg(test)]
mod eval_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_constants_match_libc() {
        assert_eq!(u64::from(TIOCSTI), libc::TIOCSTI);
        assert_eq!(u64::from(TIOCLINUX), libc::TIOCLINUX);
        assert_eq!(u64::from(TIOCSETD), libc::TIOCSETD);
        assert_eq!(u64::from(TIOCCONS), libc::TIOCCONS);
    }

    const NETWORKS: [Network; 3] = [Network::None, Network::ProxyClient, Network::Loopback];

    #[test]
    fn no_duplicate_rules_in_a_profile() {
        for p in [Profile::Run, Profile::Exec] {
            for net in NETWORKS {
                let mut nrs: Vec<_> = rules_for(p, net).iter().map(|r| r.nr).collect();
                let n = nrs.len();
                nrs.sort_unstable();
                nrs.dedup();
                assert_eq!(n, nrs.len(), "{p:?}/{net:?} has a redundant rule");
            }
        }
    }

    #[test]
    fn every_rule_has_a_reason() {
        for p in [Profile::Run, Profile::Exec] {
            for net in NETWORKS {
                for r in rules_for(p, net) {
                    assert!(!r.reason.is_empty(), "{} has no reason", r.name);
                }
            }
        }
    }

    #[test]
    fn starts_with_arch_and_x32_checks() {
        let prog = assemble(Profile::Run).unwrap();
        assert_eq!(prog[0], load(OFF_ARCH));
        assert_eq!(prog[1].k, AUDIT_ARCH_X86_64);
        assert_eq!(prog[2], ret(RET_KILL_PROCESS));
        assert_eq!(prog[4].k, X32_SYSCALL_BIT);
        assert_eq!(prog[5], ret(RET_KILL_PROCESS));
        assert_eq!(prog.last(), Some(&ret(RET_ALLOW)));
    }

    #[test]
    fn jumps_stay_inside_the_program() {
        for p in [Profile::Run, Profile::Exec] {
            for net in NETWORKS {
                let prog = assemble_for(p, net).unwrap();
                for (pc, i) in prog.iter().enumerate() {
                    if i.code & 0x07 == 0x05 {
                        assert!(
                            pc + 1 + usize::from(i.jt.max(i.jf)) < prog.len(),
                            "{p:?}/{net:?} pc {pc}"
                        );
                    }
                }
                assert_eq!(compile_for(p, net).unwrap().len(), prog.len() * 8);
            }
        }
    }

    #[test]
    fn profiles_differ_only_where_documented() {
        let run: Vec<_> = rules(Profile::Run).iter().map(|r| r.name).collect();
        let exec: Vec<_> = rules(Profile::Exec).iter().map(|r| r.name).collect();
        assert!(run.contains(&"SYS_execve") && !exec.contains(&"SYS_execve"));
        assert!(run.contains(&"SYS_socket") && exec.contains(&"SYS_socket"));
        assert!(exec.contains(&"SYS_ptrace") && exec.contains(&"SYS_io_uring_setup"));
    }
}
