//! A stopped process's registers and memory, read from outside.
use std::os::fd::AsFd;

use crate::{JailError, Result};

/// The registers a restored process resumes with, in `struct sigcontext`'s order: r8–r15,
/// rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, eflags; and the thread pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registers {
    /// The general registers, `rip` and `eflags`, sigcontext order.
    pub gpr: [u64; 18],
    /// `fs_base`: the thread pointer.
    pub fs_base: u64,
}

/// How long a seized process gets to stop for the tracer before it is killed.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// `-ERESTARTSYS`, `-ERESTARTNOINTR`, `-ERESTARTNOHAND`: a system call the stop interrupted,
/// which the kernel would restart.
const RESTARTABLE: [i64; 3] = [-512, -513, -514];

/// The registers of `pid`, which must be stopped (group-stop: a broker's `SIGSTOP`) and
/// stays so. A process that does not stop for the tracer within two seconds is killed (and
/// its error's errno is `ETIMEDOUT`). The calling thread seizes it, interrupts it, reads and lets it go; every step
/// happens on this one thread, as ptrace requires. A system call the stop interrupted is
/// set to run again (its `rip` back over the `syscall` instruction, `rax` its number), so the
/// restored process re-enters the call it was blocked in.
pub fn registers_of_stopped(pid: i32) -> Result<Registers> {
    if pid <= 0 {
        return Err(JailError::InvalidInput(format!("bad pid {pid}")));
    }
    let pidfd = crate::pidfd::open(pid)?;
    // SAFETY: integer arguments only.
    let seized = unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0usize, 0usize) };
    crate::sys::check_long(seized, "ptrace seize")?;
    let read = interrupt_and_read(pid);
    // SAFETY: integer arguments only; a detach of a tracee we seized.
    unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, 0usize, 0usize) };
    let regs = read?;
    // The pid still names the process the pidfd was opened on.
    crate::pidfd::send_signal(pidfd.as_fd(), 0)?;
    let r = &regs;
    let (mut rax, mut rip) = (r.rax, r.rip);
    if i64::try_from(r.orig_rax).is_ok_and(|n| n >= 0) && RESTARTABLE.contains(&(r.rax as i64)) {
        rax = r.orig_rax;
        rip = rip.wrapping_sub(2);
    }
    Ok(Registers {
        gpr: [
            r.r8, r.r9, r.r10, r.r11, r.r12, r.r13, r.r14, r.r15, r.rdi, r.rsi, r.rbp, r.rbx,
            r.rdx, rax, r.rcx, r.rsp, rip, r.eflags,
        ],
        fs_base: r.fs_base,
    })
}

fn interrupt_and_read(pid: i32) -> Result<libc::user_regs_struct> {
    // SAFETY: integer arguments only.
    let interrupted = unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, pid, 0usize, 0usize) };
    crate::sys::check_long(interrupted, "ptrace interrupt")?;
    let mut status = 0;
    let until = std::time::Instant::now() + STOP_WAIT;
    let waited = loop {
        // SAFETY: a valid out-pointer; the tracee is ours to wait for while seized.
        let w = unsafe { libc::waitpid(pid, &mut status, libc::__WALL | libc::WNOHANG) };
        if w != 0 || std::time::Instant::now() > until {
            break w;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    if waited == 0 {
        // It would not stop (a thread parked where a stop cannot reach it): it is ended, and
        // reaped from this tracer's side, so nothing stays attached to it.
        // SAFETY: integer arguments only; SIGKILL ends even a traced process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        // SAFETY: as above; it is dying, so this returns.
        unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        return Err(JailError::Sys {
            op: "ptrace stop",
            source: std::io::Error::from_raw_os_error(libc::ETIMEDOUT),
        });
    }
    if waited != pid || !libc::WIFSTOPPED(status) {
        return Err(JailError::InvalidInput(format!(
            "the process {pid} did not stop for the tracer (status {status:#x})"
        )));
    }
    // SAFETY: all-zero is a valid user_regs_struct (integers only).
    let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    // SAFETY: PTRACE_GETREGS writes one user_regs_struct to the pointer.
    let got = unsafe { libc::ptrace(libc::PTRACE_GETREGS, pid, 0usize, &raw mut regs) };
    crate::sys::check_long(got, "ptrace getregs")?;
    Ok(regs)
}

/// Read `buf.len()` bytes of `pid`'s memory at `addr` (`process_vm_readv`): the count read,
/// short where the range ends in unmapped memory.
pub fn read_memory(pid: i32, addr: u64, buf: &mut [u8]) -> Result<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` covers exactly `buf`, which the kernel writes; `remote` is only read in
    // the other process, checked by the kernel.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    let n = crate::sys::check_long(n as libc::c_long, "process_vm_readv")?;
    Ok(usize::try_from(n).unwrap_or(0))
}
