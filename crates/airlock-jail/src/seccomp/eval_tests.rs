//! The compiled programs, run by a tiny classic-BPF interpreter on synthetic `seccomp_data`:
//! what each network allowance lets through, decided by the exact bytes the kernel gets.
#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "syscall numbers and args are reinterpreted bit for bit, as the kernel does"
)]
use super::bpf::Insn;
use super::*;

/// Evaluate `prog` for syscall `nr` with `args` on x86_64; returns the `SECCOMP_RET_*` value.
fn eval(prog: &[Insn], nr: i64, args: [u64; 6]) -> u32 {
    let mut data = [0u8; 64];
    data[0..4].copy_from_slice(&(nr as u32).to_ne_bytes());
    data[4..8].copy_from_slice(&AUDIT_ARCH_X86_64.to_ne_bytes());
    for (i, a) in args.iter().enumerate() {
        data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
    }
    let (mut pc, mut acc) = (0usize, 0u32);
    loop {
        let i = prog[pc];
        match i.code {
            0x20 => {
                let o = i.k as usize;
                acc = u32::from_ne_bytes(data[o..o + 4].try_into().unwrap());
                pc += 1;
            }
            0x15 | 0x45 => {
                let hit = if i.code == 0x15 {
                    acc == i.k
                } else {
                    acc & i.k != 0
                };
                pc += 1 + usize::from(if hit { i.jt } else { i.jf });
            }
            0x06 => return i.k,
            c => panic!("unexpected opcode {c:#x}"),
        }
    }
}

fn socket(prog: &[Insn], domain: i32, ty: i32, proto: i32) -> u32 {
    eval(
        prog,
        libc::SYS_socket,
        [domain as u64, ty as u64, proto as u64, 0, 0, 0],
    )
}

const EPERM: u32 = RET_ERRNO | libc::EPERM as u32;

/// `socket(2)` arguments of everything that is not a plain TCP socket.
const NOT_TCP: [(i32, i32, i32); 11] = [
    (libc::AF_INET, libc::SOCK_DGRAM, 0),
    (libc::AF_INET6, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0),
    (libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP),
    (libc::AF_INET, libc::SOCK_SEQPACKET, 0),
    (libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_UDP),
    (libc::AF_INET, libc::SOCK_STREAM, 262), // IPPROTO_MPTCP
    (libc::AF_INET, libc::SOCK_STREAM | 0x100, 0),
    (libc::AF_UNIX, libc::SOCK_STREAM, 0),
    (libc::AF_NETLINK, libc::SOCK_RAW, 0),
    (libc::AF_PACKET, libc::SOCK_RAW, 0),
    (libc::AF_VSOCK, libc::SOCK_STREAM, 0),
];

/// The syscalls of a TCP server (and its peers' bookkeeping), with plausible arguments.
const SERVER_CALLS: [(i64, [u64; 6]); 9] = [
    (libc::SYS_bind, [3, 0x1000, 16, 0, 0, 0]),
    (libc::SYS_listen, [3, 128, 0, 0, 0, 0]),
    (libc::SYS_accept, [3, 0x1000, 0x2000, 0, 0, 0]),
    (
        libc::SYS_accept4,
        [3, 0, 0, libc::SOCK_CLOEXEC as u64, 0, 0],
    ),
    (libc::SYS_connect, [4, 0x1000, 16, 0, 0, 0]),
    (libc::SYS_getsockname, [3, 0x1000, 0x2000, 0, 0, 0]),
    (libc::SYS_getpeername, [5, 0x1000, 0x2000, 0, 0, 0]),
    (
        libc::SYS_getsockopt,
        [
            3,
            libc::SOL_SOCKET as u64,
            libc::SO_ERROR as u64,
            0x1000,
            0x2000,
            0,
        ],
    ),
    (libc::SYS_shutdown, [5, libc::SHUT_WR as u64, 0, 0, 0, 0]),
];

#[test]
fn proxy_client_allows_tcp_client_sockets_only() {
    for p in [Profile::Run, Profile::Exec] {
        let prog = assemble_for(p, Network::ProxyClient).unwrap();
        let stream = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
        assert_eq!(socket(&prog, libc::AF_INET, stream, 0), RET_ALLOW, "{p:?}");
        assert_eq!(
            socket(
                &prog,
                libc::AF_INET6,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK,
                libc::IPPROTO_TCP
            ),
            RET_ALLOW
        );
        for (d, t, pr) in NOT_TCP {
            assert_eq!(
                socket(&prog, d, t, pr),
                EPERM,
                "{p:?} socket({d}, {t:#x}, {pr})"
            );
        }
        assert_eq!(
            eval(&prog, libc::SYS_connect, [3, 0, 16, 0, 0, 0]),
            RET_ALLOW
        );
        for nr in [libc::SYS_bind, libc::SYS_listen, libc::SYS_accept4] {
            assert_eq!(eval(&prog, nr, [0; 6]), EPERM, "{p:?} {nr}");
        }
    }
}

#[test]
fn no_network_still_denies_every_socket() {
    for p in [Profile::Run, Profile::Exec] {
        let prog = assemble(p).unwrap();
        assert_eq!(prog, assemble_for(p, Network::None).unwrap());
        assert_eq!(socket(&prog, libc::AF_INET, libc::SOCK_STREAM, 0), EPERM);
        assert_eq!(eval(&prog, libc::SYS_connect, [3, 0, 16, 0, 0, 0]), EPERM);
    }
    // The network allowance changes nothing else: execve stays denied in Run.
    let run = assemble_for(Profile::Run, Network::ProxyClient).unwrap();
    assert_eq!(eval(&run, libc::SYS_execve, [0; 6]), EPERM);
    assert_eq!(eval(&run, libc::SYS_ptrace, [0; 6]), RET_KILL_PROCESS);
}

const ENOSYS: u32 = RET_ERRNO | libc::ENOSYS as u32;

/// Every profile with every network allowance.
fn all_programs() -> Vec<(String, Vec<Insn>)> {
    let mut out = Vec::new();
    for p in [Profile::Run, Profile::Exec] {
        for n in [Network::None, Network::ProxyClient, Network::Loopback] {
            out.push((format!("{p:?}/{n:?}"), assemble_for(p, n).unwrap()));
        }
    }
    out
}

#[test]
fn memfd_and_sysv_ipc_are_enosys_everywhere() {
    let denied = [
        libc::SYS_memfd_create,
        libc::SYS_memfd_secret,
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_shmctl,
        libc::SYS_shmdt,
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semtimedop,
        libc::SYS_semctl,
    ];
    for (name, prog) in all_programs() {
        for nr in denied {
            assert_eq!(eval(&prog, nr, [0; 6]), ENOSYS, "{name} {nr}");
        }
        // Files (where the bounded tmpfs is) and anonymous memory stay available.
        for nr in [libc::SYS_openat, libc::SYS_fallocate, libc::SYS_mmap] {
            assert_eq!(eval(&prog, nr, [0; 6]), RET_ALLOW, "{name} {nr}");
        }
    }
}

/// A send syscall with `flags` in argument `at`.
fn send(prog: &[Insn], nr: i64, at: usize, flags: u64) -> u32 {
    let mut args = [3, 0x1000, 16, 0, 0x2000, 16];
    args[at] = flags;
    eval(prog, nr, args)
}

#[test]
fn fast_open_sends_are_eperm_and_other_sends_pass() {
    let fo = libc::MSG_FASTOPEN as u64;
    let others = [
        0,
        libc::MSG_NOSIGNAL as u64,
        (libc::MSG_DONTWAIT | libc::MSG_MORE) as u64,
        // The kernel reads `unsigned int` flags: the flag in the high word means nothing.
        fo << 32,
    ];
    for (name, prog) in all_programs() {
        for (nr, at) in [
            (libc::SYS_sendto, 3),
            (libc::SYS_sendmsg, 2),
            (libc::SYS_sendmmsg, 3),
        ] {
            assert_eq!(send(&prog, nr, at, fo), EPERM, "{name} {nr}");
            let with_more = fo | libc::MSG_NOSIGNAL as u64;
            assert_eq!(send(&prog, nr, at, with_more), EPERM, "{name} {nr}");
            for f in others {
                assert_eq!(send(&prog, nr, at, f), RET_ALLOW, "{name} {nr} {f:#x}");
            }
        }
        // The flag counts only in the flags argument (sendmsg's 4th is unused).
        assert_eq!(send(&prog, libc::SYS_sendmsg, 3, fo), RET_ALLOW, "{name}");
    }
}

fn setsockopt(prog: &[Insn], level: i32, opt: i32) -> u32 {
    eval(
        prog,
        libc::SYS_setsockopt,
        [3, level as u64, opt as u64, 0x1000, 4, 0],
    )
}

#[test]
fn fast_open_socket_options_are_eperm_and_others_pass() {
    for (name, prog) in all_programs() {
        for opt in [
            libc::SO_SNDBUF,
            libc::SO_RCVBUF,
            libc::SO_SNDBUFFORCE,
            libc::SO_RCVBUFFORCE,
        ] {
            assert_eq!(
                setsockopt(&prog, libc::SOL_SOCKET, opt),
                EPERM,
                "{name} {opt}"
            );
        }
        for opt in [
            libc::TCP_FASTOPEN,
            libc::TCP_FASTOPEN_CONNECT,
            libc::TCP_FASTOPEN_KEY,
            libc::TCP_FASTOPEN_NO_COOKIE,
        ] {
            assert_eq!(
                setsockopt(&prog, libc::IPPROTO_TCP, opt),
                EPERM,
                "{name} {opt}"
            );
        }
        for (level, opt) in [
            (libc::IPPROTO_TCP, libc::TCP_NODELAY),
            (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE),
            (libc::SOL_SOCKET, libc::TCP_FASTOPEN),
            (libc::SOL_SOCKET, libc::SO_KEEPALIVE),
            (libc::IPPROTO_IP, libc::TCP_FASTOPEN_CONNECT),
            (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY),
            (libc::SOL_SOCKET, libc::SO_REUSEADDR),
            (libc::IPPROTO_TCP, libc::SO_SNDBUF),
        ] {
            assert_eq!(
                setsockopt(&prog, level, opt),
                RET_ALLOW,
                "{name} {level} {opt}"
            );
        }
    }
}

fn socketpair(prog: &[Insn], domain: i32, ty: i32, proto: i32) -> u32 {
    eval(
        prog,
        libc::SYS_socketpair,
        [domain as u64, ty as u64, proto as u64, 0, 0, 0],
    )
}

#[test]
fn socketpair_is_a_unix_stream_pair_or_nothing_in_every_profile() {
    for p in [Profile::Run, Profile::Exec] {
        for n in [Network::None, Network::ProxyClient, Network::Loopback] {
            let prog = assemble_for(p, n).unwrap();
            for ty in [
                libc::SOCK_STREAM,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            ] {
                assert_eq!(
                    socketpair(&prog, libc::AF_UNIX, ty, 0),
                    RET_ALLOW,
                    "{p:?} {n:?}"
                );
            }
            for (d, t, pr) in [
                (libc::AF_UNIX, libc::SOCK_DGRAM, 0),
                (libc::AF_UNIX, libc::SOCK_SEQPACKET, 0),
                (libc::AF_UNIX, libc::SOCK_RAW, 0),
                (libc::AF_UNIX, 0, 0),
                (libc::AF_UNIX, libc::SOCK_STREAM | 0x100, 0),
                (libc::AF_UNIX, libc::SOCK_STREAM, 1),
                (libc::AF_INET, libc::SOCK_STREAM, 0),
                (libc::AF_INET6, libc::SOCK_STREAM, 0),
                (libc::AF_NETLINK, libc::SOCK_RAW, 0),
                (libc::AF_UNIX + 0x1_0000, libc::SOCK_STREAM, 0),
            ] {
                assert_eq!(
                    socketpair(&prog, d, t, pr),
                    EPERM,
                    "{p:?} {n:?} socketpair({d}, {t:#x}, {pr})"
                );
            }
            // Servers only on loopback (loopback_allows_a_tcp_listeners_syscalls).
            if n != Network::Loopback {
                for nr in [
                    libc::SYS_bind,
                    libc::SYS_listen,
                    libc::SYS_accept,
                    libc::SYS_accept4,
                ] {
                    assert_eq!(
                        eval(&prog, nr, [3, 0, 16, 0, 0, 0]),
                        EPERM,
                        "{p:?} {n:?} {nr}"
                    );
                }
            }
            assert_eq!(socket(&prog, libc::AF_UNIX, libc::SOCK_STREAM, 0), EPERM);
        }
    }
}

#[test]
fn loopback_allows_a_tcp_listeners_syscalls() {
    for p in [Profile::Run, Profile::Exec] {
        let prog = assemble_for(p, Network::Loopback).unwrap();
        for (d, t, pr) in [
            (libc::AF_INET, libc::SOCK_STREAM, 0),
            (libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0),
            (
                libc::AF_INET6,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::IPPROTO_TCP,
            ),
        ] {
            assert_eq!(
                socket(&prog, d, t, pr),
                RET_ALLOW,
                "{p:?} socket({d}, {t:#x}, {pr})"
            );
        }
        for (nr, args) in SERVER_CALLS {
            assert_eq!(eval(&prog, nr, args), RET_ALLOW, "{p:?} {nr}");
        }
        assert_eq!(
            setsockopt(&prog, libc::SOL_SOCKET, libc::SO_REUSEADDR),
            RET_ALLOW
        );
        // The Fast Open and buffer-size denials hold for a server too.
        assert_eq!(
            setsockopt(&prog, libc::IPPROTO_TCP, libc::TCP_FASTOPEN),
            EPERM
        );
        assert_eq!(setsockopt(&prog, libc::SOL_SOCKET, libc::SO_RCVBUF), EPERM);
        let fo = libc::MSG_FASTOPEN as u64;
        assert_eq!(send(&prog, libc::SYS_sendto, 3, fo), EPERM, "{p:?}");
    }
}

#[test]
fn loopback_still_denies_udp_raw_unix_netlink_and_packet_sockets() {
    for p in [Profile::Run, Profile::Exec] {
        let prog = assemble_for(p, Network::Loopback).unwrap();
        for (d, t, pr) in NOT_TCP {
            assert_eq!(
                socket(&prog, d, t, pr),
                EPERM,
                "{p:?} socket({d}, {t:#x}, {pr})"
            );
        }
    }
    // Everything else is the profile's: execve still denied in Run, ptrace still kills.
    let run = assemble_for(Profile::Run, Network::Loopback).unwrap();
    assert_eq!(eval(&run, libc::SYS_execve, [0; 6]), EPERM);
    assert_eq!(eval(&run, libc::SYS_ptrace, [0; 6]), RET_KILL_PROCESS);
    assert_eq!(eval(&run, libc::SYS_unshare, [0; 6]), RET_KILL_PROCESS);
}

#[test]
fn none_and_proxy_client_still_deny_servers() {
    for p in [Profile::Run, Profile::Exec] {
        let none = assemble_for(p, Network::None).unwrap();
        let proxy = assemble_for(p, Network::ProxyClient).unwrap();
        for (nr, args) in SERVER_CALLS {
            let (want_none, want_proxy) = match nr {
                libc::SYS_bind | libc::SYS_listen | libc::SYS_accept | libc::SYS_accept4 => {
                    (EPERM, EPERM)
                }
                libc::SYS_connect => (EPERM, RET_ALLOW),
                // Bookkeeping on the sockets a guest already holds (the inherited one).
                _ => (RET_ALLOW, RET_ALLOW),
            };
            assert_eq!(eval(&none, nr, args), want_none, "{p:?}/None {nr}");
            assert_eq!(eval(&proxy, nr, args), want_proxy, "{p:?}/ProxyClient {nr}");
        }
        // The rule lists differ only in the network rules.
        let loopback = rules_for(p, Network::Loopback);
        let proxy_rules = rules_for(p, Network::ProxyClient);
        let servers = ["SYS_bind", "SYS_listen", "SYS_accept", "SYS_accept4"];
        let without: Vec<_> = proxy_rules
            .iter()
            .filter(|r| !servers.contains(&r.name))
            .map(|r| (r.nr, r.action))
            .collect();
        let lo: Vec<_> = loopback.iter().map(|r| (r.nr, r.action)).collect();
        assert_eq!(lo, without, "{p:?}");
    }
}

fn ioctl(prog: &[Insn], request: u64) -> u32 {
    eval(prog, libc::SYS_ioctl, [0, request, 0x1000, 0, 0, 0])
}

#[test]
fn tty_injection_ioctls_are_eperm_everywhere_and_others_pass() {
    for (name, prog) in all_programs() {
        for req in [
            libc::TIOCSTI,
            libc::TIOCLINUX,
            libc::TIOCSETD,
            libc::TIOCCONS,
        ] {
            assert_eq!(ioctl(&prog, req), EPERM, "{name} {req:#x}");
            // The kernel reads an `unsigned int` request: high bits change nothing.
            assert_eq!(ioctl(&prog, req | (1 << 32)), EPERM, "{name} {req:#x}");
        }
        for req in [
            libc::TIOCSCTTY,
            libc::TIOCGWINSZ,
            libc::TIOCSWINSZ,
            libc::TIOCGPGRP,
            libc::TIOCSPGRP,
            libc::TIOCGETD,
            libc::TCGETS,
            libc::FIONREAD,
        ] {
            assert_eq!(ioctl(&prog, req), RET_ALLOW, "{name} {req:#x}");
        }
    }
}

/// Calls that name a process work on the caller (pid 0, the "a process" selector) and are
/// `EPERM` for any other pid, process group or user, in every profile.
#[test]
fn limits_and_scheduling_of_another_process_are_eperm_everywhere() {
    const PRIO_PGRP: u64 = 1;
    const IOPRIO_WHO_PROCESS: u64 = 1;
    const IOPRIO_WHO_USER: u64 = 3;
    for (name, prog) in all_programs() {
        for nr in [
            libc::SYS_prlimit64,
            libc::SYS_sched_setscheduler,
            libc::SYS_sched_setparam,
            libc::SYS_sched_setattr,
        ] {
            assert_eq!(eval(&prog, nr, [0; 6]), RET_ALLOW, "{name} {nr} self");
            assert_eq!(
                eval(&prog, nr, [1, 0, 0, 0, 0, 0]),
                EPERM,
                "{name} {nr} pid 1"
            );
            assert_eq!(
                eval(&prog, nr, [1 << 32, 0, 0, 0, 0, 0]),
                RET_ALLOW,
                "{name} {nr} high word"
            );
        }
        let setprio = |which, who| eval(&prog, libc::SYS_setpriority, [which, who, 19, 0, 0, 0]);
        assert_eq!(setprio(0, 0), RET_ALLOW, "{name} own priority");
        assert_eq!(setprio(0, 1), EPERM, "{name} pid 1's priority");
        assert_eq!(setprio(PRIO_PGRP, 0), EPERM, "{name} own group's priority");
        let ioprio = |which, who| eval(&prog, libc::SYS_ioprio_set, [which, who, 0, 0, 0, 0]);
        assert_eq!(
            ioprio(IOPRIO_WHO_PROCESS, 0),
            RET_ALLOW,
            "{name} own io priority"
        );
        assert_eq!(
            ioprio(IOPRIO_WHO_PROCESS, 1),
            EPERM,
            "{name} pid 1's io priority"
        );
        assert_eq!(
            ioprio(IOPRIO_WHO_USER, 0),
            EPERM,
            "{name} the user's io priority"
        );
    }
}

fn clone(prog: &[Insn], flags: u64) -> u32 {
    eval(prog, libc::SYS_clone, [flags, 0, 0, 0, 0, 0])
}

/// The flags glibc's `pthread_create` passes to `clone`.
const THREAD_FLAGS: u64 = (libc::CLONE_VM
    | libc::CLONE_FS
    | libc::CLONE_FILES
    | libc::CLONE_SIGHAND
    | libc::CLONE_THREAD
    | libc::CLONE_SYSVSEM
    | libc::CLONE_SETTLS
    | libc::CLONE_PARENT_SETTID
    | libc::CLONE_CHILD_CLEARTID) as u64;

#[test]
fn a_forkable_kernel_asks_the_broker_only_for_exactly_a_branch_clone() {
    for n in [Network::None, Network::ProxyClient, Network::Loopback] {
        let prog = assemble_rules(&rules_forkable(n)).unwrap();
        let branch = u64::from(BRANCH_CLONE_FLAGS);
        assert_eq!(clone(&prog, branch), RET_USER_NOTIF, "{n:?}");
        // Only the low word counts (the kernel reads no more of clone's flags).
        assert_eq!(clone(&prog, branch | (1 << 40)), RET_USER_NOTIF, "{n:?}");
        assert_eq!(clone(&prog, THREAD_FLAGS), RET_ALLOW, "{n:?}");
        // A plain process, a vfork-like one, and every near miss of the branch flags.
        let sigchld = libc::SIGCHLD as u64;
        let mut refused = vec![
            sigchld,
            (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | sigchld,
        ];
        // A namespace flag missing, one flag more, another exit signal.
        refused.extend((0..32).map(|bit| branch ^ (1 << bit)));
        refused.push(THREAD_FLAGS | libc::CLONE_NEWUSER as u64);
        for flags in refused {
            assert_eq!(clone(&prog, flags), EPERM, "{n:?} {flags:#x}");
        }
        // Everything else is the Run profile's: processes and unshare stay refused.
        let run = assemble_for(Profile::Run, n).unwrap();
        for nr in [
            libc::SYS_fork,
            libc::SYS_vfork,
            libc::SYS_unshare,
            libc::SYS_setns,
        ] {
            assert_eq!(eval(&prog, nr, [0; 6]), eval(&run, nr, [0; 6]), "{nr}");
        }
        assert_eq!(
            clone(&run, branch),
            EPERM,
            "the plain Run profile never asks"
        );
        // kill: a pid, never a process group (0, -pgrp) or everyone (-1).
        let kill = |pid: i64| eval(&prog, libc::SYS_kill, [pid as u64, 9, 0, 0, 0, 0]);
        assert_eq!(kill(1), RET_ALLOW);
        assert_eq!(kill(4242), RET_ALLOW);
        for pid in [0, -1, -4242, i64::from(i32::MIN)] {
            assert_eq!(kill(pid), EPERM, "kill({pid})");
        }
    }
}
