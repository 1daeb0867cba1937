//! The server's state directory (`--state-dir`): the snapshot store (`snapshots/`, its key),
//! one record per paused sandbox (`paused/<sandbox_id>.json`: what makes it again), a mark per
//! snapshot kept on request (`kept/<snapshot_id>`, naming the tenants that kept it, one per
//! line; an empty mark is the single tenant's), and a lock so that one server at a time
//! owns it. Every write that a later start relies on is durable before it is answered
//! (written aside, fsync'd, renamed, the directory fsync'd).
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use airlock_snapshot::{SnapshotId, Store};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::json_doc::JsonDoc;
use crate::tenancy::tenant::Tenant;

/// Largest paused record read back.
const MAX_RECORD: u64 = 1 << 20;
/// Most paused records read at start.
const MAX_RECORDS: usize = 100_000;
/// Free space a new snapshot must leave on the state directory's filesystem.
const MIN_FREE: u64 = 1 << 30;
/// The store's default maximum (`--max-state-mb`).
pub const DEFAULT_MAX_BYTES: u64 = 16 << 30;

/// Why the state directory could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StateDirError {
    /// The snapshot store refused (ownership, modes, a broken key).
    #[error("{0}")]
    Store(#[from] airlock_snapshot::SnapshotError),
    /// A file or directory of it could not be made or read.
    #[error("state directory {path}: {source}")]
    Io {
        /// What was being done.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Another server holds it.
    #[error("state directory {0} is in use by another airlock server (its lock is held)")]
    Locked(PathBuf),
}

/// A paused sandbox, as the state directory keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PausedRecord {
    /// Its wire id (kept across the pause).
    pub sandbox_id: String,
    /// The snapshot that holds its files and kernel state.
    pub snapshot_id: String,
    /// The request it was made from, as its face received it (`sandbox.create`'s params).
    pub create: JsonDoc,
    /// Its labels.
    pub metadata: BTreeMap<String, String>,
    /// When it was paused (milliseconds since the epoch).
    pub paused_at_ms: u64,
    /// The idle timeout in force when it was paused (`sandbox.set_timeout` survives a pause).
    #[serde(default)]
    pub idle_timeout_s: Option<f64>,
    /// The tenant it belongs to (records of a server before tenants: the single tenant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

impl PausedRecord {
    /// The tenant it belongs to.
    #[must_use]
    pub fn tenant(&self) -> Tenant {
        self.tenant
            .as_deref()
            .map_or_else(Tenant::single, Tenant::new)
    }
}

/// The snapshot manifest's format.
const MANIFEST_FORMAT: u64 = 1;

/// What a snapshot of `sandbox_id` (made from the request `raw`, for `tenant`) says of itself,
/// given the kernel's report: the JSON its manifest holds.
pub fn manifest(
    sandbox_id: &str,
    raw: &JsonDoc,
    tenant: &Tenant,
) -> impl FnOnce(Option<&Value>) -> Vec<u8> {
    let (sandbox_id, raw, tenant) = (sandbox_id.to_owned(), raw.clone(), tenant.to_string());
    move |kernel: Option<&Value>| {
        let made_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        serde_json::json!({
            "format": MANIFEST_FORMAT, "sandbox_id": sandbox_id, "create": raw, "tenant": tenant,
            "kernel": kernel, "made_unix": made_unix,
        })
        .to_string()
        .into_bytes()
    }
}

/// The tenant a snapshot's manifest names (a snapshot made before tenants: the single one).
#[must_use]
pub fn manifest_tenant(manifest: &[u8]) -> Tenant {
    let m: Value = serde_json::from_slice(manifest).unwrap_or(Value::Null);
    m.get("tenant")
        .and_then(Value::as_str)
        .map_or_else(Tenant::single, Tenant::new)
}

/// An open state directory.
#[derive(Debug)]
pub struct StateDir {
    dir: PathBuf,
    store: Arc<Store>,
    _lock: File,
    /// Most bytes the snapshots may take together.
    max_bytes: u64,
    /// Kept marks change one at a time (read, add or drop a tenant, write).
    marks: Mutex<()>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StateDirError + '_ {
    move |source| StateDirError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// True for a name a sandbox id may give a file: `[A-Za-z0-9._-]`, not starting with a dot.
fn file_safe(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl StateDir {
    /// Open (making what is missing) the state directory at `dir` and take its lock.
    pub fn open(dir: &Path) -> Result<StateDir, StateDirError> {
        let store = Store::open(dir)?;
        for sub in ["paused", "kept"] {
            let p = dir.join(sub);
            std::fs::DirBuilder::new()
                .mode(0o700)
                .recursive(true)
                .create(&p)
                .map_err(io(&p))?;
        }
        let lock_path = dir.join("lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        if lock.try_lock().is_err() {
            return Err(StateDirError::Locked(dir.to_path_buf()));
        }
        // What a killed server was writing (only now: another server's could be live before
        // the lock was ours).
        for sub in ["paused", "kept"] {
            sweep_temporaries(&dir.join(sub));
        }
        Ok(StateDir {
            dir: dir.to_path_buf(),
            store: Arc::new(store),
            _lock: lock,
            max_bytes: DEFAULT_MAX_BYTES,
            marks: Mutex::new(()),
        })
    }

    /// Bounds the bytes the snapshots may take together.
    #[must_use]
    pub fn with_max_bytes(mut self, max: u64) -> StateDir {
        self.max_bytes = max;
        self
    }

    /// Whether a new snapshot may be written: the store under its maximum and at least 1 GiB
    /// free on its filesystem. (One snapshot can pass the maximum by its own size, which its
    /// sandbox's disk and memory limits bound.) Err says why, for the caller.
    pub fn room(&self) -> Result<(), String> {
        let used: u64 = self
            .store
            .list()
            .map_err(|e| e.to_string())?
            .iter()
            .map(|s| s.stored_bytes)
            .sum();
        if used >= self.max_bytes {
            return Err(format!(
                "the snapshot store holds {} MiB, its maximum (--max-state-mb) is {} MiB: remove \
                 snapshots (snapshot.remove) or dispose of paused sandboxes",
                used >> 20,
                self.max_bytes >> 20
            ));
        }
        let dir = File::open(&self.dir).map_err(|e| e.to_string())?;
        let fs = airlock_jail::mounts::usage(std::os::fd::AsFd::as_fd(&dir))
            .map_err(|e| e.to_string())?;
        let free = fs.bytes_total.saturating_sub(fs.bytes_used);
        if free < MIN_FREE {
            return Err(format!(
                "the state directory's filesystem has {} MiB free, under the 1024 MiB a snapshot \
                 must leave",
                free >> 20
            ));
        }
        Ok(())
    }

    /// The directory.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The snapshot store.
    #[must_use]
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Every paused sandbox recorded (unreadable or malformed records are skipped, logged).
    #[must_use]
    pub fn paused_records(&self) -> Vec<PausedRecord> {
        let dir = self.dir.join("paused");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for e in entries.flatten().take(MAX_RECORDS) {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(id) = name.strip_suffix(".json").filter(|id| file_safe(id)) else {
                continue;
            };
            match read_record(&e.path()) {
                Ok(r) if r.sandbox_id == id => out.push(r),
                Ok(_) => tracing::warn!(file = %name, "a paused record names another sandbox"),
                Err(why) => tracing::warn!(file = %name, %why, "a paused record is unreadable"),
            }
        }
        out
    }

    /// Record `r` durably (replacing one for the same sandbox).
    pub fn record_paused(&self, r: &PausedRecord) -> Result<(), StateDirError> {
        let dir = self.dir.join("paused");
        let name = format!("{}.json", checked(&r.sandbox_id, &dir)?);
        let body = serde_json::to_vec(r).map_err(|e| io(&dir)(std::io::Error::other(e)))?;
        write_durably(&dir, &name, &body).map_err(io(&dir))
    }

    /// Forget the paused record of `sandbox_id` (durably).
    pub fn forget_paused(&self, sandbox_id: &str) -> Result<(), StateDirError> {
        let dir = self.dir.join("paused");
        let path = dir.join(format!("{}.json", checked(sandbox_id, &dir)?));
        remove_durably(&dir, &path)
    }

    /// Mark `id` as kept on request by `tenant` (`sandbox.snapshot`): a resume does not
    /// remove it, and `tenant` may list, use and remove it.
    pub fn keep(&self, id: &SnapshotId, tenant: &Tenant) -> Result<(), StateDirError> {
        let _one = self.marks.lock().unwrap_or_else(PoisonError::into_inner);
        let mut owners = self.keepers(id);
        if owners.contains(tenant) {
            return Ok(());
        }
        owners.push(tenant.clone());
        self.write_keepers(id, &owners)
    }

    /// Whether `id` was kept on request (by anyone).
    #[must_use]
    pub fn kept(&self, id: &SnapshotId) -> bool {
        self.dir.join("kept").join(id.as_str()).exists()
    }

    /// The tenants that kept `id` (none when it has no mark).
    #[must_use]
    pub fn keepers(&self, id: &SnapshotId) -> Vec<Tenant> {
        let path = self.dir.join("kept").join(id.as_str());
        let Ok(f) = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
        else {
            return Vec::new();
        };
        let mut body = String::new();
        if f.take(MAX_RECORD).read_to_string(&mut body).is_err() {
            return Vec::new();
        }
        let named: Vec<Tenant> = body
            .lines()
            .filter(|l| !l.is_empty())
            .map(Tenant::new)
            .collect();
        if named.is_empty() {
            return vec![Tenant::single()];
        }
        named
    }

    /// Drop `tenant`'s mark of `id`; answers whether anyone still keeps it.
    pub fn unkeep(&self, id: &SnapshotId, tenant: &Tenant) -> Result<bool, StateDirError> {
        let _one = self.marks.lock().unwrap_or_else(PoisonError::into_inner);
        let mut owners = self.keepers(id);
        owners.retain(|t| t != tenant);
        self.write_keepers(id, &owners)?;
        Ok(!owners.is_empty())
    }

    fn write_keepers(&self, id: &SnapshotId, owners: &[Tenant]) -> Result<(), StateDirError> {
        let dir = self.dir.join("kept");
        if owners.is_empty() {
            return remove_durably(&dir, &dir.join(id.as_str()));
        }
        let body: String = owners.iter().map(|t| format!("{t}\n")).collect();
        write_durably(&dir, id.as_str(), body.as_bytes()).map_err(io(&dir))
    }
}

fn checked<'a>(id: &'a str, dir: &Path) -> Result<&'a str, StateDirError> {
    if file_safe(id) {
        return Ok(id);
    }
    Err(io(dir)(std::io::Error::other(
        "a sandbox id that cannot name a file",
    )))
}

fn read_record(path: &Path) -> Result<PausedRecord, String> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| e.to_string())?;
    let mut body = Vec::new();
    f.take(MAX_RECORD)
        .read_to_end(&mut body)
        .map_err(|e| e.to_string())?;
    serde_json::from_slice(&body).map_err(|e| e.to_string())
}

/// Remove the `.tmp-*` files a killed writer left in `dir`.
fn sweep_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(".tmp-") {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Write `body` to `dir/name`: a temporary file, fsync, rename, fsync of the directory.
fn write_durably(dir: &Path, name: &str, body: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!(".tmp-{name}-{}", std::process::id()));
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    f.write_all(body)?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))?;
    File::open(dir)?.sync_all()
}

fn remove_durably(dir: &Path, path: &Path) -> Result<(), StateDirError> {
    match std::fs::remove_file(path) {
        Ok(()) => File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(path)(e)),
    }
}
