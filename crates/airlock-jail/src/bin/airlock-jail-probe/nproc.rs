//! `nproc LIMIT HOST_PROCS USERNS(0|1)`: how far a fork bomb gets under `RLIMIT_NPROC=LIMIT`
//! when the same host user already runs HOST_PROCS other processes, optionally from inside a
//! fresh user namespace, and whether a host-side sibling can still fork meanwhile.
//!
//! Prints `bomb_forks=N cap=C witness_forked=BOOL`; exits 0 (it measures, the test judges).

use airlock_jail::{rlimits, userns};

/// Upper bound on bomb forks: reaching it means "not bounded by the limit".
const CAP: usize = 300;

fn fork_sleeper() -> Option<i32> {
    // SAFETY: single-threaded; the child only pauses until it is killed.
    match unsafe { libc::fork() } {
        -1 => None,
        0 => loop {
            // SAFETY: pause takes nothing.
            unsafe { libc::pause() };
        },
        pid => Some(pid),
    }
}

fn kill_all(pids: &[i32]) {
    for &p in pids {
        // SAFETY: kill/waitpid on our own children.
        unsafe {
            libc::kill(p, libc::SIGKILL);
            libc::waitpid(p, std::ptr::null_mut(), 0);
        }
    }
}

pub(crate) fn run(args: &[String]) -> Result<bool, String> {
    let [limit, host, use_ns] = args else {
        return Err("nproc LIMIT HOST_PROCS USERNS".into());
    };
    let limit: u64 = limit.parse().map_err(|_| "bad LIMIT")?;
    let host: usize = host.parse().map_err(|_| "bad HOST_PROCS")?;
    let use_ns = use_ns == "1";

    let host_pids: Vec<i32> = (0..host).filter_map(|_| fork_sleeper()).collect();
    // A host-side witness (same uid, no user namespace, inherited limits) that tries one fork
    // once the bomb is at its peak, and reports through a pipe.
    let (mut go, mut done) = ([0; 2], [0; 2]);
    // SAFETY: both arrays have room for two fds.
    unsafe {
        libc::pipe(go.as_mut_ptr());
        libc::pipe(done.as_mut_ptr());
    }
    // SAFETY: single-threaded fork; the child uses only raw syscalls.
    let witness = unsafe { libc::fork() };
    if witness == 0 {
        let mut b = [0u8; 1];
        // SAFETY: raw syscalls on our pipes; the grandchild exits at once.
        unsafe {
            libc::read(go[0], b.as_mut_ptr().cast(), 1);
            let p = libc::fork();
            if p == 0 {
                libc::_exit(0);
            }
            let ok = [u8::from(p > 0)];
            libc::write(done[1], ok.as_ptr().cast(), 1);
            libc::_exit(0);
        }
    }

    if use_ns {
        userns::enter_user_namespace(1000, 1000).map_err(|e| e.to_string())?;
    }
    rlimits::apply(&rlimits::Rlimits {
        processes: Some(limit),
        ..Default::default()
    })
    .map_err(|e| e.to_string())?;
    let mut bomb = Vec::new();
    let mut last_err = 0;
    while bomb.len() < CAP {
        match fork_sleeper() {
            Some(p) => bomb.push(p),
            None => {
                last_err = crate::report::errno();
                break;
            }
        }
    }
    let mut w = [0u8; 1];
    // SAFETY: raw syscalls on our pipes.
    unsafe {
        libc::write(go[1], b"g".as_ptr().cast(), 1);
        libc::read(done[0], w.as_mut_ptr().cast(), 1);
        libc::waitpid(witness, std::ptr::null_mut(), 0);
    }
    println!(
        "bomb_forks={} cap={CAP} stop_errno={last_err} witness_forked={} host_procs={}",
        bomb.len(),
        w[0] == 1,
        host_pids.len()
    );
    kill_all(&bomb);
    kill_all(&host_pids);
    Ok(true)
}
