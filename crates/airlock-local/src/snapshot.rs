//! A local sandbox's snapshot and restore: its writable files (`/work`, `/tmp`, `/dev/shm`,
//! the one tmpfs under its data root) and, for a stateful sandbox, its kernel's state, to and
//! from the store (`airlock_snapshot`). Files move only through the data root handle, as the
//! sandbox's owner; the kernel's bytes are the sandbox's own and only a kernel reads them.
use std::sync::Arc;

use airlock_broker::kernel::{peek_image, ImageSource};
use airlock_broker::SandboxFs;
use airlock_router::SandboxError;
use airlock_snapshot::{Bounds, Snapshot, SnapshotId, Store, Tree};
use serde_json::{json, Value};

use crate::sandbox::{backend, LocalSandbox};

/// The directories of the data root a snapshot holds (`/work`, `/tmp`, `/dev/shm`).
pub const DATA_DIRS: [&str; 3] = ["work", "tmp", "shm"];

/// A snapshot written.
#[derive(Debug, Clone)]
pub struct Made {
    /// Its id.
    pub id: SnapshotId,
    /// Its size on disk.
    pub bytes: u64,
    /// What the kernel kept and left out (`null` without a kernel state).
    pub kernel: Value,
}

impl LocalSandbox {
    /// Write the sandbox's files and kernel state to `store`, with the manifest `manifest`
    /// makes from the kernel's report. The caller keeps runs out meanwhile (the kernel is
    /// between cells); background processes go on and may change files as they are read.
    pub async fn snapshot(
        &self,
        store: Arc<Store>,
        manifest: impl FnOnce(Option<&Value>) -> Vec<u8>,
    ) -> Result<Made, SandboxError> {
        let fs = self.fs().await?;
        // Held until the state is written: an imaged kernel is read from its memory then.
        let mut kernel = self.run_lock.lock().await;
        let saved = match kernel.as_mut() {
            Some(k) => k
                .save(store.dir())
                .await
                .map_err(|e| backend(e.to_string()))?,
            None => None,
        };
        let report = saved
            .as_ref()
            .map(|s| json!({ "saved": s.saved, "not_saved": s.not_saved, "bytes": s.len, "carried": s.carried }));
        let manifest = manifest(report.as_ref());
        let state = saved.map(|s| s.bytes);
        let written = tokio::task::spawn_blocking(move || write(&store, &fs, &manifest, state))
            .await
            .map_err(|e| backend(format!("snapshot task failed: {e}")))??;
        drop(kernel);
        Ok(Made {
            id: written.info.id,
            bytes: written.info.stored_bytes,
            kernel: report.unwrap_or(Value::Null),
        })
    }

    /// Fill this (new) sandbox from `snapshot`: its files into the data root, its kernel
    /// state for the kernel's first cell, waiting in an unnamed file in `spool`. No run starts
    /// meanwhile (the kernel's lock is held).
    pub async fn restore(
        &self,
        snapshot: Arc<Snapshot>,
        spool: std::path::PathBuf,
    ) -> Result<(), SandboxError> {
        let fs = self.fs().await?;
        let mut kernel = self.run_lock.lock().await;
        let stateful = kernel.is_some();
        let state = tokio::task::spawn_blocking(move || restore(&fs, snapshot, stateful, &spool))
            .await
            .map_err(|e| backend(format!("restore task failed: {e}")))??;
        match (state, kernel.as_mut()) {
            (Some(Pending::Pickled(state)), Some(k)) => k.restore_on_start(state),
            (Some(Pending::Image(image)), Some(k)) => k.become_on_start(image),
            _ => {}
        }
        Ok(())
    }
}

fn write(
    store: &Store,
    fs: &SandboxFs,
    manifest: &[u8],
    state: Option<Box<dyn std::io::Read + Send>>,
) -> Result<airlock_snapshot::Written, SandboxError> {
    // Read as the server: a root server reads whatever the sandbox's files' modes say, and
    // the store's files must be its own (the owner's ids are only for making files).
    let tree = Tree {
        root: fs.data(),
        dirs: &DATA_DIRS,
    };
    let mut state = state;
    let kernel = state.as_mut().map(|f| f.as_mut() as &mut dyn std::io::Read);
    store
        .write(manifest, Some(tree), kernel, &Bounds::default())
        .map_err(|e| backend(e.to_string()))
}

/// A kernel state waiting for the sandbox's first cell.
enum Pending {
    /// Pickled, spooled to an unnamed file.
    Pickled(std::fs::File),
    /// A process image, read from the snapshot itself when the kernel starts.
    Image(Arc<dyn ImageSource>),
}

/// A snapshot's kernel image, streamed from the verified, open snapshot file.
#[derive(Debug)]
struct SnapshotImage(Arc<Snapshot>);

impl ImageSource for SnapshotImage {
    fn open(&self) -> std::io::Result<Box<dyn std::io::Read + Send>> {
        match self.0.kernel_state() {
            Ok(Some(state)) => Ok(Box::new(state)),
            Ok(None) => Err(std::io::Error::other("the snapshot holds no kernel state")),
            Err(e) => Err(std::io::Error::other(e)),
        }
    }
}

fn restore(
    fs: &SandboxFs,
    snapshot: Arc<Snapshot>,
    stateful: bool,
    spool: &std::path::Path,
) -> Result<Option<Pending>, SandboxError> {
    let bounds = Bounds::default();
    SandboxFs::as_owner_of(fs.owner(), fs.data(), |data| {
        snapshot.restore_into(data, &bounds)
    })
    .map_err(|e| backend(e.to_string()))?;
    if !stateful {
        return Ok(None);
    }
    let Some(mut state) = snapshot
        .kernel_state()
        .map_err(|e| backend(e.to_string()))?
    else {
        return Ok(None);
    };
    let failed =
        |e: std::io::Error| backend(format!("the kernel's state could not be spooled: {e}"));
    let (image, head) = peek_image(&mut state).map_err(failed)?;
    if image {
        return Ok(Some(Pending::Image(Arc::new(SnapshotImage(snapshot)))));
    }
    // Spooled to an unnamed file beside the store: the broker never holds a state in memory.
    let mut file = tempfile::tempfile_in(spool).map_err(failed)?;
    std::io::copy(&mut std::io::Read::chain(&head[..], state), &mut file).map_err(failed)?;
    Ok(Some(Pending::Pickled(file)))
}
