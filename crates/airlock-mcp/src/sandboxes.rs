//! The sandboxes of one MCP session: the `local` backend behind the router, under the host's
//! policy, as `airlock serve` holds its own (the floor, denied capabilities and identities,
//! transfer ceilings; without a policy the floor is this machine's own rung).
//!
//! Every tool call is admitted first: the capabilities it needs (`run_code`, `exec`,
//! `host_tools`, `files_in`, `files_out`, `files_list`) go through the router's decision, and a
//! refusal names the check. Then it gets its sandbox: in conversation scope the session's one
//! sandbox (made on first use, files kept across calls, disposed when the session ends), in
//! call scope a fresh one disposed when the call returns. The session sandbox's spec requires
//! every capability the policy allows, so one spec serves every admitted call (`processes` too
//! with `--processes`: the sandbox is then a machine whose background processes and runs share
//! one loopback).
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use airlock_local::LocalRouter;
use airlock_local::{assemble, Assembly, AssemblyError, LocalBackend, LocalConfig, LocalSandbox};
use airlock_policy::{Capability, Identity, IsolationScope, SandboxKey, SandboxSpec};
use airlock_router::{Backend, RouterConfigError, Sandbox};

use crate::config::McpConfig;
use crate::error::McpError;

/// The workload kind of every spec this server asks for.
const KIND: &str = "airlock-mcp";

/// What the tools of this server may need.
const CANDIDATES: [Capability; 6] = [
    Capability::RunCode,
    Capability::Exec,
    Capability::HostTools,
    Capability::FilesIn,
    Capability::FilesOut,
    Capability::FilesList,
];

/// One session's sandboxes.
pub struct Sandboxes {
    /// The router, or why none can be built (the floor is above this machine's rung): then
    /// every call is refused with that reason.
    router: Result<LocalRouter, String>,
    backend: Arc<LocalBackend>,
    config: McpConfig,
    session: SandboxKey,
    spec: SandboxSpec,
    scope: IsolationScope,
    calls: AtomicU64,
}

impl std::fmt::Debug for Sandboxes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandboxes")
            .field("session", &self.session)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// A sandbox lent to one call; [`Lease::release`] disposes a call-scoped one.
#[derive(Debug)]
pub struct Lease {
    /// The sandbox.
    pub sandbox: Arc<LocalSandbox>,
    dispose: Option<(LocalRouter, SandboxKey)>,
}

impl Lease {
    /// Ends the call's use: a call-scoped sandbox is disposed (a running executor is cancelled
    /// and waited for, everything it wrote is freed).
    pub async fn release(self) {
        if let Some((router, key)) = self.dispose {
            if let Err(f) = router.dispose(&key).await {
                tracing::warn!(key = %key, failure = %f, "disposing a call sandbox");
            }
        }
    }
}

static SESSIONS: AtomicU64 = AtomicU64::new(1);

/// A refusal in words for the model: the check, and what this machine's sandbox is.
fn refused(r: &airlock_policy::Refusal, detail: &str) -> String {
    format!("refused by policy: {r} (this machine's local sandbox: {detail})")
}

impl Sandboxes {
    /// The backend and router for `config` (probes this machine's rung).
    pub fn new(config: &McpConfig) -> Result<Sandboxes, McpError> {
        let mut local = LocalConfig::new(config.executor.clone());
        local.limits = config.limits.clone();
        local.runner = std::sync::Arc::clone(&config.runner);
        if config.image.is_some() {
            local.image_python = config.python.clone();
        } else {
            local.python = config.python.clone();
        }
        if let Some(dir) = &config.image_dir {
            local.images = Some(airlock_image::Store::open(dir));
        }
        let (backend, router) = match assemble(local, config.policy.as_ref(), None) {
            Ok(Assembly { backend, router }) => (backend, Ok(router)),
            Err(AssemblyError::Backend(e)) => {
                return Err(McpError::Session(format!("local backend: {e}")))
            }
            Err(AssemblyError::Router { backend, source }) => {
                let why = match source {
                    RouterConfigError::NotPermitted(r) => refused(&r, &backend.probe().detail),
                    other => format!("refused: the router cannot be built: {other}"),
                };
                (backend, Err(why))
            }
        };
        if let Err(why) = &router {
            tracing::warn!("every tool call will be refused: {why}");
        }
        let scope_floor = config
            .policy
            .as_ref()
            .map_or(IsolationScope::Conversation, |p| p.host.min_isolation_scope);
        let scope = config.scope.stricter(scope_floor);
        let n = SESSIONS.fetch_add(1, Ordering::Relaxed);
        let session = SandboxKey::new("mcp", format!("{}-{n}", std::process::id()), "mcp")
            .map_err(|e| McpError::Session(e.to_string()))?;
        let mut me = Sandboxes {
            router,
            backend,
            config: config.clone(),
            session,
            spec: SandboxSpec::builder(KIND)
                .build()
                .map_err(|e| McpError::Session(e.to_string()))?,
            scope,
            calls: AtomicU64::new(0),
        };
        if config.processes && scope == IsolationScope::Call {
            return Err(McpError::Session(
                "the process tools (--processes) need conversation scope, and the policy's \
                 scope floor makes every sandbox call-scoped"
                    .to_owned(),
            ));
        }
        let processes = config.processes.then_some(Capability::Processes);
        let allowed: Vec<Capability> = CANDIDATES
            .into_iter()
            .chain(processes)
            .filter(|c| me.admit(&[*c]).is_ok())
            .collect();
        me.spec = me
            .spec_for(&allowed)
            .map_err(|e| McpError::Session(e.to_string()))?;
        Ok(me)
    }

    /// The scope calls are served under (the flag, raised by the policy's scope floor).
    pub fn scope(&self) -> IsolationScope {
        self.scope
    }

    /// Whether the process tools are served (`--processes`).
    pub fn processes(&self) -> bool {
        self.config.processes
    }

    /// The rung this machine's sandbox holds.
    pub fn isolation(&self) -> &'static str {
        self.backend.isolation().as_str()
    }

    fn spec_for(&self, needs: &[Capability]) -> Result<SandboxSpec, airlock_policy::SpecError> {
        let identities = if needs.contains(&Capability::HostTools) {
            // Upstreams act with airlock's own credentials.
            vec![Identity::App]
        } else {
            Vec::new()
        };
        let mut b = SandboxSpec::builder(KIND);
        if let Some(image) = &self.config.image {
            b = b.image(image);
        }
        b.requires(needs.iter().copied())
            .identities(identities)
            .isolation_scope(self.scope)
            // A conversation keeps one interpreter: variables persist across tool calls.
            .stateful(self.scope == IsolationScope::Conversation)
            .files_in(self.config.files_in)
            .files_out(self.config.outputs)
            .build()
    }

    /// Would the policy let this server serve a call needing `needs`? `Err` is the refusal,
    /// naming the check, and what this machine's sandbox is.
    pub fn admit(&self, needs: &[Capability]) -> Result<(), String> {
        let router = self.router.as_ref().map_err(Clone::clone)?;
        let spec = self.spec_for(needs).map_err(|e| e.to_string())?;
        router
            .ensure_can_serve(&spec)
            .map(|_| ())
            .map_err(|r| refused(&r, &self.backend.probe().detail))
    }

    /// The sandbox for the next call: the session's one (made on first use), or a fresh one
    /// in call scope.
    pub async fn lease(&self) -> Result<Lease, String> {
        let router = self.router.as_ref().map_err(Clone::clone)?;
        let (key, dispose) = match self.scope {
            IsolationScope::Conversation => (self.session.clone(), false),
            IsolationScope::Call => {
                let n = self.calls.fetch_add(1, Ordering::Relaxed);
                let key = self
                    .session
                    .clone()
                    .with_call_id(format!("call-{n}"))
                    .map_err(|e| e.to_string())?;
                (key, true)
            }
        };
        let sandbox = router
            .acquire(&key, &self.spec)
            .await
            .map_err(|e| format!("no sandbox: {e}"))?;
        let address = sandbox.key().clone();
        Ok(Lease {
            sandbox,
            dispose: dispose.then(|| (router.clone(), address)),
        })
    }

    /// Disposes every sandbox of the session (it ended).
    pub async fn dispose_all(&self) {
        let Ok(router) = &self.router else {
            return;
        };
        let record = router
            .dispose_scope(self.session.scope(), self.session.thread_id())
            .await;
        if let Some(f) = record.undisposed {
            tracing::warn!(failure = %f, "disposing the session's sandboxes");
        }
    }

    /// Live sandboxes of this session.
    pub fn live(&self) -> usize {
        self.backend.live()
    }
}
