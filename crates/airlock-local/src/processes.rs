//! A local sandbox's background processes and ports: the machine (`airlock_broker::machine`)
//! its root is made with when the spec asks for `processes`, the processes started in it, and
//! connections to ports of its loopback.
use std::sync::Arc;
use std::time::Duration;

use airlock_broker::machine::{Process, ProcessRequest};
use airlock_broker::Limits;
use airlock_policy::{Capability, Egress, SandboxSpec};
use airlock_router::SandboxError;

use crate::sandbox::{backend, LocalSandbox};

/// Whether a sandbox of `spec` gets a machine; refused where it cannot have one.
pub(crate) fn wants_machine(spec: &SandboxSpec) -> Result<bool, String> {
    let wanted = spec.requires().contains(&Capability::Processes)
        || spec.requires().contains(&Capability::Ports);
    if wanted && spec.egress() != Egress::Closed {
        return Err(
            "a sandbox with background processes or ports needs closed egress: allowlist \
             egress is per run, and its processes share one network namespace; drop \
             `processes`/`ports` or use closed egress"
                .into(),
        );
    }
    Ok(wanted)
}

/// What a client asks to start.
#[derive(Debug, Clone)]
pub struct ProcessParams {
    /// The command and its arguments.
    pub argv: Vec<String>,
    /// Absolute guest directory (`/work` when None).
    pub working_directory: Option<String>,
    /// The whole environment.
    pub env: Vec<(String, String)>,
    /// stdin is a pipe the client writes.
    pub stdin: bool,
    /// A terminal of (rows, cols).
    pub pty: Option<(u16, u16)>,
    /// Killed after this long.
    pub timeout: Option<Duration>,
    /// The per-process limits (the backend's when None).
    pub limits: Option<Limits>,
}

impl LocalSandbox {
    /// Start a background process in this sandbox's machine.
    pub async fn start_process(&self, p: ProcessParams) -> Result<Arc<Process>, SandboxError> {
        if !self.machine {
            return Err(SandboxError::NotSupported(Capability::Processes));
        }
        if *self.disposed.borrow() {
            return Err(backend("the sandbox was disposed"));
        }
        let cwd = match p.working_directory.as_deref() {
            Some(wd) => self.prefix(wd)?,
            None => None,
        };
        let fs = self.fs().await?;
        let mut limits = p.limits.unwrap_or_else(|| self.config.limits.clone());
        limits.egress = self.egress.clone();
        let machine = self.machine_of(&fs, &limits).await?;
        let req = ProcessRequest {
            argv: p.argv,
            cwd,
            env: p.env,
            stdin: p.stdin,
            pty: p.pty,
            timeout: p.timeout,
            limits,
            executor: self.config.executor.clone(),
        };
        self.processes
            .start(&fs, &machine, req)
            .await
            .map_err(|e| backend(e.to_string()))
    }

    /// The process `id` of this sandbox.
    #[must_use]
    pub fn process(&self, id: &str) -> Option<Arc<Process>> {
        self.processes.get(id)
    }

    /// Every process of this sandbox (recently ended ones included), oldest first.
    #[must_use]
    pub fn process_list(&self) -> Vec<Arc<Process>> {
        self.processes.list()
    }

    /// A TCP connection to 127.0.0.1:`port` inside the sandbox's own network namespace (made
    /// by the sandbox's init, handed to the broker); refused if the sandbox has no machine or
    /// nothing listens there.
    pub async fn dial_port(&self, port: u16) -> Result<tokio::net::TcpStream, SandboxError> {
        if !self.machine {
            return Err(backend(
                "this sandbox has no machine: create it with `ports` to reach its ports",
            ));
        }
        let fs = self.fs().await?;
        // No machine yet: nothing ever ran in the sandbox, so nothing listens.
        let machine = fs.machine().cloned().ok_or_else(|| {
            backend(airlock_broker::machine::MachineError::NotListening(port).to_string())
        })?;
        machine.dial(port).await.map_err(|e| backend(e.to_string()))
    }

    /// The machine of `fs`, started now (bounded by `limits`: the sandbox's run limits, which
    /// its cgroup or its watchdog holds every background process to together) if it is not yet.
    pub(crate) async fn machine_of(
        &self,
        fs: &airlock_broker::SandboxFs,
        limits: &Limits,
    ) -> Result<Arc<airlock_broker::machine::Machine>, SandboxError> {
        fs.start_machine(&self.config.executor, limits)
            .await
            .map_err(|e| backend(e.to_string()))
    }
}
