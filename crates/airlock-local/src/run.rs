//! One run in a [`LocalSandbox`]: a fresh executor over the sandbox's filesystem, or, for
//! `run_code` in a stateful sandbox, a cell of its kernel ([`airlock_broker::Kernel`]).
//!
//! [`LocalSandbox::run_request`] is the whole-result form a server uses (its own tool handler,
//! cancellation, a live output tap, the broker's full [`airlock_broker::RunResult`], refusals
//! and cancellations included as results); the `Sandbox` trait's `run_code`/`exec` are built
//! on it.
use std::time::{Duration, Instant};

use airlock_broker::output::OutputTap;
use airlock_broker::run::Cancel;
use airlock_broker::{Job, Limits, RunSpec, ToolHandler, Workload};
use airlock_router::{EgressDecided, SandboxError};

use crate::files;
use crate::root::ForRun;
use crate::sandbox::{backend, LocalSandbox};

/// What one run asks for.
pub struct RunRequest<'a> {
    /// The program or command.
    pub workload: Workload,
    /// Wall-clock bound from the call (time spent queued counts).
    pub timeout: Duration,
    /// Limits other than the timeout (the backend's when None).
    pub limits: Option<Limits>,
    /// The complete environment.
    pub env: Vec<(String, String)>,
    /// Absolute guest directory to run in (`/work` when None).
    pub working_directory: Option<&'a str>,
    /// The tool handler (the backend's registry door, or none, when None).
    pub tools: Option<&'a dyn ToolHandler>,
    /// Ends the run early (status `cancelled`) when it resolves.
    pub cancel: Option<Cancel>,
    /// A live copy of the output.
    pub output: Option<OutputTap>,
    /// Nothing runs in this sandbox after this run and no file of it is read: a sandbox whose
    /// root is not made yet lets the run's stage build its own (`crate::root`).
    pub last: bool,
}

impl std::fmt::Debug for RunRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRequest")
            .field("workload", &self.workload)
            .field("timeout", &self.timeout)
            .field("working_directory", &self.working_directory)
            .finish_non_exhaustive()
    }
}

impl<'a> RunRequest<'a> {
    /// A plain run: the backend's limits and tools, no cancel, no tap.
    #[must_use]
    pub fn new(workload: Workload, timeout: Duration, env: Vec<(String, String)>) -> Self {
        RunRequest {
            workload,
            timeout,
            limits: None,
            env,
            working_directory: None,
            tools: None,
            cancel: None,
            output: None,
            last: false,
        }
    }
}

impl LocalSandbox {
    /// Run once over this sandbox's filesystem and return the broker's whole result. Errors are
    /// only what prevents a run from being attempted (queued past the deadline, disposed, a bad
    /// working directory).
    pub async fn run_request(
        &self,
        req: RunRequest<'_>,
    ) -> Result<airlock_broker::RunResult, SandboxError> {
        let deadline = Instant::now() + req.timeout;
        let Ok(mut held) = tokio::time::timeout(req.timeout, self.run_lock.lock()).await else {
            return Err(SandboxError::QueuedTimeout);
        };
        if *self.disposed.borrow() {
            return Err(backend("the sandbox was disposed"));
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(SandboxError::QueuedTimeout);
        }
        let cwd = self.checked_cwd(req.working_directory).await?;
        let mut limits = req.limits.unwrap_or_else(|| self.config.limits.clone());
        limits.timeout = remaining;
        limits.egress = self.egress.clone();
        let (sandbox, image) = match self
            .root
            .for_run(&self.config, req.last)
            .await
            .map_err(backend)?
        {
            ForRun::Join(fs) => (Some(fs), None),
            ForRun::Own(image) => (None, image),
        };
        if let Some(fs) = sandbox.as_ref().filter(|_| self.machine) {
            // Every run of a sandbox with a machine joins it: started before the first run.
            self.machine_of(fs, &limits).await?;
        }
        let spec = RunSpec {
            workload: req.workload,
            limits,
            sandbox,
            image,
            cwd,
            env: req.env,
            executor: self.config.executor.clone(),
            output: req.output,
            restricted: self
                .restricted
                .then(|| crate::config::guard_of(&self.config.restricted)),
        };
        let mut rx = self.disposed.subscribe();
        let caller_cancel = req.cancel;
        let cancel: Cancel = Box::pin(async move {
            let disposed = async {
                let _ = rx.wait_for(|d| *d).await;
            };
            match caller_cancel {
                Some(c) => tokio::select! { () = disposed => {}, () = c => {} },
                None => disposed.await,
            }
        });
        let own;
        let handler: &dyn ToolHandler = match (req.tools, &self.tools) {
            (Some(t), _) => t,
            (None, Some(t)) => {
                own = t.for_run(&self.key);
                own.as_ref()
            }
            (None, None) => &airlock_broker::NoTools,
        };
        let sandbox = self.key.to_string();
        let job = Job {
            spec,
            tools: handler,
            cancel,
            sandbox: &sandbox,
            kernel: held.as_mut(),
        };
        let result =
            self.config
                .runner
                .run(job)
                .await
                .map_err(|refusal| SandboxError::OverCapacity {
                    detail: refusal.to_string(),
                })?;
        self.report_egress(&result);
        Ok(result)
    }

    /// The run's cwd relative to /work, checked to be a real directory reached with no link
    /// (no guest process runs between runs, so it stays that way until spawn).
    async fn checked_cwd(&self, wd: Option<&str>) -> Result<Option<String>, SandboxError> {
        let Some(rel) = wd.map(|wd| self.prefix(wd)).transpose()?.flatten() else {
            return Ok(None);
        };
        let check = rel.clone();
        self.blocking(move |root| {
            root.open_dir(&check)
                .map(drop)
                .map_err(|e| files::map_err("open", &check, &e))
        })
        .await?;
        Ok(Some(rel))
    }

    fn report_egress(&self, result: &airlock_broker::RunResult) {
        for d in &result.egress {
            self.config.observer.emit(
                || {
                    let allowed = d.decision == "allow";
                    EgressDecided::new(self.key.clone(), d.host.clone(), d.port, allowed, d.reason)
                },
                |o, e| o.egress_decided(e),
            );
        }
    }

    /// [`LocalSandbox::run_request`] for the `Sandbox` trait: a refusal or cancellation is an
    /// error there.
    pub(crate) async fn run_plain(
        &self,
        workload: Workload,
        timeout: Duration,
        env: Vec<(String, String)>,
        working_directory: Option<&str>,
    ) -> Result<airlock_broker::RunResult, SandboxError> {
        let mut req = RunRequest::new(workload, timeout, env);
        req.working_directory = working_directory;
        let result = self.run_request(req).await?;
        match result.status {
            airlock_broker::RunStatus::Refused => Err(backend(format!(
                "the sandbox refused to start: {}",
                result.error.as_ref().map_or("", |e| e.message.as_str())
            ))),
            airlock_broker::RunStatus::Cancelled => Err(backend("the run was cancelled")),
            // A command that is not there is the shell's exit 127 (the exec caller sees it);
            // anything else the run names that is not there (a working directory) an error.
            _ if not_found(&result) && !command_not_found(&result) => Err(backend(
                result.error.as_ref().map_or("", |e| e.message.as_str()),
            )),
            _ => Ok(result),
        }
    }
}

/// Whether the run did not start because something it names is not there (`not_found`).
pub(crate) fn not_found(r: &airlock_broker::RunResult) -> bool {
    r.exit_code.is_none()
        && r.signal.is_none()
        && r.error.as_ref().map(|e| e.code) == Some(airlock_protocol::ErrorCode::NotFound.code())
}

/// Whether the run did not start because its command is not there.
pub(crate) fn command_not_found(r: &airlock_broker::RunResult) -> bool {
    not_found(r)
        && r.error
            .as_ref()
            .is_some_and(|e| e.message.starts_with("command not found"))
}
