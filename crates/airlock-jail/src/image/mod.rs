//! A stopped process's image and its restoration: how a paused kernel's memory is carried
//! instead of being pickled (docs/performance.md "Pause and resume").
//!
//! [`capture`]: the broker reads a stopped process's registers (`ptrace`, seized and let go
//! again at once) and its memory (`process_vm_readv`). [`restore`]: a fresh process, already
//! inside every layer of a sandbox (namespaces, Landlock, seccomp, no capabilities), unmaps
//! everything of its own but the code doing the work, maps the image's regions at their
//! addresses, lets the broker write their bytes in (through its `/proc/PID/mem`), moves its vDSO where
//! the image had it, sets the
//! kernel's view of its memory layout (`PR_SET_MM_MAP`, no capability needed), its signal
//! actions and restartable-sequence area, and loads the image's registers with
//! `rt_sigreturn`. Nothing restored can undo a layer: namespaces, Landlock, the seccomp filter,
//! credentials and `no_new_privs` belong to the process, not to its memory.
//!
//! x86_64 only, as the rest of the crate: addresses are `u64` and pointers 64 bits wide.
#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "x86_64 only: u64 addresses and usize pointers are the same width; raw system \
              call results are cast only once checked non-negative"
)]
mod capture;
mod restore;
mod swap;

pub use capture::{read_memory, registers_of_stopped, Registers};
pub use restore::{restore, Plan, PlanRegion, RegionKind, SigAction};
