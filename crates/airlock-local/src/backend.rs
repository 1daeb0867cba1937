//! `LocalBackend`: hands out [`LocalSandbox`]es, one private work dir per key.
//!
//! Declarations (see `docs/backends.md`): the probed rung ([`crate::rung`]); capabilities
//! `exec`, `run_code`, `host_tools`, `files_in`, `files_out`, `files_list`, `files_delete`
//! (never `snapshot` or `attached_identity`); egress `{closed}`; scopes `{conversation,
//! call}`; `{posix}`; the default transfer ceilings (files are read host-side, so no frame cap
//! applies). A call key names its own sandbox, because the call id is part of the key that
//! indexes the registry.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use airlock_jail::dirfd::DirFd;
use airlock_policy::{
    BackendDeclarations, Capability, DisposalCode, DisposalFailure, Isolation, IsolationScope,
    OsFamily, SandboxKey, SandboxLimits, SandboxSpec,
};
use airlock_router::{Backend, BackendError, Sandbox, ScopePurge};
use async_trait::async_trait;
use thiserror::Error;

use crate::config::LocalConfig;
use crate::rung::{egress_modes, probe_rung, RungProbe};
use crate::sandbox::{LocalSandbox, Parts, ToolsForRun};

/// A backend that could not be constructed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LocalError {
    /// The executor binary is not a file.
    #[error("the executor binary {0} is not a file")]
    NoExecutor(PathBuf),
    /// The root directory could not be created or opened.
    #[error("the sandbox root could not be prepared: {0}")]
    Root(std::io::Error),
    /// The root's path is not UTF-8 (the guest is told its work dir as a string).
    #[error("the sandbox root path is not UTF-8")]
    NotUtf8,
}

struct Entry {
    name: String,
    sandbox: Arc<LocalSandbox>,
}

/// The `local` backend.
pub struct LocalBackend {
    probe: RungProbe,
    declarations: BackendDeclarations,
    config: Arc<LocalConfig>,
    root_path: PathBuf,
    root: DirFd,
    tools: Option<Arc<dyn ToolsForRun>>,
    sandboxes: Mutex<HashMap<SandboxKey, Entry>>,
    _tmp: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for LocalBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBackend")
            .field("isolation", &self.probe.isolation)
            .field("root", &self.root_path)
            .finish_non_exhaustive()
    }
}

/// The local backend's declarations.
#[must_use]
pub fn local_declarations() -> BackendDeclarations {
    BackendDeclarations::silent()
        .with_capabilities([
            Capability::Exec,
            Capability::RunCode,
            Capability::HostTools,
            Capability::FilesIn,
            Capability::FilesOut,
            Capability::FilesList,
            Capability::FilesDelete,
        ])
        .with_limits(SandboxLimits::DEFAULT)
        .with_egress_modes(egress_modes())
        .with_os_families([OsFamily::Posix])
        .with_isolation_scopes([IsolationScope::Conversation, IsolationScope::Call])
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn fresh_name() -> std::io::Result<String> {
    let mut buf = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

impl LocalBackend {
    /// Probes this machine for its rung and prepares the root.
    pub fn new(config: LocalConfig) -> Result<LocalBackend, LocalError> {
        LocalBackend::with_probe(config, probe_rung())
    }

    /// As [`new`](Self::new) with a given probe result (tests; a host that already probed).
    pub fn with_probe(config: LocalConfig, probe: RungProbe) -> Result<LocalBackend, LocalError> {
        if !config.executor.is_file() {
            return Err(LocalError::NoExecutor(config.executor));
        }
        let (root_path, tmp) = match &config.root {
            Some(r) => {
                std::fs::create_dir_all(r).map_err(LocalError::Root)?;
                (std::fs::canonicalize(r).map_err(LocalError::Root)?, None)
            }
            None => {
                let t = tempfile::Builder::new()
                    .prefix("airlock-local-")
                    .tempdir()
                    .map_err(LocalError::Root)?;
                (
                    std::fs::canonicalize(t.path()).map_err(LocalError::Root)?,
                    Some(t),
                )
            }
        };
        if root_path.to_str().is_none() {
            return Err(LocalError::NotUtf8);
        }
        let root = DirFd::open(&root_path).map_err(LocalError::Root)?;
        Ok(LocalBackend {
            probe,
            declarations: local_declarations(),
            config: Arc::new(config),
            root_path,
            root,
            tools: None,
            sandboxes: Mutex::new(HashMap::new()),
            _tmp: tmp,
        })
    }

    /// Serves `call_tool` from every run through `tools` (e.g. a host-tool registry adapter).
    #[must_use]
    pub fn with_tools(mut self, tools: Arc<dyn ToolsForRun>) -> Self {
        self.tools = Some(tools);
        self
    }

    /// What the rung probe found.
    #[must_use]
    pub fn probe(&self) -> &RungProbe {
        &self.probe
    }

    /// The live sandbox for `key`, if any.
    #[must_use]
    pub fn sandbox(&self, key: &SandboxKey) -> Option<Arc<LocalSandbox>> {
        lock(&self.sandboxes)
            .get(key)
            .map(|e| Arc::clone(&e.sandbox))
    }

    /// How many sandboxes are alive.
    #[must_use]
    pub fn live(&self) -> usize {
        lock(&self.sandboxes).len()
    }

    async fn destroy(&self, entry: Entry) -> Option<DisposalFailure> {
        entry.sandbox.shut_down().await;
        let name = entry.name;
        let root = match self.root.reopen() {
            Ok(r) => r,
            Err(e) => {
                return Some(DisposalFailure::new(
                    DisposalCode::Unknown,
                    format!("sandbox root could not be reopened: {}", e.kind()),
                ))
            }
        };
        let removed = tokio::task::spawn_blocking(move || {
            let mut budget = crate::files::MAX_RECLAIM_ENTRIES;
            root.remove_tree_at(&name, &mut budget)
        })
        .await;
        match removed {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(DisposalFailure::new(
                DisposalCode::Unknown,
                format!("work dir not removed: {}", e.kind()),
            )),
            Err(e) => Some(DisposalFailure::new(
                DisposalCode::Unknown,
                format!("removal task failed: {e}"),
            )),
        }
    }
}

#[async_trait]
impl Backend for LocalBackend {
    fn name(&self) -> &str {
        "local"
    }

    fn isolation(&self) -> Isolation {
        self.probe.isolation
    }

    fn declarations(&self) -> &BackendDeclarations {
        &self.declarations
    }

    async fn acquire(
        &self,
        key: &SandboxKey,
        spec: &SandboxSpec,
    ) -> Result<Arc<dyn Sandbox>, BackendError> {
        let mut map = lock(&self.sandboxes);
        if let Some(e) = map.get(key) {
            return Ok(Arc::clone(&e.sandbox) as Arc<dyn Sandbox>);
        }
        let egress = crate::egress::for_spec(spec, &self.config).map_err(BackendError::Refused)?;
        let other = |e: std::io::Error| BackendError::Other(format!("work dir: {}", e.kind()));
        let name = fresh_name().map_err(other)?;
        self.root.mkdir_at(&name, 0o700).map_err(other)?;
        let dir = self.root.open_dir_at(&name).map_err(other)?;
        let host_dir = self.root_path.join(&name);
        let host_str = host_dir
            .to_str()
            .ok_or_else(|| BackendError::Other("work dir path is not UTF-8".into()))?
            .to_owned();
        let sandbox = Arc::new(LocalSandbox::new(Parts {
            key: key.clone(),
            spec_work_dir: spec.work_dir().to_owned(),
            host_dir,
            host_str,
            root: dir,
            config: Arc::clone(&self.config),
            files_in: *spec.files_in(),
            tools: self.tools.clone(),
            egress,
        }));
        map.insert(
            key.clone(),
            Entry {
                name,
                sandbox: Arc::clone(&sandbox),
            },
        );
        Ok(sandbox)
    }

    async fn dispose(&self, key: &SandboxKey) -> Option<DisposalFailure> {
        let entry = lock(&self.sandboxes).remove(key);
        match entry {
            Some(e) => self.destroy(e).await,
            None => None,
        }
    }

    async fn dispose_scope(&self, scope: &str, thread_id: &str) -> ScopePurge {
        let entries: Vec<Entry> = {
            let mut map = lock(&self.sandboxes);
            let keys: Vec<SandboxKey> = map
                .keys()
                .filter(|k| k.in_conversation(scope, thread_id))
                .cloned()
                .collect();
            keys.iter().filter_map(|k| map.remove(k)).collect()
        };
        let mut purge = ScopePurge::default();
        let mut failures = Vec::new();
        for e in entries {
            match self.destroy(e).await {
                None => purge.disposed += 1,
                Some(f) => failures.push(f),
            }
        }
        purge.failure = DisposalFailure::fold(failures);
        purge
    }
}
