//! The part of a restore that runs with nothing of the process's own left: on a stack of its
//! own, in a region the image does not use, making raw system calls only (no libc, no
//! thread-local storage, no allocation). Every failure past this point ends the process
//! (`exit_group` with a code saying where); the broker sees a kernel that never said it was
//! restored.
//!
//! Nothing here may call into libc, even implicitly: no struct or array copied or
//! initialised by value (which can be lowered to `memcpy`/`memset`, through a libc unmapped
//! by then); fields are read through references, and the crate is built optimised in debug
//! builds too (`Cargo.toml`), where unoptimised code calls even `ptr::add` out of line.

/// The plan as this code reads it (built by [`super::restore`], inside the region it runs on).
#[repr(C)]
pub(super) struct Raw {
    pub unmap: *const Range,
    pub n_unmap: usize,
    pub moves: *const Move,
    pub n_moves: usize,
    pub regions: *const RawRegion,
    pub n_regions: usize,
    /// The socket to the broker: `mapped` is written to it once every region is mapped,
    /// then `filled_len` bytes are read from it (the broker's word that it has written the
    /// regions' bytes), then `done` is written.
    pub socket: u64,
    pub mapped: *const u8,
    pub mapped_len: usize,
    pub filled_len: usize,
    pub done: *const u8,
    pub done_len: usize,
    /// `struct prctl_mm_map`: eleven addresses, the auxv pointer, its size and exe_fd.
    pub mm: [u64; 13],
    pub rseq_area: u64,
    pub rseq_len: u64,
    pub fs_base: u64,
    /// The `rt_sigframe` (its `pretcode` slot).
    pub frame: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Range {
    pub start: u64,
    pub end: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Move {
    pub from: u64,
    pub to: u64,
    pub len: u64,
}

/// Kinds of [`RawRegion`].
pub(super) const ANON: u64 = 0;
pub(super) const FILE: u64 = 1;
pub(super) const STACK: u64 = 2;
pub(super) const SHARED_FILE: u64 = 3;

#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct RawRegion {
    pub start: u64,
    pub end: u64,
    pub prot: u64,
    pub kind: u64,
    pub offset: u64,
    /// A NUL-terminated path (files).
    pub path: *const u8,
    pub fill: u64,
}

const SYS_READ: u64 = 0;
const SYS_WRITE: u64 = 1;
const SYS_CLOSE: u64 = 3;
const SYS_MMAP: u64 = 9;
const SYS_MPROTECT: u64 = 10;
const SYS_MUNMAP: u64 = 11;
const SYS_MREMAP: u64 = 25;
const SYS_MADVISE: u64 = 28;
const MADV_NOHUGEPAGE: u64 = 15;
const SYS_PRCTL: u64 = 157;
const SYS_SET_TID_ADDRESS: u64 = 218;
const SYS_EXIT_GROUP: u64 = 231;
const SYS_OPENAT: u64 = 257;
const SYS_SET_ROBUST_LIST: u64 = 273;
const SYS_RSEQ: u64 = 334;

/// Exit codes: where a restore failed past the point of no return.
pub(super) const EXIT_UNMAP: u64 = 90;
const EXIT_MOVE: u64 = 91;
const EXIT_OPEN: u64 = 92;
const EXIT_MAP: u64 = 93;
const EXIT_PROTECT: u64 = 95;
const EXIT_LAYOUT: u64 = 96;
const EXIT_DONE: u64 = 97;
const EXIT_FILLED: u64 = 98;

#[inline(always)]
unsafe fn sys(n: u64, a: u64, b: u64, c: u64, d: u64, e: u64, f: u64) -> i64 {
    let ret: i64;
    // SAFETY: the caller's: a raw system call with these arguments.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") n as i64 => ret,
            in("rdi") a, in("rsi") b, in("rdx") c, in("r10") d, in("r8") e, in("r9") f,
            lateout("rcx") _, lateout("r11") _,
            options(nostack)
        );
    }
    ret
}

#[inline(always)]
unsafe fn die(code: u64) -> ! {
    // SAFETY: exit_group takes an integer and does not return.
    unsafe { sys(SYS_EXIT_GROUP, code, 0, 0, 0, 0, 0) };
    loop {
        core::hint::spin_loop();
    }
}

/// Rebuild the address space from `plan` and become the image. Never returns.
///
/// # Safety
/// `plan` points to a [`Raw`] (and everything it points to) inside the region the stack
/// pointer is in, which no range of the plan unmaps or maps over; every signal is blocked.
pub(super) unsafe extern "C" fn run(plan: *const Raw) -> ! {
    // SAFETY: the caller's contract; each step's arguments come from the plan, checked
    // before the switch (ranges page-aligned, ordered, clear of this code and this region).
    unsafe {
        let p = &*plan;
        for i in 0..p.n_unmap {
            let r = &*p.unmap.add(i);
            if sys(SYS_MUNMAP, r.start, r.end - r.start, 0, 0, 0, 0) != 0 {
                die(EXIT_UNMAP);
            }
        }
        for i in 0..p.n_moves {
            let m = &*p.moves.add(i);
            // MREMAP_MAYMOVE | MREMAP_FIXED
            if m.from != m.to && sys(SYS_MREMAP, m.from, m.len, m.len, 3, m.to, 0) != m.to as i64 {
                die(EXIT_MOVE);
            }
        }
        for i in 0..p.n_regions {
            map_region(&*p.regions.add(i));
        }
        // The broker writes the filled regions' bytes into them (/proc/PID/mem) meanwhile.
        write_all(p.socket, p.mapped, p.mapped_len, EXIT_DONE);
        // Read into the spent `mapped` frame: no buffer on this stack needs initialising.
        let mut left = p.filled_len;
        while left > 0 {
            let want = if left < p.mapped_len {
                left
            } else {
                p.mapped_len
            };
            let n = sys(SYS_READ, p.socket, p.mapped as u64, want as u64, 0, 0, 0);
            if n <= 0 {
                die(EXIT_FILLED);
            }
            left -= n as usize;
        }
        for i in 0..p.n_regions {
            let r = &*p.regions.add(i);
            let len = r.end - r.start;
            if r.fill != 0 && r.prot != 3 && sys(SYS_MPROTECT, r.start, len, r.prot, 0, 0, 0) != 0 {
                die(EXIT_PROTECT);
            }
        }
        // PR_SET_MM, PR_SET_MM_MAP: the kernel's view of the heap (brk), stack, arguments.
        if sys(SYS_PRCTL, 35, 14, p.mm.as_ptr() as u64, 104, 0, 0) != 0 {
            die(EXIT_LAYOUT);
        }
        // The exit-time futex list and tid address pointed into memory that is gone.
        sys(SYS_SET_ROBUST_LIST, 0, 24, 0, 0, 0, 0);
        sys(SYS_SET_TID_ADDRESS, 0, 0, 0, 0, 0, 0);
        if p.rseq_len != 0 {
            // Best effort: without it the image's glibc reads a stale cpu number.
            sys(SYS_RSEQ, p.rseq_area, p.rseq_len, 0, 0x5305_3053, 0, 0);
        }
        write_all(p.socket, p.done, p.done_len, EXIT_DONE);
        // arch_prctl(ARCH_SET_FS), then rt_sigreturn from the frame: every register at once.
        core::arch::asm!(
            "mov eax, 158",
            "mov edi, 0x1002",
            "syscall",
            "lea rsp, [rdx + 8]",
            "mov eax, 15",
            "syscall",
            "ud2",
            in("rdx") p.frame,
            in("rsi") p.fs_base,
            options(noreturn)
        );
    }
}

/// Write `len` bytes at `buf` to `fd`, or end the process with `code`.
#[inline(always)]
unsafe fn write_all(fd: u64, buf: *const u8, len: usize, code: u64) {
    // SAFETY: the caller's (see [`run`]): `buf..buf + len` is inside the plan's region.
    unsafe {
        let mut at = 0;
        while at < len {
            let n = sys(
                SYS_WRITE,
                fd,
                buf as u64 + at as u64,
                (len - at) as u64,
                0,
                0,
                0,
            );
            if n <= 0 {
                die(code);
            }
            at += n as usize;
        }
    }
}

/// Map one region at its address (writable while the broker fills it).
#[inline(always)]
unsafe fn map_region(r: &RawRegion) {
    // SAFETY: the caller's (see [`run`]).
    unsafe {
        let len = r.end - r.start;
        let prot = if r.fill != 0 { r.prot | 3 } else { r.prot };
        // MAP_PRIVATE (or MAP_SHARED) | MAP_FIXED
        let private_fixed = 0x02 | 0x10;
        let got = if r.kind == FILE || r.kind == SHARED_FILE {
            let flags = if r.kind == SHARED_FILE {
                0x01 | 0x10
            } else {
                private_fixed
            };
            // O_RDONLY | O_CLOEXEC, relative to the working directory (paths are absolute).
            let file = sys(
                SYS_OPENAT,
                (-100i64) as u64,
                r.path as u64,
                0o2_000_000,
                0,
                0,
                0,
            );
            if file < 0 {
                die(EXIT_OPEN);
            }
            let got = sys(SYS_MMAP, r.start, len, prot, flags, file as u64, r.offset);
            sys(SYS_CLOSE, file as u64, 0, 0, 0, 0, 0);
            got
        } else {
            // MAP_ANONYMOUS, and MAP_GROWSDOWN for the stack. (MAP_POPULATE for what is
            // filled next measured faster outside a sandbox and 2-4x slower inside its memory
            // cgroup: not used.)
            let grows = if r.kind == STACK { 0x100 } else { 0 };
            sys(
                SYS_MMAP,
                r.start,
                len,
                prot,
                private_fixed | 0x20 | grows,
                u64::MAX,
                0,
            )
        };
        if got != r.start as i64 {
            die(EXIT_MAP);
        }
        // No transparent huge pages for anonymous memory: a page written in would otherwise
        // fault in 2 MiB around it, pages the paused kernel never held (refused where THP is
        // not built in, which is as good).
        if r.kind != FILE && r.kind != SHARED_FILE {
            sys(SYS_MADVISE, r.start, len, MADV_NOHUGEPAGE, 0, 0, 0);
        }
    }
}
