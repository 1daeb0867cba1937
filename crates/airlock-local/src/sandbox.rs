//! `LocalSandbox`: one sandbox filesystem ([`airlock_broker::SandboxFs`]: its own root, a
//! kernel-bounded `/work`), a fresh executor per `exec` / `run_code` over it, and the no-follow
//! file operations of [`crate::files`].
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
use std::time::Duration;

use airlock_broker::{SandboxFs, ToolHandler, Workload, GUEST_WORK_DIR};
use airlock_jail::dirfd::DirFd;
use airlock_policy::{GuestRelPath, SandboxKey, TransferLimits};
use airlock_router::{
    DirEntry, ExecOptions, ExecResult, FileStat, RunOptions, RunResult, RunStatus, Sandbox,
    SandboxError,
};
use async_trait::async_trait;
use tokio::sync::{watch, Mutex};

use crate::config::LocalConfig;
use crate::files;
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
}

pub(crate) fn backend(detail: impl Into<String>) -> SandboxError {
    SandboxError::Backend {
        detail: detail.into(),
    }
}

impl LocalSandbox {
    pub(crate) fn new(p: Parts) -> LocalSandbox {
        LocalSandbox {
            key: p.key,
            spec_work_dir: p.spec_work_dir.trim_end_matches('/').to_owned(),
            root: RootCell::new(p.root),
            config: p.config,
            files_in: p.files_in,
            tools: p.tools,
            egress: p.egress,
            run_lock: Mutex::new(p.stateful.then(airlock_broker::Kernel::default)),
            disposed: watch::channel(false).0,
            restricted: p.restricted,
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
        drop(self.root.take());
    }
}

fn env_vec(env: &std::collections::BTreeMap<String, String>) -> Vec<(String, String)> {
    env.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[async_trait]
impl Sandbox for LocalSandbox {
    fn key(&self) -> &SandboxKey {
        &self.key
    }

    async fn exec(&self, argv: &[String], opts: &ExecOptions) -> Result<ExecResult, SandboxError> {
        let mut r = self
            .run_plain(
                Workload::Command {
                    argv: argv.to_vec(),
                },
                opts.timeout,
                env_vec(&opts.env),
                opts.working_directory.as_deref(),
            )
            .await?;
        let timed_out = r.status == airlock_broker::RunStatus::Timeout;
        if crate::run::command_not_found(&r) {
            // What a shell answers: exit 127 and the reason on stderr.
            r.exit_code = Some(127);
            r.stderr = format!("{}\n", r.error.as_ref().map_or("", |e| e.message.as_str()));
            r.stderr_raw = r.stderr.clone().into_bytes();
        }
        Ok(ExecResult {
            exit_code: if timed_out { None } else { r.exit_code },
            truncated: r.stdout_truncated || r.stderr_truncated,
            stdout: r.stdout,
            stderr: r.stderr,
            stdout_raw: r.stdout_raw,
            stderr_raw: r.stderr_raw,
            timed_out,
        })
    }

    async fn run_code(&self, code: &str, opts: &RunOptions) -> Result<RunResult, SandboxError> {
        let r = self
            .run_plain(
                Workload::Python {
                    code: code.to_owned(),
                    interpreter: self.python(),
                },
                opts.timeout,
                env_vec(&opts.env),
                None,
            )
            .await?;
        use airlock_broker::RunStatus as B;
        let status = match r.status {
            B::Completed => RunStatus::Completed,
            B::Timeout => RunStatus::Timeout,
            B::MemoryLimit => RunStatus::MemoryLimit,
            B::DiskLimit => RunStatus::DiskLimit,
            B::Error | B::Killed | B::ProtocolError | B::Refused | B::Cancelled => {
                RunStatus::Failed
            }
        };
        let mut stderr = r.stderr;
        if !matches!(r.status, B::Completed | B::Error) {
            // The broker's reason (a kill, a refusal, a protocol error) would be lost in
            // `Failed`: it follows what the program wrote, as a shell's own message would.
            if let Some(e) = &r.error {
                if !stderr.is_empty() && !stderr.ends_with('\n') {
                    stderr.push('\n');
                }
                stderr.push_str(&format!("airlock: {}: {}\n", r.status.as_str(), e.message));
            }
        }
        Ok(RunResult {
            status,
            exit_code: r.exit_code,
            stdout: r.stdout,
            stderr,
            tool_calls: u64::from(r.tool_calls),
        })
    }

    async fn write_file(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
        data: &[u8],
    ) -> Result<(), SandboxError> {
        let rel = self.rel_path(working_directory, path)?;
        let size = data.len() as u64;
        let max = self.files_in.max_bytes_per_file;
        if size > max {
            return Err(SandboxError::TooLarge {
                path: path.to_string(),
                size,
                max,
            });
        }
        let data = data.to_vec();
        self.blocking(move |root| files::write_file(root, &rel, &data))
            .await
    }

    async fn read_file(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
        max_bytes: u64,
    ) -> Result<Vec<u8>, SandboxError> {
        let rel = self.rel_path(working_directory, path)?;
        self.blocking(move |root| files::read_file(root, &rel, max_bytes))
            .await
    }

    async fn stat(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
    ) -> Result<Option<FileStat>, SandboxError> {
        let rel = self.rel_path(working_directory, path)?;
        self.blocking(move |root| files::stat(root, &rel)).await
    }

    async fn list(
        &self,
        working_directory: &str,
        dir: Option<&GuestRelPath>,
    ) -> Result<Vec<DirEntry>, SandboxError> {
        let rel = match (self.prefix(working_directory)?, dir) {
            (None, None) => None,
            (Some(p), None) => Some(p),
            (None, Some(d)) => Some(d.as_str().to_owned()),
            (Some(p), Some(d)) => Some(format!("{p}/{d}")),
        };
        self.blocking(move |root| files::list(root, rel.as_deref()))
            .await
    }

    async fn remove(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
    ) -> Result<(), SandboxError> {
        let rel = self.rel_path(working_directory, path)?;
        self.blocking(move |root| files::remove(root, &rel)).await
    }

    async fn reclaim(
        &self,
        working_directory: &str,
        directory: &GuestRelPath,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        let rel = self.rel_path(working_directory, directory)?;
        tokio::time::timeout(
            timeout,
            self.blocking(move |root| files::reclaim(root, &rel)),
        )
        .await
        .map_err(|_| SandboxError::Timeout)?
    }
}
