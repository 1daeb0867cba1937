//! airlock-jail: the only crate in airlock with raw syscalls and `unsafe`.
//!
//! It provides the building blocks the executor stage composes into a jail (user, net, ipc,
//! uts, mount, pid and cgroup namespaces; id maps; rlimits; capability drop; Landlock; seccomp),
//! and the pieces the broker needs around a run (cgroups, procfs walks, pseudo-terminals,
//! `doctor`).
//!
//! Every function is synchronous and thin; the order in which layers are applied is the
//! executor's business. Functions that must run in a single-threaded process say so.
//! Everything fails closed: a layer that is not fully in force is an error, never a warning.

#![cfg(target_os = "linux")]

pub mod caps;
pub mod cgroup;
pub mod cgroup_sweep;
pub mod dirfd;
pub mod doctor;
mod error;
pub mod fd;
pub mod fdpass;
pub mod fsmount;
pub mod identity;
pub mod image;
pub mod landlock;
pub mod mounts;
pub mod net;
pub mod ns;
pub mod pidfd;
pub mod process;
pub mod procfs;
pub mod pty;
pub mod rlimits;
pub mod seccomp;
mod sys;
pub mod userns;

pub use error::{JailError, Result};
