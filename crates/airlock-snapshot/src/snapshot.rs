//! [`Store::read`] and the verified [`Snapshot`] it returns: the manifest, the kernel state
//! (streamed), and the restore of the tree.
use std::fs::File;
use std::io::{self, Read};

use airlock_jail::dirfd::DirFd;

use crate::at::At;
use crate::bounds::{too_large, Bounds};
use crate::decode::Decoder;
use crate::error::{Result, SnapshotError};
use crate::format::HEADER_LEN;
use crate::id::SnapshotId;
use crate::payload::{Input, KernelAt};
use crate::restore::{restore_payload, RestoreInfo};
use crate::store::{SnapshotInfo, Store};
use crate::verify::open_verified;

/// A snapshot read from the store: verified (owner, mode, digest, MAC) before any of it was
/// parsed, and held open, so what is parsed later is that same file.
#[derive(Debug)]
pub struct Snapshot {
    info: SnapshotInfo,
    file: std::sync::Arc<File>,
    body_len: u64,
    manifest: Vec<u8>,
    has_kernel_state: bool,
}

/// The payload reader over a verified body.
type Payload = Input<Decoder<At>>;

impl Store {
    /// Opens and verifies the snapshot `id`: [`SnapshotError::NotFound`] when there is none;
    /// [`SnapshotError::Foreign`] when the file is not the store's own (owner, mode 0600) or
    /// its MAC was made with another key; [`SnapshotError::Truncated`] or
    /// [`SnapshotError::Tampered`] when the body is cut short or does not hash to `id`;
    /// [`SnapshotError::Malformed`] or [`SnapshotError::TooLarge`] when its contents break
    /// the format. The whole body is hashed first (one pass), then the manifest is read.
    pub fn read(&self, id: &SnapshotId) -> Result<Snapshot> {
        let v = open_verified(&self.snapshots, id, &self.key)?;
        let mut snapshot = Snapshot {
            info: SnapshotInfo::of(id.clone(), &v.meta),
            file: std::sync::Arc::new(v.file),
            body_len: v.body_len,
            manifest: Vec::new(),
            has_kernel_state: false,
        };
        let mut input = snapshot.payload();
        let manifest = input.manifest()?;
        let has_kernel_state = input.kernel_at()? != KernelAt::Absent;
        snapshot.manifest = manifest;
        snapshot.has_kernel_state = has_kernel_state;
        Ok(snapshot)
    }
}

impl Snapshot {
    /// The snapshot's id.
    #[must_use]
    pub fn id(&self) -> &SnapshotId {
        &self.info.id
    }

    /// Its id, size on disk and time of writing.
    #[must_use]
    pub fn info(&self) -> &SnapshotInfo {
        &self.info
    }

    /// The manifest written with it.
    #[must_use]
    pub fn manifest(&self) -> &[u8] {
        &self.manifest
    }

    /// Whether it carries kernel state.
    #[must_use]
    pub fn has_kernel_state(&self) -> bool {
        self.has_kernel_state
    }

    fn payload(&self) -> Payload {
        let start = HEADER_LEN as u64;
        let at = At::new(
            std::sync::Arc::clone(&self.file),
            start,
            start + self.body_len,
        );
        Input::new(Decoder::new(at))
    }

    /// The kernel state as a reader (`None`: none was written), which holds the open file
    /// itself (it outlives this value). A read error is `InvalidData` carrying the
    /// [`SnapshotError`].
    pub fn kernel_state(&self) -> Result<Option<KernelState>> {
        if !self.has_kernel_state {
            return Ok(None);
        }
        let mut input = self.payload();
        input.manifest()?;
        if input.kernel_at()? == KernelAt::AfterTree {
            input.skip_tree()?;
        }
        Ok(Some(KernelState {
            input,
            left: 0,
            done: false,
        }))
    }

    /// The kernel state in memory; [`SnapshotError::TooLarge`] past `limit` bytes.
    pub fn kernel_state_bytes(&self, limit: u64) -> Result<Option<Vec<u8>>> {
        let Some(reader) = self.kernel_state()? else {
            return Ok(None);
        };
        let mut out = Vec::new();
        reader
            .take(limit.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| crate::decode::from_io(e, "read the kernel state"))?;
        if out.len() as u64 > limit {
            return Err(too_large("kernel-state bytes", limit));
        }
        Ok(Some(out))
    }

    /// Recreates the snapshot's directories and their contents beneath `data_root` (see the
    /// crate docs for how existing names are treated and what is never restored), within
    /// `bounds`. Touches nothing in the store but this open file, so it may run with the
    /// sandbox's filesystem ids (`airlock_jail::identity::with_fs_ids`).
    pub fn restore_into(&self, data_root: &DirFd, bounds: &Bounds) -> Result<RestoreInfo> {
        restore_payload(self.payload(), data_root, bounds)
    }
}

/// The kernel state of a [`Snapshot`], read chunk by chunk.
#[derive(Debug)]
pub struct KernelState {
    input: Payload,
    left: usize,
    done: bool,
}

impl Read for KernelState {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            if self.done || buf.is_empty() {
                return Ok(0);
            }
            self.left = self.input.chunk_len().map_err(to_io)?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let n = buf.len().min(self.left);
        self.input.read_some(&mut buf[..n]).map_err(to_io)?;
        self.left -= n;
        Ok(n)
    }
}

fn to_io(e: SnapshotError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}
