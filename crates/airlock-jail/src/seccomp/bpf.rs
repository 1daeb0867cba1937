//! A tiny classic-BPF assembler for seccomp filters: just the instructions the policy needs.

/// One `struct sock_filter` (8 bytes: code u16, jt u8, jf u8, k u32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Insn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

// Classic BPF opcodes (linux/filter.h, linux/bpf_common.h).
const BPF_LD: u16 = 0x00;
const BPF_W: u16 = 0x00;
const BPF_ABS: u16 = 0x20;
const BPF_JMP: u16 = 0x05;
const BPF_JEQ: u16 = 0x10;
const BPF_JSET: u16 = 0x40;
const BPF_K: u16 = 0x00;
const BPF_RET: u16 = 0x06;

/// Offsets into `struct seccomp_data` (linux/seccomp.h): nr, arch, then u64 args.
pub(crate) const OFF_NR: u32 = 0;
pub(crate) const OFF_ARCH: u32 = 4;
/// The low 32 bits of argument `n` (x86_64 is little-endian).
pub(crate) const fn off_arg_lo(n: u32) -> u32 {
    16 + 8 * n
}

/// `A = *(u32 *)(seccomp_data + off)`.
pub(crate) const fn load(off: u32) -> Insn {
    Insn {
        code: BPF_LD | BPF_W | BPF_ABS,
        jt: 0,
        jf: 0,
        k: off,
    }
}

/// `if A == k goto +jt else goto +jf`.
pub(crate) const fn jeq(k: u32, jt: u8, jf: u8) -> Insn {
    Insn {
        code: BPF_JMP | BPF_JEQ | BPF_K,
        jt,
        jf,
        k,
    }
}

/// `if A & k goto +jt else goto +jf`.
pub(crate) const fn jset(k: u32, jt: u8, jf: u8) -> Insn {
    Insn {
        code: BPF_JMP | BPF_JSET | BPF_K,
        jt,
        jf,
        k,
    }
}

/// `return k` (a `SECCOMP_RET_*` action).
pub(crate) const fn ret(k: u32) -> Insn {
    Insn {
        code: BPF_RET | BPF_K,
        jt: 0,
        jf: 0,
        k,
    }
}

/// Serialises instructions as the kernel's `struct sock_filter` array, native endian.
pub(crate) fn to_bytes(prog: &[Insn]) -> Vec<u8> {
    let mut out = Vec::with_capacity(prog.len() * 8);
    for i in prog {
        out.extend_from_slice(&i.code.to_ne_bytes());
        out.push(i.jt);
        out.push(i.jf);
        out.extend_from_slice(&i.k.to_ne_bytes());
    }
    out
}
