//! Resource limits (soft = hard, so the guest cannot raise them), always with no core dumps.

use crate::sys::check;
use crate::Result;

/// Limits to set; `None` leaves that limit as inherited.
#[derive(Debug, Clone, Default)]
pub struct Rlimits {
    /// `RLIMIT_AS` in bytes: a backstop against runaway allocation.
    pub address_space: Option<u64>,
    /// `RLIMIT_FSIZE` in bytes: the largest file the guest can write.
    pub file_size: Option<u64>,
    /// `RLIMIT_NOFILE`: the number of open fds.
    pub open_files: Option<u64>,
    /// `RLIMIT_NPROC`: processes of this uid in this user namespace (see the crate report).
    pub processes: Option<u64>,
    /// `RLIMIT_CPU` in seconds of CPU time.
    pub cpu_seconds: Option<u64>,
}

fn set(resource: libc::__rlimit_resource_t, value: u64, op: &'static str) -> Result<()> {
    let lim = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: `lim` is a valid rlimit for the duration of the call.
    check(unsafe { libc::setrlimit(resource, &lim) }, op)?;
    Ok(())
}

/// Applies `l`, and always `RLIMIT_CORE = 0`.
pub fn apply(l: &Rlimits) -> Result<()> {
    set(libc::RLIMIT_CORE, 0, "setrlimit(RLIMIT_CORE)")?;
    let table = [
        (l.address_space, libc::RLIMIT_AS, "setrlimit(RLIMIT_AS)"),
        (l.file_size, libc::RLIMIT_FSIZE, "setrlimit(RLIMIT_FSIZE)"),
        (
            l.open_files,
            libc::RLIMIT_NOFILE,
            "setrlimit(RLIMIT_NOFILE)",
        ),
        (l.processes, libc::RLIMIT_NPROC, "setrlimit(RLIMIT_NPROC)"),
        (l.cpu_seconds, libc::RLIMIT_CPU, "setrlimit(RLIMIT_CPU)"),
    ];
    for (value, resource, op) in table {
        if let Some(v) = value {
            set(resource, v, op)?;
        }
    }
    Ok(())
}

/// The current (soft, hard) values of a resource, for verification.
pub fn get(resource: libc::__rlimit_resource_t) -> Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out pointer.
    check(unsafe { libc::getrlimit(resource, &mut lim) }, "getrlimit")?;
    Ok((lim.rlim_cur, lim.rlim_max))
}
