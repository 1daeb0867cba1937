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
        for (d, t, pr) in [
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
        ] {
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
        for n in [Network::None, Network::ProxyClient] {
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
        for n in [Network::None, Network::ProxyClient] {
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
            assert_eq!(socket(&prog, libc::AF_UNIX, libc::SOCK_STREAM, 0), EPERM);
        }
    }
}
