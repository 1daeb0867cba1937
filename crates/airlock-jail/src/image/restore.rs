//! Restoring an image into the calling process: the checks and the plan, made while the
//! process is still its own, then the switch to [`super::swap`].
use std::convert::Infallible;
use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;

use super::capture::Registers;
use super::swap::{self, Move, Range, Raw, RawRegion};
use crate::procfs::{maps_line, Mapping};
use crate::{JailError, Result};

/// What a region of the image is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegionKind {
    /// Anonymous memory.
    Anon,
    /// The main thread's stack (anonymous, grows down).
    Stack,
    /// A private mapping of a file, opened by this absolute path in the restoring process.
    File {
        /// The path.
        path: CString,
        /// The offset into the file.
        offset: u64,
        /// Mapped shared (read-only; never filled).
        shared: bool,
    },
    /// A kernel-provided mapping (`[vdso]`, `[vvar]`, `[vvar_vclock]`): the restoring
    /// process's own is moved to this address.
    Special(String),
}

/// One region of the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRegion {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// `PROT_*` bits.
    pub prot: u32,
    /// What it is.
    pub kind: RegionKind,
    /// Its bytes follow in the source (in region order).
    pub fill: bool,
}

/// One signal's action, in the kernel's `struct sigaction` layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SigAction {
    /// The signal number.
    pub signal: u32,
    /// `sa_handler`.
    pub handler: u64,
    /// `sa_flags`.
    pub flags: u64,
    /// `sa_restorer`.
    pub restorer: u64,
    /// `sa_mask`.
    pub mask: u64,
}

/// An image to become.
#[derive(Debug)]
pub struct Plan<'a> {
    /// Its regions, in address order.
    pub regions: &'a [PlanRegion],
    /// The registers it resumes with.
    pub registers: Registers,
    /// `start_code, end_code, start_data, end_data, start_brk, brk, start_stack, arg_start,
    /// arg_end, env_start, env_end`.
    pub layout: [u64; 11],
    /// Signal actions to set.
    pub sigactions: &'a [SigAction],
    /// The blocked signals it resumes with.
    pub sigmask: u64,
    /// Its restartable-sequence area (the address and length glibc registered), if any.
    pub rseq: Option<(u64, u32)>,
    /// The socket to the broker.
    pub socket: BorrowedFd<'a>,
    /// Written whole to the socket once every region is mapped: the broker then writes the
    /// filled regions' bytes into this process (its `/proc/PID/mem`) and answers with
    /// `filled_len` bytes, read and dropped.
    pub mapped: &'a [u8],
    /// See [`Plan::mapped`].
    pub filled_len: usize,
    /// Written whole to the socket once restored, just before the image resumes.
    pub done: &'a [u8],
}

/// Highest user address on x86_64 (4-level paging), exclusive.
const USER_END: u64 = 0x7fff_ffff_f000;
const PAGE: u64 = 4096;
/// The stack the swap runs on.
const SWAP_STACK: usize = 256 << 10;
/// `sizeof(struct rt_sigframe)` up to the end of `uc_sigmask`, rounded.
const FRAME_LEN: usize = 512;

/// Become the image `plan` describes. Returns only on a failure before anything of the
/// process was changed; past that point a failure ends the process. The process must be
/// single-threaded, and everything that must hold for the image (namespaces, Landlock,
/// seccomp, dropped capabilities) must already be in force: the image's code runs next.
pub fn restore(plan: &Plan<'_>) -> Result<Infallible> {
    check_regions(plan.regions)?;
    let own = own_mappings()?;
    let exe = std::fs::metadata("/proc/self/exe").map_err(|e| JailError::io("stat exe", e))?;
    let size = plan_size(plan) + SWAP_STACK;
    let mut area = Area::map(size)?;
    let clear = |s: u64, e: u64| !plan.regions.iter().any(|r| r.start < e && s < r.end);
    if !clear(area.start, area.end()) {
        return Err(conflict("its working area"));
    }
    let mut unmap = Vec::new();
    let mut moves = Vec::new();
    for m in &own {
        if m.dev == exe.dev() && m.inode == exe.ino() && m.inode != 0 {
            if !clear(m.start, m.end) {
                return Err(conflict("the restoring program"));
            }
        } else if m.name == "[vsyscall]" {
        } else if m.name.starts_with("[v") {
            moves.push(special_move(m, plan.regions)?);
        } else {
            push_outside(&mut unmap, m.start, m.end, area.start, area.end());
        }
    }
    let raw = area.write_plan(plan, &unmap, &moves)?;
    let top = (area.end() - 64) & !15;
    set_sigactions(plan.sigactions)?;
    unregister_rseq();
    // SAFETY: the plan and the stack are inside `area`, which no range of the plan touches
    // and which is never unmapped; every signal is blocked first, so nothing runs on the old
    // stack again. `swap::run` never returns.
    unsafe {
        let all: u64 = !0;
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &raw const all,
            0usize,
            8usize,
        );
        core::arch::asm!(
            "mov rsp, {top}",
            "xor ebp, ebp",
            "call {run}",
            "ud2",
            top = in(reg) top,
            run = sym swap::run,
            in("rdi") raw,
            options(noreturn)
        );
    }
}

fn conflict(what: &str) -> JailError {
    JailError::InvalidInput(format!(
        "{what} lies where the image has memory (address-space layouts collided; try again)"
    ))
}

/// Regions page-aligned, ordered, not overlapping, in user space.
fn check_regions(regions: &[PlanRegion]) -> Result<()> {
    let mut last = 0;
    for r in regions {
        if r.start % PAGE != 0 || r.end % PAGE != 0 || r.start >= r.end || r.end > USER_END {
            return Err(JailError::InvalidInput(format!(
                "an image region {:#x}-{:#x} is not a page range of user space",
                r.start, r.end
            )));
        }
        if r.start < last {
            return Err(JailError::InvalidInput(
                "image regions overlap or are out of order".into(),
            ));
        }
        last = r.end;
    }
    Ok(())
}

/// Where the image has the special mapping `m` is: it must be there, and as long.
fn special_move(m: &Mapping, regions: &[PlanRegion]) -> Result<Move> {
    let found = regions
        .iter()
        .find(|r| r.kind == RegionKind::Special(m.name.clone()));
    match found {
        Some(r) if r.end - r.start == m.end - m.start => Ok(Move {
            from: m.start,
            to: r.start,
            len: m.end - m.start,
        }),
        _ => Err(JailError::InvalidInput(format!(
            "the image has no {} of this kernel's size (made on another kernel?)",
            m.name
        ))),
    }
}

/// `[start, end)` less `[hole_start, hole_end)`, as ranges to unmap.
fn push_outside(out: &mut Vec<Range>, start: u64, end: u64, hole_start: u64, hole_end: u64) {
    if start < hole_start {
        out.push(Range {
            start,
            end: end.min(hole_start),
        });
    }
    if end > hole_end {
        out.push(Range {
            start: start.max(hole_end),
            end,
        });
    }
}

fn set_sigactions(actions: &[SigAction]) -> Result<()> {
    for a in actions {
        if matches!(a.signal, 0 | 9 | 19) || a.signal > 64 {
            continue;
        }
        let raw = [a.handler, a.flags, a.restorer, a.mask];
        // SAFETY: `raw` is a kernel `struct sigaction` (handler, flags, restorer, mask); no old
        // action is asked for. The handler is the image's and runs only after the swap.
        let r = unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                a.signal,
                raw.as_ptr(),
                0usize,
                8usize,
            )
        };
        crate::sys::check_long(r, "rt_sigaction")?;
    }
    Ok(())
}

/// The calling thread's restartable-sequence area leaves with its memory: the kernel must
/// not write to it once the swap has unmapped it (glibc 2.35+ registers it at start-up).
fn unregister_rseq() {
    extern "C" {
        static __rseq_offset: isize;
        static __rseq_size: u32;
    }
    // SAFETY: glibc's exported constants, read only.
    let (offset, size) = unsafe { (__rseq_offset, __rseq_size) };
    if size == 0 {
        return;
    }
    let tp: u64;
    // SAFETY: reads the thread pointer (fs:0 holds it on x86_64).
    unsafe { core::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly)) };
    let area = tp.wrapping_add_signed(offset as i64);
    for len in [32u32, size] {
        // SAFETY: unregistering the thread's own area (flag 1), with glibc's signature.
        if unsafe { libc::syscall(libc::SYS_rseq, area, len, 1, 0x5305_3053u32) } == 0 {
            return;
        }
    }
}

fn own_mappings() -> Result<Vec<Mapping>> {
    let text = crate::sys::read_bounded(std::path::Path::new("/proc/self/maps"), 4 << 20)
        .map_err(|e| JailError::io("read /proc/self/maps", e))?;
    text.lines()
        .map(|line| maps_line(line).ok_or_else(|| JailError::InvalidInput(format!("maps: {line}"))))
        .collect()
}

fn plan_size(plan: &Plan<'_>) -> usize {
    let paths: usize = plan
        .regions
        .iter()
        .map(|r| match &r.kind {
            RegionKind::File { path, .. } => path.as_bytes_with_nul().len() + 16,
            _ => 0,
        })
        .sum();
    let arrays = plan.regions.len() * (size_of::<RawRegion>() + 2 * size_of::<Range>() + 16)
        + 8 * size_of::<Move>();
    (paths + arrays + plan.done.len() + plan.mapped.len() + FRAME_LEN + size_of::<Raw>() + 4096)
        .next_multiple_of(4096)
}

/// The working region: plan, frame and the swap's stack.
struct Area {
    start: u64,
    len: usize,
    used: usize,
}

impl Area {
    fn map(len: usize) -> Result<Area> {
        // SAFETY: a fresh private anonymous mapping the kernel places.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(JailError::last_os("mmap"));
        }
        Ok(Area {
            start: p as u64,
            len,
            used: 0,
        })
    }

    fn end(&self) -> u64 {
        self.start + self.len as u64
    }

    /// Copy `bytes` in (16-aligned); its address.
    fn put(&mut self, bytes: &[u8]) -> Result<u64> {
        let at = self.used.next_multiple_of(16);
        if at + bytes.len() + SWAP_STACK > self.len {
            return Err(JailError::InvalidInput(
                "the restore plan outgrew its area".into(),
            ));
        }
        // SAFETY: `at..at + len` is inside the mapping (checked just above) and `bytes` is
        // not in it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                (self.start as usize + at) as *mut u8,
                bytes.len(),
            );
        }
        self.used = at + bytes.len();
        Ok(self.start + at as u64)
    }

    fn put_slice<T: Copy>(&mut self, items: &[T]) -> Result<u64> {
        // SAFETY: plain `repr(C)` data of integers and pointers, viewed as its bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(items.as_ptr().cast::<u8>(), std::mem::size_of_val(items))
        };
        self.put(bytes)
    }

    /// Everything the swap reads, laid out in the area; the address of its [`Raw`].
    fn write_plan(
        &mut self,
        plan: &Plan<'_>,
        unmap: &[Range],
        moves: &[Move],
    ) -> Result<*const Raw> {
        let mut regions = Vec::with_capacity(plan.regions.len());
        for r in plan.regions {
            let (kind, offset, path) = match &r.kind {
                RegionKind::Special(_) => continue,
                RegionKind::Anon => (swap::ANON, 0, std::ptr::null()),
                RegionKind::Stack => (swap::STACK, 0, std::ptr::null()),
                RegionKind::File {
                    path,
                    offset,
                    shared,
                } => {
                    let at = self.put(path.as_bytes_with_nul())?;
                    let kind = if *shared {
                        swap::SHARED_FILE
                    } else {
                        swap::FILE
                    };
                    (kind, *offset, at as usize as *const u8)
                }
            };
            regions.push(RawRegion {
                start: r.start,
                end: r.end,
                prot: u64::from(r.prot),
                kind,
                offset,
                path,
                fill: u64::from(r.fill),
            });
        }
        let frame = self.put(&sigframe(&plan.registers, plan.sigmask))?;
        let done = self.put(plan.done)?;
        let mapped = self.put(plan.mapped)?;
        let l = &plan.layout;
        let mut mm = [0u64; 13];
        mm[..11].copy_from_slice(l);
        // auxv pointer 0, auxv_size 0, exe_fd -1 (left as it is).
        mm[12] = 0xffff_ffff_0000_0000;
        let (rseq_area, rseq_len) = plan.rseq.map_or((0, 0), |(a, n)| (a, u64::from(n)));
        let raw = Raw {
            unmap: self.put_slice(unmap)? as usize as *const Range,
            n_unmap: unmap.len(),
            moves: self.put_slice(moves)? as usize as *const Move,
            n_moves: moves.len(),
            regions: self.put_slice(&regions)? as usize as *const RawRegion,
            n_regions: regions.len(),
            socket: plan.socket.as_raw_fd() as u64,
            mapped: mapped as usize as *const u8,
            mapped_len: plan.mapped.len(),
            filled_len: plan.filled_len,
            done: done as usize as *const u8,
            done_len: plan.done.len(),
            mm,
            rseq_area,
            rseq_len,
            fs_base: plan.registers.fs_base,
            frame,
        };
        // SAFETY: `Raw` is plain `repr(C)` data, viewed as its bytes.
        let bytes =
            unsafe { std::slice::from_raw_parts((&raw const raw).cast::<u8>(), size_of::<Raw>()) };
        Ok(self.put(bytes)? as usize as *const Raw)
    }
}

/// An `rt_sigframe` whose return loads `regs` and `sigmask`: `pretcode`, then the
/// `ucontext` (flags, link, `uc_stack` disabled, `sigcontext`, `uc_sigmask`); no FPU state
/// (`fpstate` null: the FPU starts clean).
fn sigframe(regs: &Registers, sigmask: u64) -> Vec<u8> {
    let mut f = vec![0u8; FRAME_LEN];
    let mut put = |at: usize, v: u64| f[at..at + 8].copy_from_slice(&v.to_le_bytes());
    // UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS
    put(8, 2 | 4);
    // uc_stack: ss_sp 0, ss_flags SS_DISABLE, ss_size 0.
    put(32, 2);
    let mcontext = 48;
    for (i, v) in regs.gpr.iter().enumerate() {
        put(mcontext + i * 8, *v);
    }
    // cs = __USER_CS, gs = fs = 0, ss = __USER_DS.
    put(mcontext + 18 * 8, 0x33 | (0x2b << 48));
    put(mcontext + 256, sigmask);
    f
}
