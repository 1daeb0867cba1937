//! `LocalBackend`: hands out [`LocalSandbox`]es, one private work dir per key.
//!
//! Declarations (see `docs/backends.md`): the probed rung ([`crate::rung`]); capabilities
//! `exec`, `run_code`, `host_tools`, `files_in`, `files_out`, `files_list`, `files_delete`
//! (never `snapshot` or `attached_identity`); egress `{closed}`; scopes `{conversation,
//! call}`; `{posix}`; the default transfer ceilings (files are read host-side, so no frame cap
//! applies). A call key names its own sandbox, because the call id is part of the key that
//! indexes the registry.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use airlock_broker::kernel::Branch;
use airlock_broker::Image;
use airlock_policy::{
    BackendDeclarations, Capability, DisposalFailure, Isolation, IsolationScope, OsFamily,
    SandboxKey, SandboxLimits, SandboxSpec,
};
use airlock_router::{Backend, BackendError, Origin, ScopePurge};
use async_trait::async_trait;
use thiserror::Error;

use crate::config::LocalConfig;
use crate::root::{new_fs, Root};
use crate::rung::{egress_modes, probe_rung, RungProbe};
use crate::sandbox::{LocalSandbox, Parts, ToolsForRun};

/// A backend that could not be constructed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LocalError {
    /// The executor binary is not a file.
    #[error("the executor binary {0} is not a file")]
    NoExecutor(PathBuf),
}

struct Entry {
    sandbox: Arc<LocalSandbox>,
}

/// A router over the local backend: its acquires hand out [`LocalSandbox`]es.
pub type LocalRouter = airlock_router::Router<LocalBackend>;

/// The `local` backend.
pub struct LocalBackend {
    probe: RungProbe,
    declarations: BackendDeclarations,
    config: Arc<LocalConfig>,
    tools: Option<Arc<dyn ToolsForRun>>,
    sandboxes: Mutex<HashMap<SandboxKey, Entry>>,
}

impl std::fmt::Debug for LocalBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBackend")
            .field("isolation", &self.probe.isolation)
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
            Capability::Processes,
            Capability::Ports,
        ])
        .with_limits(SandboxLimits::DEFAULT)
        .with_egress_modes(egress_modes())
        .with_os_families([OsFamily::Posix])
        .with_isolation_scopes([IsolationScope::Conversation, IsolationScope::Call])
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
        let config = Arc::new(config);
        let mut declarations = local_declarations();
        if config.snapshots {
            let mut caps = declarations.effective_capabilities();
            caps.insert(Capability::Snapshot);
            declarations = declarations.with_capabilities(caps);
        }
        Ok(LocalBackend {
            probe,
            declarations,
            config,
            tools: None,
            sandboxes: Mutex::new(HashMap::new()),
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
        // Dropping the sandbox's filesystem frees everything it wrote: it lives only in the
        // sandbox's own namespaces, whatever modes the guest set.
        entry.sandbox.shut_down().await;
        None
    }
}

/// The image a spec names, from the backend's store.
fn image_for(config: &LocalConfig, spec: &SandboxSpec) -> Result<Option<Arc<Image>>, String> {
    let Some(name) = spec.image() else {
        return Ok(None);
    };
    let store = config
        .images
        .as_ref()
        .ok_or_else(|| format!("image {name:?}: this backend has no image store"))?;
    store
        .get(name)
        .map(|i| Some(Arc::new(i)))
        .map_err(|e| e.to_string())
}

#[async_trait]
impl Backend for LocalBackend {
    type Sandbox = LocalSandbox;
    /// A copy-on-write fork's branch ([`LocalSandbox::fork_kernel`]): its root and its kernel.
    type Branch = Branch;

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
        origin: Origin<Branch>,
    ) -> Result<Arc<LocalSandbox>, BackendError> {
        if let Some(e) = lock(&self.sandboxes).get(key) {
            return Ok(Arc::clone(&e.sandbox));
        }
        let egress = crate::egress::for_spec(spec, &self.config).map_err(BackendError::Refused)?;
        let image = image_for(&self.config, spec).map_err(BackendError::Refused)?;
        let machine = crate::processes::wants_machine(spec).map_err(BackendError::Refused)?;
        // A branch brings its root and kernel; a call-scoped sandbox's root is made when
        // something needs it (see `crate::root`).
        let (offered, kernel) = match origin {
            Origin::Branch(b) => (Some(b.fs), Some(b.kernel)),
            Origin::Fresh => (None, None),
        };
        let root = if let Some(fs) = offered {
            Root::Made(fs)
        } else if spec.isolation_scope() == IsolationScope::Call {
            Root::Unmade { image }
        } else {
            Root::Made(Arc::new(
                new_fs(&self.config, image)
                    .await
                    .map_err(BackendError::Other)?,
            ))
        };
        let mut map = lock(&self.sandboxes);
        if let Some(e) = map.get(key) {
            // Another acquire of this key won the race; ours is dropped (and freed).
            return Ok(Arc::clone(&e.sandbox));
        }
        let sandbox = Arc::new(LocalSandbox::new(Parts {
            key: key.clone(),
            spec_work_dir: spec.work_dir().to_owned(),
            root,
            config: Arc::clone(&self.config),
            files_in: *spec.files_in(),
            tools: self.tools.clone(),
            egress,
            stateful: spec.stateful(),
            restricted: spec.restricted(),
            machine,
            kernel,
        }));
        map.insert(
            key.clone(),
            Entry {
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
