//! [`Store::write`]: a snapshot streamed into a temporary file, then published under its id.
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;

use airlock_jail::dirfd::{self, FileKind};
use airlock_jail::identity::effective_uid;

use crate::bounds::{too_large, Bounds, Budget, MAX_MANIFEST};
use crate::capture::{capture_tree, Captured, Tree};
use crate::encode::{encode, write_err, Encoder};
use crate::error::{Result, SnapshotError};
use crate::format::{Header, HEADER_LEN};
use crate::id::SnapshotId;
use crate::payload::{self, CHUNK_LEN};
use crate::store::{SnapshotInfo, Store};
use crate::store_dir::sync_dir;
use crate::temp::TempFile;

/// What [`Store::write`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The snapshot (its id is the digest of its body).
    pub info: SnapshotInfo,
    /// Whether a snapshot with this content was already there (and was kept).
    pub reused: bool,
    /// What was taken.
    pub captured: Captured,
}

impl Store {
    /// Writes a snapshot of `manifest` (the caller's bytes, at most [`MAX_MANIFEST`]),
    /// `tree`'s directories and `kernel_state` (read to its end), within `bounds`.
    ///
    /// The body is compressed, hashed and written as it is produced, into a `.tmp-*` file
    /// (0600) that is fsynced and renamed to the body's SHA-256, then the directory is
    /// fsynced. Identical content gives the same id, and an existing snapshot with that id is
    /// kept. On any error, a bound exceeded included, nothing is left behind.
    pub fn write(
        &self,
        manifest: &[u8],
        tree: Option<Tree<'_>>,
        kernel_state: Option<&mut dyn Read>,
        bounds: &Bounds,
    ) -> Result<Written> {
        if manifest.len() > MAX_MANIFEST {
            return Err(too_large("manifest bytes", MAX_MANIFEST as u64));
        }
        let mut budget = Budget::new(*bounds);
        let (captured, info, reused) =
            self.write_with(|enc| write_payload(enc, manifest, tree, kernel_state, &mut budget))?;
        Ok(Written {
            info,
            reused,
            captured,
        })
    }

    /// Writes the snapshot whose payload `f` writes: header, body, fsync, publish.
    pub(crate) fn write_with<T>(
        &self,
        f: impl FnOnce(&mut Encoder<&File>) -> Result<T>,
    ) -> Result<(T, SnapshotInfo, bool)> {
        let tmp = TempFile::create(&self.snapshots)?;
        (&tmp.file)
            .write_all(&[0u8; HEADER_LEN])
            .map_err(write_err)?;
        let (value, digest, body_len) = encode(&tmp.file, self.threads, f)?;
        let header = Header {
            body_len,
            mac: self.key.mac(&digest),
        };
        tmp.file
            .write_all_at(&header.encode(), 0)
            .and_then(|()| tmp.file.sync_all())
            .map_err(write_err)?;
        let (info, reused) = self.publish(tmp, SnapshotId::from_digest(&digest))?;
        Ok((value, info, reused))
    }

    /// Renames `tmp` to `id` (keeping an existing snapshot of that id when it is whole) and
    /// makes the name durable.
    fn publish(&self, tmp: TempFile<'_>, id: SnapshotId) -> Result<(SnapshotInfo, bool)> {
        let ours =
            dirfd::fstat(tmp.file.as_fd()).map_err(SnapshotError::io("stat the snapshot"))?;
        if let Ok(m) = self.snapshots.stat_at(id.as_str()) {
            let whole = m.kind == FileKind::Regular && m.size == ours.size;
            if whole && m.uid == effective_uid() && m.mode == 0o600 {
                return Ok((SnapshotInfo::of(id, &m), true));
            }
        }
        self.snapshots
            .rename_at(&tmp.name, id.as_str(), false)
            .map_err(SnapshotError::io(format!("publish snapshot {id}")))?;
        tmp.keep();
        sync_dir(&self.snapshots).map_err(SnapshotError::io("sync the snapshots directory"))?;
        Ok((SnapshotInfo::of(id, &ours), false))
    }
}

/// The payload: manifest, the kernel state's marker, tree, kernel state.
fn write_payload<W: Write>(
    out: &mut W,
    manifest: &[u8],
    tree: Option<Tree<'_>>,
    kernel_state: Option<&mut dyn Read>,
    budget: &mut Budget,
) -> Result<Captured> {
    payload::put_manifest(out, manifest).map_err(write_err)?;
    let at = if kernel_state.is_some() {
        payload::KernelAt::AfterTree
    } else {
        payload::KernelAt::Absent
    };
    payload::put_kernel_marker(out, at).map_err(write_err)?;
    let mut captured = capture_tree(tree, out, budget)?;
    captured.kernel_bytes = match kernel_state {
        Some(r) => copy_kernel(r, out, budget.bounds.max_kernel_bytes)?,
        None => 0,
    };
    Ok(captured)
}

/// Copies the kernel state as chunks, refusing more than `max` bytes.
fn copy_kernel<W: Write>(r: &mut dyn Read, out: &mut W, max: u64) -> Result<u64> {
    let mut buf = vec![0u8; CHUNK_LEN];
    let mut total = 0u64;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(SnapshotError::io("read the kernel state")(e)),
        };
        total += n as u64;
        if total > max {
            return Err(too_large("kernel-state bytes", max));
        }
        payload::put_chunk(out, &buf[..n]).map_err(write_err)?;
    }
    payload::put_chunks_end(out).map_err(write_err)?;
    Ok(total)
}
