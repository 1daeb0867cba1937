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
//!
//! The sandboxes are held by the server's registry (`airlock_server::registry`), the core
//! every face serves: this face asks it for the session's sandbox under the session's key, and
//! turns its typed errors into words for the model in one place ([`said`]).
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_local::LocalRouter;
use airlock_local::{assemble, Assembly, AssemblyError, LocalConfig, LocalSandbox};
use airlock_policy::{Capability, Identity, IsolationScope, SandboxKey, SandboxSpec};
use airlock_router::{Backend, Observers, RouterConfigError};
use airlock_server::json_doc::JsonDoc;
use airlock_server::registry::error::ServerError;
use airlock_server::registry::request::{IdleAction, NewSandbox};
use airlock_server::registry::sandboxes::{Held, Sandboxes as Registry};

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

/// How many sandboxes one session's registry holds at once (one in conversation scope; one per
/// call in flight in call scope).
const MAX_LIVE: usize = 256;

/// Never reclaimed for idleness: a session's sandbox lives as long as the session.
const SESSION_LIFE: Duration = airlock_server::registry::life::MAX_IDLE;

/// One session's sandboxes.
pub struct Sandboxes {
    /// The router (for admission decisions), or why none can be built (the floor is above
    /// this machine's rung): then every call is refused with that reason.
    router: Result<LocalRouter, String>,
    /// The registry holding the sandboxes, over the same router.
    registry: Option<Arc<Registry>>,
    /// This machine's sandbox, in words (a refusal names it).
    detail: String,
    isolation: &'static str,
    config: McpConfig,
    session: SandboxKey,
    /// The session sandbox's id in the registry, once made.
    session_id: Mutex<Option<String>>,
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
    dispose: Option<(Arc<Registry>, String)>,
}

impl Lease {
    /// Ends the call's use: a call-scoped sandbox is disposed (a running executor is cancelled
    /// and waited for, everything it wrote is freed).
    pub async fn release(mut self) {
        if let Some((registry, id)) = self.dispose.take() {
            dispose_call(&registry, &id).await;
        }
    }
}

/// A lease dropped unreleased (its call panicked or was dropped half-way) still disposes its
/// call-scoped sandbox: spawned, since a destructor cannot await.
impl Drop for Lease {
    fn drop(&mut self) {
        let Some((registry, id)) = self.dispose.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move { dispose_call(&registry, &id).await });
            }
            Err(_) => tracing::error!(sandbox = %id, "a call sandbox dropped outside a runtime"),
        }
    }
}

async fn dispose_call(registry: &Registry, id: &str) {
    match registry.dispose(id).await {
        Ok(d) => {
            if let Some(f) = d.failure {
                tracing::warn!(sandbox = %id, failure = %f, "disposing a call sandbox");
            }
        }
        Err(e) => tracing::warn!(sandbox = %id, error = %said(&e), "disposing a call sandbox"),
    }
}

/// A registry error in words for the model (the one mapping of this face).
fn said(e: &ServerError) -> String {
    format!("no sandbox: {}", e.message)
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
        let registry = router.as_ref().ok().map(|r| {
            let epoch = format!("mcp{}", std::process::id());
            Arc::new(Registry::new(
                r.clone(),
                epoch,
                MAX_LIVE,
                Observers::new(None),
            ))
        });
        let mut me = Sandboxes {
            router,
            registry,
            detail: backend.probe().detail.clone(),
            isolation: backend.isolation().as_str(),
            config: config.clone(),
            session,
            session_id: Mutex::new(None),
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
        self.isolation
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
            .map_err(|r| refused(&r, &self.detail))
    }

    /// The sandbox for the next call: the session's one (made on first use), or a fresh one
    /// in call scope.
    pub async fn lease(&self) -> Result<Lease, String> {
        let registry = match (&self.router, &self.registry) {
            (Err(why), _) => return Err(why.clone()),
            (Ok(_), Some(r)) => r,
            (Ok(_), None) => return Err("no sandbox registry".to_owned()),
        };
        if self.scope == IsolationScope::Conversation {
            return self.session_lease(registry).await;
        }
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let key = self
            .session
            .clone()
            .with_call_id(format!("call-{n}"))
            .map_err(|e| e.to_string())?;
        let held = self.make(registry, key).await?;
        Ok(Lease {
            sandbox: Arc::clone(&held.sandbox),
            dispose: Some((Arc::clone(registry), held.id.clone())),
        })
    }

    /// The session's sandbox: the one made for an earlier call while it lives, else a new one.
    async fn session_lease(&self, registry: &Arc<Registry>) -> Result<Lease, String> {
        let known = lock(&self.session_id).clone();
        let held = match known.map(|id| registry.get(&id)) {
            Some(Ok(h)) => h,
            _ => {
                let h = self.make(registry, self.session.clone()).await?;
                *lock(&self.session_id) = Some(h.id.clone());
                h
            }
        };
        held.touch();
        Ok(Lease {
            sandbox: Arc::clone(&held.sandbox),
            dispose: None,
        })
    }

    /// A sandbox of this session's spec under `key`, made through the registry.
    async fn make(&self, registry: &Registry, key: SandboxKey) -> Result<Arc<Held>, String> {
        let request = NewSandbox {
            spec: self.spec.clone(),
            limits: airlock_server::RequestedLimits::default(),
            idle: SESSION_LIFE,
            outputs: airlock_server::registry::request::Outputs::default(),
            tools: Vec::new(),
            key: Some(key),
            metadata: airlock_server::registry::life::Metadata::new(),
            idle_action: IdleAction::Dispose,
            env: Vec::new(),
            lifetime: None,
            raw: JsonDoc(serde_json::Value::Null),
            tenant: airlock_server::tenancy::tenant::Tenant::single(),
        };
        registry
            .create(request, self.config.limits.clone())
            .await
            .map_err(|e| said(&e))
    }

    /// Disposes every sandbox of the session (it ended).
    pub async fn dispose_all(&self) {
        let Some(registry) = &self.registry else {
            return;
        };
        let tenant = airlock_server::tenancy::tenant::Tenant::single();
        let record = registry
            .dispose_scope(&tenant, self.session.scope(), self.session.thread_id())
            .await;
        if let Some(f) = record.undisposed {
            tracing::warn!(failure = %f, "disposing the session's sandboxes");
        }
    }

    /// Live sandboxes of this session.
    pub fn live(&self) -> usize {
        self.registry.as_ref().map_or(0, |r| r.len())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
