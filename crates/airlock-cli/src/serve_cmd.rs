//! `airlock serve`: the broker as a server, over WebSocket (`--listen ADDR`) or stdio.
//!
//! Refuses to start without authentication (a token from `--token-file` or `AIRLOCK_TOKEN`)
//! unless `--insecure-no-auth` is given, and refuses a non-loopback address unless
//! `--allow-remote` is. SIGTERM and SIGINT drain it (`airlock_server::server::drain`): nothing new is
//! admitted, runs in flight may finish for `--drain-grace` (a second signal cuts it short),
//! then what is left is cancelled (each run still gets its terminal response), every sandbox
//! whose spec allows `snapshot` is paused to the state directory, the others are disposed of,
//! and the process exits 0.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use airlock_broker::Limits;
use airlock_broker::{Pool, PoolConfig, Runner, RunnerConfig};
use airlock_policy::{Capability, Egress, RunLimits};
use airlock_server::{Admission, AuditSink, Auth, Ceilings, Server, ServerConfig};
use anyhow::{bail, Context};

use crate::logs::{LogFormat, LogLevel};
use crate::policy_gate::{needs, Gate};
use crate::zygote_choice::ZygoteChoice;
use clap::Args;
use std::io::Write;

/// Options of `airlock serve`.
#[derive(Debug, Args)]
pub struct ServeOpts {
    /// Serve WebSocket on this address (loopback only unless --allow-remote), e.g. 127.0.0.1:7878.
    #[arg(
        long,
        value_name = "ADDR",
        conflicts_with = "stdio",
        required_unless_present = "stdio"
    )]
    pub listen: Option<SocketAddr>,
    /// Also serve /metrics, /healthz and /readyz on this address, with no token (restrict who
    /// reaches it by network; loopback only unless --allow-remote). With --listen, a second
    /// stdout line says `metrics on http://ADDR`.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Serve one connection on stdin/stdout with Content-Length framing.
    #[arg(long)]
    pub stdio: bool,
    /// Read the bearer token from this file (otherwise from AIRLOCK_TOKEN), or the tenants
    /// of a tenants file (`airlock token add`; read again on SIGHUP).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// DANGEROUS: accept WebSocket connections without a token; anyone who can reach the
    /// port can run code.
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// Allow binding a non-loopback address.
    #[arg(long)]
    pub allow_remote: bool,
    /// Runs executing at once, server-wide (default: 2 x cores); more queue.
    #[arg(long, value_name = "N")]
    pub max_concurrent_runs: Option<usize>,
    /// WebSocket connections served at once.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_connections: usize,
    /// Sandboxes (`sandbox.create`) held at once, server-wide; one more is `over_capacity`.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_sandboxes: usize,
    /// Default wall-clock limit of a run, seconds (lowered to the ceiling if above it).
    #[arg(long, default_value_t = RunLimits::DEFAULT.timeout_seconds as f64)]
    pub timeout: f64,
    /// Default memory limit of a run, MiB.
    #[arg(long, default_value_t = RunLimits::DEFAULT.memory_mb)]
    pub memory: u64,
    /// Default tool calls per run.
    #[arg(long, default_value_t = RunLimits::DEFAULT.max_tool_calls as u32)]
    pub max_tool_calls: u32,
    /// Default captured bytes per output stream.
    #[arg(long, default_value_t = RunLimits::DEFAULT.max_output_bytes as usize)]
    pub max_output: usize,
    /// Ceiling: the longest timeout a request may ask for, seconds.
    #[arg(long, default_value_t = 300.0)]
    pub ceiling_timeout: f64,
    /// Ceiling: the largest memory limit a request may ask for, MiB.
    #[arg(long, default_value_t = 1024)]
    pub ceiling_memory: u64,
    /// Ceiling: the most tool calls a request may ask for.
    #[arg(long, default_value_t = 1024)]
    pub ceiling_tool_calls: u32,
    /// Ceiling: the largest output cap a request may ask for, bytes.
    #[arg(long, default_value_t = 256 * 1024)]
    pub ceiling_output: usize,
    /// How long the orchestrator has to answer one call_tool, seconds.
    #[arg(long, default_value_t = 60.0)]
    pub tool_timeout: f64,
    /// How long a shutdown waits for cancelled runs to end, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub shutdown_timeout: f64,
    /// On SIGTERM/SIGINT, how long runs in flight may go on finishing before they are
    /// cancelled, seconds (0: cancel at once). A second signal cuts it short.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub drain_grace: f64,
    /// The Python interpreter (default: python3 on PATH).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// The image store sandboxes' `spec.image` names are looked up in [default:
    /// $AIRLOCK_IMAGE_DIR, /var/lib/airlock/images as root, else ~/.local/share/airlock/images].
    #[arg(long, value_name = "DIR")]
    pub image_dir: Option<PathBuf>,
    /// Append one JSON line per run to this file.
    #[arg(long, value_name = "PATH")]
    pub audit: Option<PathBuf>,
    /// Where snapshots and paused sandboxes are kept (mode 0700, one server at a time)
    /// [default: $AIRLOCK_STATE_DIR, /var/lib/airlock/state as root, else
    /// $XDG_STATE_HOME/airlock or ~/.local/state/airlock]. A default that cannot be opened
    /// leaves the server without snapshots (it says so); a named one that cannot is an error.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Most MiB the snapshot store may hold: a snapshot, pause or fork past it is refused
    /// `over_capacity` (as is one that would leave under 1 GiB free on its filesystem).
    #[arg(long, value_name = "MIB", default_value_t = airlock_server::state_dir::DEFAULT_MAX_BYTES >> 20)]
    pub max_state_mb: u64,
    /// The admission budget, MiB: what every live sandbox may hold of the host's memory (its
    /// disk bound + its run memory limit + its machine's bound) together; a create or resume
    /// past it is `over_capacity` [default: MemTotal less the larger of 1 GiB and 10 %].
    #[arg(long, value_name = "MIB")]
    pub memory_budget_mb: Option<u64>,
    /// Let the allowlisted hosts of session sandboxes resolve into this special range (CIDR,
    /// repeatable): a private network's, or loopback for a test server. Off by default.
    #[arg(long = "allow-private", value_name = "CIDR")]
    pub allow_private: Vec<String>,
    /// Fork stateful sandboxes copy-on-write (`sandbox.fork` clones the live kernel into
    /// branches that share its pages until they write) instead of copying their state through
    /// a snapshot. Their kernels then run with Landlock granting files as data beneath their
    /// root: the read-only mount layout alone says what they may write (docs/threat-model.md).
    /// A sandbox that cannot be forked so (a machine, allowlist egress, threads) is copied.
    #[arg(long)]
    pub fork_copy_on_write: bool,
    /// A policy.toml (floor, denied capabilities, limits): its limits become the ceilings, and
    /// every run is admitted by it first (also read from $AIRLOCK_POLICY).
    #[arg(long, value_name = "PATH")]
    pub policy: Option<PathBuf>,
    /// Runs that may wait for a run slot at once (default: 64 per slot); one more is refused
    /// `over_capacity`. A queued run waits at most its own timeout.
    #[arg(long, value_name = "N")]
    pub max_queued_runs: Option<usize>,
    /// Keep N executors pre-started, isolated and attested (each still serves one run); runs
    /// whose limits or interpreter differ from the defaults do not use them. 0 = none.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub warm: usize,
    /// Require the zygote (the default when libairlock_zygote.so is beside this binary): fail
    /// to start without it instead of serving exec-per-run.
    #[arg(long, conflicts_with = "exec_per_run")]
    pub zygote: bool,
    /// Exec the interpreter for every run instead of forking it from the zygote — one
    /// pre-initialised interpreter that never runs untrusted code. Both have the same layers,
    /// attested the same way; forked runs share the zygote's address-space layout and str hash
    /// secret (docs/threat-model.md), exec'd runs share nothing.
    #[arg(long)]
    pub exec_per_run: bool,
    /// This server's stable name, a DNS label (in Kubernetes its StatefulSet pod name): every
    /// sandbox id starts `sb-NAME.`, so a client reaches the pod that holds a sandbox at
    /// NAME.<headless service> (docs/deploy.md).
    #[arg(long, env = "AIRLOCK_NODE_NAME", value_name = "NAME")]
    pub node_name: Option<String>,
    /// Log format on stderr (colour only when stderr is a terminal).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// The least severe log line written to stderr; without it RUST_LOG filters, else `info`.
    /// A program that spawns the server wants `warn`.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub log_level: Option<LogLevel>,
    /// Export a span per request (and per tool call) over OTLP/HTTP protobuf to URL/v1/traces
    /// (an http:// URL). Off without it. Export runs on its own thread with a bounded queue:
    /// a slow or absent collector never slows a run (docs/server.md "Traces").
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
}

fn seconds(name: &str, v: f64) -> anyhow::Result<Duration> {
    if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
        bail!("--{name} must be a number of seconds in (0, 86400], got {v}");
    }
    Ok(Duration::from_secs_f64(v))
}

fn auth(opts: &ServeOpts) -> anyhow::Result<Auth> {
    let env_token = std::env::var("AIRLOCK_TOKEN")
        .ok()
        .filter(|t| !t.is_empty());
    match (&opts.token_file, env_token, opts.insecure_no_auth) {
        (Some(_), _, true) | (None, Some(_), true) => {
            bail!("--insecure-no-auth contradicts the token given; pick one")
        }
        (Some(path), _, false) => Ok(Auth::from_file(path)?),
        (None, Some(token), false) => Ok(Auth::bearer(&token).context("AIRLOCK_TOKEN")?),
        (None, None, true) => Ok(Auth::DangerousNoAuth),
        (None, None, false) => bail!(
            "refusing to serve without authentication: give --token-file PATH or set AIRLOCK_TOKEN \
             (or, dangerously, --insecure-no-auth)"
        ),
    }
}

fn config(opts: &ServeOpts) -> anyhow::Result<(ServerConfig, Assembly)> {
    let executor = std::env::current_exe().context("locating the airlock binary")?;
    let mut config = ServerConfig::new(executor);
    config.ceilings = Ceilings {
        timeout: seconds("ceiling-timeout", opts.ceiling_timeout)?,
        memory_bytes: opts.ceiling_memory.saturating_mul(1024 * 1024),
        max_tool_calls: opts.ceiling_tool_calls,
        max_output_bytes: opts.ceiling_output,
    };
    let defaults = Limits {
        timeout: seconds("timeout", opts.timeout)?,
        memory_bytes: opts.memory.saturating_mul(1024 * 1024),
        max_tool_calls: opts.max_tool_calls,
        max_output_bytes: opts.max_output,
        ..Limits::default()
    };
    if opts.memory == 0 {
        bail!("--memory must be at least 1 MiB");
    }
    config.defaults = defaults;
    let gate = Gate::load(opts.policy.as_deref())?;
    let policy = gate.policy().cloned();
    if let Some(policy) = gate.policy() {
        let l = &policy.limits;
        config.ceilings = Ceilings {
            timeout: Duration::from_secs(l.timeout_seconds),
            memory_bytes: l.memory_mb.saturating_mul(1024 * 1024),
            max_tool_calls: u32::try_from(l.max_tool_calls).unwrap_or(u32::MAX),
            max_output_bytes: usize::try_from(l.max_output_bytes).unwrap_or(usize::MAX),
        };
        // The disk bound is the policy's, for every sandbox the server makes.
        config.defaults.max_disk_bytes = l.disk_mb.saturating_mul(1024 * 1024);
        // A server that could serve nothing the policy allows refuses to start.
        let python = gate.admit(&[Capability::RunCode], Egress::Closed, &[]);
        let command = gate.admit(&[Capability::Exec], Egress::Closed, &[]);
        if let (Err(why), Err(_)) = (&python, &command) {
            bail!("{why}");
        }
        let gate = Arc::new(gate);
        config.admission = Some(Admission(Arc::new(move |workload, uses_tools| {
            let needs = needs(workload, uses_tools);
            gate.admit(&needs, Egress::Closed, &[]).map_err(|why| {
                if uses_tools {
                    format!("{why} (a run that calls no tools can say so with `tools: []`)")
                } else {
                    why
                }
            })
        })));
    }
    config.interpreter = opts.python.clone();
    config.max_connections = opts.max_connections.max(1);
    config.tool_timeout = seconds("tool-timeout", opts.tool_timeout)?;
    config.shutdown_timeout = seconds("shutdown-timeout", opts.shutdown_timeout)?;
    if let Some(path) = &opts.audit {
        let sink = AuditSink::open(path)
            .with_context(|| format!("opening the audit file {}", path.display()))?;
        config.audit = Some(Arc::new(sink));
    }
    // The policy's server ceilings cap the flags.
    let mut max_sandboxes = opts.max_sandboxes.max(1);
    if let Some(sv) = policy.as_ref().map(|p| p.server) {
        max_sandboxes = max_sandboxes.min(usize::try_from(sv.max_sandboxes).unwrap_or(usize::MAX));
    }
    let epoch = match &opts.node_name {
        Some(name) => format!("{}.{:x}", dns_label(name)?, std::process::id()),
        None => format!("{:x}", std::process::id()),
    };
    // Checked here, so a bad range stops the server rather than every allowlist sandbox.
    airlock_egress::Rules::parse(&["localhost"], &[] as &[&str], &opts.allow_private)
        .context("--allow-private")?;
    let total = match opts.memory_budget_mb {
        Some(0) => bail!("--memory-budget-mb must be at least 1"),
        Some(mb) => mb.saturating_mul(1024 * 1024),
        None => airlock_server::registry::budget_host::host_budget()
            .context("the default --memory-budget-mb")?,
    };
    let tenants = policy
        .as_ref()
        .map(|p| p.tenants.clone())
        .unwrap_or_default();
    let sandboxes = Assembly {
        policy,
        epoch,
        max_sandboxes,
        budget: airlock_server::registry::budget::Budget::new(total, tenants),
    };
    Ok((config, sandboxes))
}

/// The rate each tenant of a tenants file is read at: its `max_requests_per_s`, else the
/// default.
fn request_rates(
    policy: Option<&airlock_policy::Policy>,
) -> Arc<airlock_server::tenancy::request_rate::RequestRates> {
    let quotas = policy.map(|p| p.tenants.clone()).unwrap_or_default();
    Arc::new(airlock_server::tenancy::request_rate::RequestRates::new(
        move |t| {
            let own = quotas.get(t.as_str()).and_then(|q| q.max_requests_per_s);
            Some(own.unwrap_or(airlock_server::tenancy::request_rate::DEFAULT_PER_S))
        },
    ))
}

/// What the sandbox registry is built from, once the runner exists.
struct Assembly {
    policy: Option<airlock_policy::Policy>,
    epoch: String,
    max_sandboxes: usize,
    budget: airlock_server::registry::budget::Budget,
}

/// Run slots: the flag (default 2 per core), capped by the policy's `[server]` ceiling.
fn run_slots(opts: &ServeOpts, policy: Option<&airlock_policy::Policy>) -> anyhow::Result<usize> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let mut slots = match opts.max_concurrent_runs {
        Some(0) => bail!("--max-concurrent-runs must be at least 1"),
        Some(n) => n,
        None => 2 * cores,
    };
    if let Some(n) = policy.and_then(|p| p.server.max_concurrent_runs) {
        slots = slots.min(usize::try_from(n).unwrap_or(usize::MAX));
    }
    Ok(slots)
}

/// The runner every run of this server goes through: the zygote unless `--exec-per-run` (or
/// it cannot start and was not required), the warm pool with `--warm N`. Call inside the
/// runtime.
async fn runner(
    opts: &ServeOpts,
    config: &ServerConfig,
    policy: Option<&airlock_policy::Policy>,
) -> anyhow::Result<Runner> {
    let slots = run_slots(opts, policy)?;
    let mut rc = RunnerConfig::exec_per_run(slots);
    if let Some(n) = opts.max_queued_runs {
        rc.max_queued = n;
    }
    rc.zygote = ZygoteChoice::from_flags(opts.zygote, opts.exec_per_run)
        .start(config.executor.clone(), config.interpreter.clone())
        .await?;
    if opts.warm > 0 {
        let mut pool = PoolConfig::new(opts.warm, config.executor.clone());
        pool.limits = config.defaults.clone();
        pool.interpreter = config.interpreter.clone();
        pool.zygote = rc.zygote.clone();
        rc.pool = Some(Arc::new(Pool::start(pool)));
    }
    Ok(Runner::new(rc))
}

/// `name` if it is a DNS label (RFC 1123: 1 to 63 of a-z, 0-9 and `-`, alphanumeric at both
/// ends), which a pod name under a headless Service is.
fn dns_label(name: &str) -> anyhow::Result<&str> {
    let ok = (1..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if !ok {
        bail!("--node-name must be a DNS label (a-z, 0-9, '-'; at most 63), got {name:?}");
    }
    Ok(name)
}

/// Bind the metrics listener and serve it on its own task; its bound address.
async fn bind_ops(server: &Server, addr: SocketAddr) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the metrics listener {addr}"))?;
    let local = listener.local_addr().context("reading the bound address")?;
    tracing::info!(%local, "metrics listening");
    let server = server.clone();
    tokio::spawn(async move { server.serve_ops(listener).await });
    Ok(local)
}

/// `--drain-grace`: like [`seconds`], but 0 is allowed (no grace: cancel at once).
fn grace(v: f64) -> anyhow::Result<Duration> {
    if v == 0.0 {
        return Ok(Duration::ZERO);
    }
    seconds("drain-grace", v)
}

/// The first SIGTERM or SIGINT drains the server (`airlock_server::server::drain`); a second one
/// during the grace cancels the runs left at once (the sandboxes are still paused). Further
/// signals change nothing: the pauses go on (SIGKILL cuts them; what was paused is whole).
async fn on_signal(server: Server, grace: Duration) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: draining"),
        _ = int.recv() => tracing::info!("SIGINT: draining"),
    }
    let again = async {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM again: skipping the grace"),
            _ = int.recv() => tracing::info!("SIGINT again: skipping the grace"),
        }
    };
    server.drain(grace, again).await;
}

pub fn serve(opts: ServeOpts) -> anyhow::Result<ExitCode> {
    let (config, assembly) = config(&opts)?;
    run_slots(&opts, assembly.policy.as_ref())?;
    let auth = match opts.listen {
        Some(addr) => {
            if !addr.ip().is_loopback() && !opts.allow_remote {
                bail!("refusing to listen on non-loopback {addr} without --allow-remote");
            }
            Some((addr, auth(&opts)?))
        }
        None => None,
    };
    if let Some(addr) = opts.metrics_listen {
        if !addr.ip().is_loopback() && !opts.allow_remote {
            bail!("refusing --metrics-listen on non-loopback {addr} without --allow-remote");
        }
    }
    let (exporting, traces) = match &opts.otlp_endpoint {
        Some(url) => {
            let (exporting, layer) = crate::otlp::start(url)?;
            (Some(exporting), Some(layer))
        }
        None => (None, None),
    };
    crate::logs::init_with(opts.log_format, opts.log_level, LogLevel::Info, traces);
    if let Some(url) = &opts.otlp_endpoint {
        tracing::info!(endpoint = %url, "exporting traces over OTLP/HTTP");
    }
    let served = serve_logged(&opts, config, &assembly, auth);
    if let Some(e) = exporting {
        e.shutdown();
    }
    served
}

/// `serve`, once the logs (and the trace export, if any) are set up.
fn serve_logged(
    opts: &ServeOpts,
    mut config: ServerConfig,
    assembly: &Assembly,
    auth: Option<(SocketAddr, Auth)>,
) -> anyhow::Result<ExitCode> {
    crate::sweep::at_start();
    tracing::info!(
        memory_budget_mb = assembly.budget.total() >> 20,
        disk_mb_per_sandbox = config.defaults.max_disk_bytes >> 20,
        "admission budget"
    );
    let drain_grace = grace(opts.drain_grace)?;
    if matches!(auth, Some((_, Auth::DangerousNoAuth))) {
        tracing::warn!("DANGEROUS: serving without authentication (--insecure-no-auth)");
    }
    // Tenants (the token file the server authenticates with names them) are read at a rate.
    if matches!(auth, Some((_, Auth::Tenants(_)))) {
        config.request_rates = Some(request_rates(assembly.policy.as_ref()));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let runner = runtime.block_on(runner(opts, &config, assembly.policy.as_ref()))?;
    config.runner = Arc::new(runner);
    config.sandboxes = Some(crate::serve_sandboxes::build(
        &config,
        assembly.policy.as_ref(),
        &assembly.epoch,
        crate::serve_sandboxes::Capacity {
            max_live: assembly.max_sandboxes,
            budget: assembly.budget.clone(),
        },
        &opts.allow_private,
        opts.image_dir.clone(),
        crate::serve_sandboxes::Snapshots {
            state: crate::state_choice::open(opts.state_dir.clone(), opts.max_state_mb << 20)?,
            copy_on_write: opts.fork_copy_on_write,
        },
    )?);
    let server = Server::new(config);
    runtime.block_on(async {
        tokio::spawn(on_signal(server.clone(), drain_grace));
        if let Some((_, auth)) = &auth {
            tokio::spawn(crate::token_cmd::reload_on_hangup(auth.clone()));
        }
        if let Some(sbs) = server.sandboxes() {
            tokio::spawn(sbs.reap_idle(server.shutdown_token()));
        }
        let ops = match opts.metrics_listen {
            Some(addr) => Some(bind_ops(&server, addr).await?),
            None => None,
        };
        match auth {
            Some((addr, auth)) => {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("binding {addr}"))?;
                let local = listener.local_addr().context("reading the bound address")?;
                tracing::info!(%local, "listening");
                let mut out = std::io::stdout();
                writeln!(out, "listening on ws://{local}")?;
                if let Some(ops) = ops {
                    writeln!(out, "metrics on http://{ops}")?;
                }
                out.flush()?;
                server.serve_websocket(listener, auth).await;
            }
            None => server.serve_stdio().await,
        }
        // A drain (a signal) pauses what may be paused for a successor; a stdio peer that
        // closed its side leaves nothing behind.
        match server.sandboxes() {
            Some(sbs) if server.is_draining() => drop(sbs.pause_or_dispose_all().await),
            Some(sbs) => sbs.dispose_all().await,
            None => {}
        }
        anyhow::Ok(())
    })?;
    tracing::info!("stopped");
    runtime.shutdown_timeout(Duration::from_millis(500));
    Ok(ExitCode::SUCCESS)
}
