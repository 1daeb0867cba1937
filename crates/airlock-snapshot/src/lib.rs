//! airlock-snapshot: the durable snapshot store behind `sandbox.snapshot`, `pause`, `resume`
//! and `fork`.
//!
//! A snapshot is a sandbox's writable files (directories such as `work`, `tmp`, `shm` under
//! its data root), an optional opaque kernel-state blob and the caller's small manifest, in
//! one file named by the SHA-256 of its body ([`SnapshotId`]), with an HMAC of that digest
//! under the store's key in its header. [`Store::write`] streams it (compressed with LZ4 on
//! every core, hashed as written) into a temporary file that is fsynced and renamed into
//! place, so a kill at any instant leaves a whole snapshot or none; [`Store::read`] checks
//! the file is the store's own and verifies digest and MAC over the whole body before
//! parsing a byte of it; [`Snapshot::restore_into`] recreates the tree.
//!
//! The tree is hostile both ways. Capture walks it with airlock-jail's no-follow primitives
//! while the sandbox may be changing it (a file is read up to the size it had when opened,
//! chunk-framed, so the body's framing is exact whatever the file does). Restore treats even
//! a verified body as hostile: one-segment names only, every operation on a name inside a
//! directory handle it opened itself, no link ever followed, modes masked (files `& 0o777`,
//! directories `& 0o1777`: never a set-id bit), and no device, FIFO, socket or hard link is
//! representable, so none is ever made. An existing name is replaced (an existing directory
//! where the snapshot has one is restored into, keeping what else it holds). Ownership is
//! neither captured nor restored: restore as the sandbox's identity. Symlink mtimes are not
//! restored. [`Bounds`] cap every write and restore: exceeding one is an error, never a
//! partial snapshot.
//!
//! Raw syscalls live in airlock-jail; this crate has no `unsafe`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod at;
mod bounds;
mod capture;
mod decode;
mod encode;
mod error;
mod format;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod id;
mod key;
mod mac;
mod payload;
mod random;
mod restore;
mod snapshot;
mod store;
mod store_dir;
mod temp;
mod verify;
mod write;

pub use bounds::{Bounds, MAX_MANIFEST};
pub use capture::{Captured, Tree};
pub use error::{Result, SnapshotError};
pub use id::{BadId, SnapshotId};
pub use restore::RestoreInfo;
pub use snapshot::{KernelState, Snapshot};
pub use store::{SnapshotInfo, Store};
pub use write::Written;

#[cfg(test)]
mod tests;
