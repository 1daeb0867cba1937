//! seccomp: the Run profile refuses process creation and sockets but allows threads; killed
//! syscalls, the x32 bit and the i386 ABI die by SIGSYS; the Exec profile allows fork + exec.

use super::{assert_killed_by, assert_passed, probe, BOTH};

#[test]
fn run_profile_denies_with_errno_and_allows_threads() {
    for nonroot in BOTH {
        for case in [
            "execve",
            "fork",
            "clone3",
            "clone-newns",
            "socket",
            "threads",
            "tiocsti",
            "personality-query",
        ] {
            assert_passed(&probe(nonroot, &["seccomp", "run", case]));
        }
    }
}

#[test]
fn killed_syscalls_die_by_sigsys() {
    for nonroot in BOTH {
        for case in [
            "ptrace",
            "io_uring",
            "unshare",
            "mount",
            "personality-set",
            "x32",
            "i386",
        ] {
            assert_killed_by(&probe(nonroot, &["seccomp", "run", case]), libc::SIGSYS);
        }
    }
}

#[test]
fn exec_profile_allows_fork_and_exec_but_not_sockets_or_the_kill_list() {
    for nonroot in BOTH {
        assert_passed(&probe(nonroot, &["seccomp", "exec", "exec-works"]));
        assert_passed(&probe(nonroot, &["seccomp", "exec", "socket"]));
        assert_passed(&probe(nonroot, &["seccomp", "exec", "clone-newns"]));
        for case in ["ptrace", "x32", "i386", "unshare"] {
            assert_killed_by(&probe(nonroot, &["seccomp", "exec", case]), libc::SIGSYS);
        }
    }
}

/// A forkable kernel's one door: a clone with exactly the branch flags waits for the
/// listener's holder (denied: EPERM, no child; allowed: a child in seven new namespaces);
/// a near miss and a plain fork never reach it.
#[test]
fn a_branch_clone_waits_for_the_listener_and_near_misses_never_reach_it() {
    for nonroot in BOTH {
        assert_passed(&probe(nonroot, &["seccomp-branch"]));
    }
}

/// The broker's side across processes: it takes the kernel's listener (`pidfd_getfd`),
/// places a channel in the kernel for the branch (`ADDFD`) before letting the clone go on, and
/// a helper of its own makes the branch's procfs from outside (one process: pid 1).
#[test]
fn the_broker_takes_the_listener_hands_the_branch_its_channel_and_mounts_its_proc() {
    for nonroot in BOTH {
        assert_passed(&probe(nonroot, &["seccomp-handover"]));
    }
}

#[test]
fn compiled_bytes_match_the_sock_filter_layout() {
    use airlock_jail::seccomp::{compile, Profile};
    let bytes = compile(Profile::Run).unwrap();
    assert_eq!(bytes.len() % 8, 0);
    // First instruction: BPF_LD|BPF_W|BPF_ABS (0x20) of seccomp_data.arch (offset 4).
    assert_eq!(u16::from_ne_bytes([bytes[0], bytes[1]]), 0x20);
    assert_eq!(
        u32::from_ne_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
        4
    );
    assert_ne!(
        compile(Profile::Run).unwrap(),
        compile(Profile::Exec).unwrap()
    );
}

#[test]
fn install_refuses_without_no_new_privs() {
    // The test process itself never sets no_new_privs.
    if airlock_jail::caps::no_new_privs().unwrap() {
        return;
    }
    let err = airlock_jail::seccomp::install(airlock_jail::seccomp::Profile::Exec).unwrap_err();
    assert!(err.to_string().contains("no_new_privs"), "{err}");
    assert_eq!(airlock_jail::seccomp::current_mode().unwrap(), 0);
}

#[test]
fn memfd_sysv_ipc_and_fast_open_are_refused_while_udp_still_sends() {
    for nonroot in BOTH {
        for profile in ["run", "exec"] {
            assert_passed(&probe(nonroot, &["seccomp-ipc", profile]));
        }
    }
}

#[test]
fn loopback_network_serves_tcp_on_lo_but_makes_no_udp_unix_or_raw_sockets() {
    for nonroot in BOTH {
        for profile in ["run", "exec"] {
            assert_passed(&probe(nonroot, &["seccomp-loopback", profile]));
        }
    }
}
