//! `LocalSandbox`: one sandbox filesystem ([`airlock_broker::SandboxFs`]: its own root, a
//! kernel-bounded `/work`), a fresh executor per `exec` / `run_code` over it, and the no-follow
//! file operations of [`crate::files`] (the router's `Sandbox` trait is in
//! [`crate::sandbox_trait`]).
//!
//! The guest sees its work dir at `/work` ([`LocalSandbox::work_dir`]), the same for every
//! sandbox. The file methods accept that path or the spec's work dir as `working_directory`
//! (or a directory beneath either), and resolve everything beneath the work dir handle the
//! sandbox's assembly handed back, with the sandbox owner's filesystem ids. Disposal drops the
//! filesystem: nothing the sandbox wrote remains anywhere.
//!
//! Runs on one sandbox are serialised; a run's timeout counts time spent queued, and a
//! deadline that expires in the queue is [`SandboxError::QueuedTimeout`]. Disposal cancels a
//! running executor and waits for it (the broker returns only once every process of the run
//! is gone) before the work dir is removed.

use std::sync::Arc;

use airlock_broker::{SandboxFs, ToolHandler, GUEST_WORK_DIR};
use airlock_jail::dirfd::DirFd;
use airlock_policy::{GuestRelPath, SandboxKey, TransferLimits};
use airlock_router::SandboxError;
use tokio::sync::{watch, Mutex};

use crate::config::LocalConfig;
use crate::root::{Root, RootCell};

/// Makes the tool handler for one run (so a per-run call cap starts at zero each run).
pub trait ToolsForRun: Send + Sync {
    /// A handler for the next run of the sandbox addressed by `key`.
    fn for_run(&self, key: &SandboxKey) -> Box<dyn ToolHandler>;
}

/// One local sandbox.
pub struct LocalSandbox {
    pub(crate) key: SandboxKey,
    pub(crate) spec_work_dir: String,
    pub(crate) root: RootCell,
    pub(crate) config: Arc<LocalConfig>,
    pub(crate) files_in: TransferLimits,
    pub(crate) tools: Option<Arc<dyn ToolsForRun>>,
    pub(crate) egress: airlock_egress::EgressSpec,
    /// Held by the running executor; holds the kernel of a stateful sandbox.
    pub(crate) run_lock: Mutex<Option<airlock_broker::Kernel>>,
    pub(crate) disposed: watch::Sender<bool>,
    /// Python runs under the config's restricted language profile.
    pub(crate) restricted: bool,
    /// Its background processes (a sandbox with a machine).
    pub(crate) processes: airlock_broker::machine::Processes,
    /// The sandbox has a machine (its spec asks for `processes`).
    pub(crate) machine: bool,
}

/// What a sandbox holds at one moment ([`LocalSandbox::usage_now`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Its disk (the one tmpfs behind `/work`, `/tmp`, `/dev/shm`), once its root is made.
    pub disk: Option<airlock_jail::mounts::Usage>,
    /// The memory its machine's cgroup charges (the init and background processes), when it
    /// has a machine with a cgroup (a root server); a run's own memory is the run's.
    pub memory_bytes: Option<u64>,
}

impl std::fmt::Debug for LocalSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalSandbox")
            .field("key", &self.key)
            .field("work_dir", &GUEST_WORK_DIR)
            .finish_non_exhaustive()
    }
}

pub(crate) struct Parts {
    pub(crate) key: SandboxKey,
    pub(crate) spec_work_dir: String,
    pub(crate) root: Root,
    pub(crate) config: Arc<LocalConfig>,
    pub(crate) files_in: TransferLimits,
    pub(crate) tools: Option<Arc<dyn ToolsForRun>>,
    pub(crate) egress: airlock_egress::EgressSpec,
    /// `run_code` calls share one interpreter.
    pub(crate) stateful: bool,
    /// Python runs under the config's restricted language profile.
    pub(crate) restricted: bool,
    /// The sandbox has a machine (its spec asks for `processes` or `ports`).
    pub(crate) machine: bool,
    /// The kernel it starts with (a fork's branch's), instead of a new one when stateful.
    pub(crate) kernel: Option<airlock_broker::Kernel>,
}

pub(crate) fn backend(detail: impl Into<String>) -> SandboxError {
    SandboxError::Backend {
        detail: detail.into(),
    }
}

impl LocalSandbox {
    pub(crate) fn new(p: Parts) -> LocalSandbox {
        let cow_fork = p.config.cow_fork && !p.machine;
        LocalSandbox {
            key: p.key,
            spec_work_dir: p.spec_work_dir.trim_end_matches('/').to_owned(),
            root: RootCell::new(p.root, p.machine),
            config: p.config,
            files_in: p.files_in,
            tools: p.tools,
            egress: p.egress,
            run_lock: Mutex::new(p.kernel.or_else(|| {
                p.stateful.then(|| {
                    if cow_fork {
                        airlock_broker::Kernel::forkable()
                    } else {
                        airlock_broker::Kernel::default()
                    }
                })
            })),
            disposed: watch::channel(false).0,
            restricted: p.restricted,
            processes: airlock_broker::machine::Processes::default(),
            machine: p.machine,
        }
    }

    /// A sandbox over a filesystem the caller created (e.g. the CLI's one-shot run), with no
    /// backend behind it: dropping every handle frees everything.
    pub fn over_fs(
        key: SandboxKey,
        spec: &airlock_policy::SandboxSpec,
        config: LocalConfig,
        fs: Arc<SandboxFs>,
    ) -> Result<LocalSandbox, String> {
        let egress = crate::egress::for_spec(spec, &config).map_err(|e| e.to_string())?;
        Ok(LocalSandbox::new(Parts {
            key,
            spec_work_dir: spec.work_dir().to_owned(),
            root: Root::Made(fs),
            config: Arc::new(config),
            files_in: *spec.files_in(),
            tools: None,
            egress,
            stateful: spec.stateful(),
            restricted: spec.restricted(),
            machine: false,
            kernel: None,
        }))
    }

    /// The interpreter `run_code` asks for: the backend's, or its image interpreter when the
    /// sandbox's root is an image.
    #[must_use]
    pub fn python(&self) -> Option<std::path::PathBuf> {
        if self.root.on_image() {
            self.config.image_python.clone()
        } else {
            self.config.python.clone()
        }
    }

    /// What the sandbox holds now, read without making anything (cheap: one `fstatvfs` and
    /// one cgroup file).
    #[must_use]
    pub fn usage_now(&self) -> Usage {
        let fs = self.root.current();
        Usage {
            disk: fs.as_ref().and_then(|f| f.usage()),
            memory_bytes: fs
                .as_ref()
                .and_then(|f| f.machine())
                .and_then(|m| m.memory_bytes()),
        }
    }

    /// The work dir as the guest sees it (`/work`).
    #[must_use]
    pub fn work_dir(&self) -> &str {
        GUEST_WORK_DIR
    }

    /// The sandbox's filesystem (made now if it was not), unless it was disposed.
    pub(crate) async fn fs(&self) -> Result<Arc<SandboxFs>, SandboxError> {
        self.root.made(&self.config).await.map_err(backend)
    }

    /// The path of `rel` relative to the work dir for a `working_directory` argument: the
    /// spec's work dir, the host path, or a directory beneath either.
    pub(crate) fn prefix(&self, working_directory: &str) -> Result<Option<String>, SandboxError> {
        let wd = working_directory.trim_end_matches('/');
        for base in [self.spec_work_dir.as_str(), GUEST_WORK_DIR] {
            if wd == base {
                return Ok(None);
            }
            if let Some(rest) = wd.strip_prefix(base).and_then(|r| r.strip_prefix('/')) {
                let rel = GuestRelPath::parse(rest)?;
                return Ok(Some(rel.as_str().to_owned()));
            }
        }
        Err(SandboxError::NotConfined {
            path: working_directory.to_owned(),
        })
    }

    pub(crate) fn rel_path(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
    ) -> Result<String, SandboxError> {
        Ok(match self.prefix(working_directory)? {
            Some(p) => format!("{p}/{path}"),
            None => path.as_str().to_owned(),
        })
    }

    pub(crate) async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&DirFd) -> Result<T, SandboxError> + Send + 'static,
    ) -> Result<T, SandboxError> {
        let fs = self.fs().await?;
        tokio::task::spawn_blocking(move || fs.as_owner(f))
            .await
            .map_err(|e| backend(format!("file task failed: {e}")))?
    }

    /// Cancels a running executor, waits until it is gone, and refuses every later run.
    pub(crate) async fn shut_down(&self) {
        self.disposed.send_replace(true);
        let mut gone = self.run_lock.lock().await;
        if let Some(kernel) = gone.as_mut() {
            kernel.shut_down().await;
        }
        let root = self.root.take();
        if let crate::root::Root::Made(fs) = &root {
            if let Some(machine) = fs.machine() {
                // Every background process dies with the machine's pid 1; each one's stage is
                // reaped before the disposal answers.
                machine.end().await;
                self.processes.reap_all().await;
            }
        }
        drop(root);
    }
}
