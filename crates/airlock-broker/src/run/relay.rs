//! Supervising a live run: the socket to the executor, the tool relay, the clock, the RSS
//! watchdog and the process itself, all serviced concurrently so no branch can starve another
//! (a tool call in flight never blocks the timeout, a guest that stops reading never blocks the
//! broker).
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_executor::attest::{own_namespaces, Attestation};
use airlock_executor::config::{
    SANDBOX_CHANNEL_FD, SANDBOX_MNTNS_FD, SANDBOX_USERNS_FD, SETUP_METHOD,
};
use airlock_jail::cgroup::{CgroupLimits, EntryHandles, RunCgroup};
use airlock_jail::procfs;
use airlock_protocol::{ErrorCode, Id, Message};
use serde_json::{json, Map, Value};
use tokio::net::UnixStream;
use tokio::task::JoinHandle;

use super::cgroup_attach::{self, Attach};
use super::channel::{self, Inbox, Outbox};
use super::disk_watch;
use super::prepare::{NotStarted, Prepared, RunRoot};
use super::stage_proc::StageProcess;
use super::teardown;
use super::tool_relay::ToolRelay;
use super::verdict::{self, End, Hint, Observed};
use super::Cancel;
use crate::limits::Limits;
use crate::output::{capture, Captured, CellPipe, Stream};
use crate::result::RunResult;
use crate::sandbox_fs::{receive_hand_over, SandboxFs};
use crate::tools::ToolHandler;

/// How often the watchdog samples the run tree's resident memory.
pub(crate) const WATCHDOG_PERIOD: Duration = Duration::from_millis(25);
/// Request id of the `execute` request.
pub(crate) const EXECUTE_ID: i64 = 1;
/// How long a one-shot run's stage may take to build its root.
const HAND_OVER_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the readers get to drain the pipes once every process is gone.
const DRAIN: Duration = Duration::from_secs(2);

enum Phase {
    AwaitReady,
    Running,
    Reported { by: Instant },
}

/// How the stage's stdout and stderr are read.
pub(crate) enum Readers {
    /// To EOF, once (a one-shot run).
    Whole(JoinHandle<(Captured, Captured)>),
    /// One capture per cell (a stateful kernel).
    Cells(CellPipe, CellPipe),
}

impl Readers {
    fn abort(&self) {
        if let Readers::Whole(h) = self {
            h.abort();
        }
    }

    /// Everything captured, for a run whose processes are all gone.
    async fn finish(self) -> (Captured, Captured) {
        match self {
            Readers::Whole(h) => match tokio::time::timeout(DRAIN, h).await {
                Ok(Ok(pair)) => pair,
                _ => Default::default(),
            },
            Readers::Cells(out, err) => tokio::join!(out.end(), err.end()),
        }
    }
}

pub(crate) struct Spawned {
    pub(crate) child: StageProcess,
    pub(crate) inbox: Inbox,
    pub(crate) outbox: Outbox,
    pub(crate) readers: Readers,
    io_tasks: [JoinHandle<()>; 1],
    /// The egress proxy of an allowlist run (aborted when dropped).
    egress: Option<super::egress::Egress>,
}

/// The stage's end of a one-shot run's hand-over socket ([`RunRoot::Own`]).
type HandOver = std::os::unix::net::UnixStream;

/// How a run's stage comes to exist.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Via<'a> {
    /// The broker spawns `airlock __executor`, which execs the interpreter (exec per run).
    Spawn,
    /// The zygote forks it from its pre-initialised interpreter.
    Zygote(&'a crate::zygote::Control),
}

/// Spawn `airlock __executor` with the run's socket on stdin and `maps` at their numbers;
/// the stage and its stdout and stderr.
fn spawn_stage(
    p: &Prepared,
    socket: OwnedFd,
    maps: Vec<(OwnedFd, i32)>,
) -> std::io::Result<(StageProcess, OwnedFd, OwnedFd)> {
    let mut cmd = tokio::process::Command::new(&p.executor);
    cmd.arg("__executor")
        .env_clear()
        .stdin(Stdio::from(socket))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    airlock_jail::fdpass::map_fds_at_spawn(cmd.as_std_mut(), maps)
        .map_err(std::io::Error::other)?;
    let mut child = cmd.spawn()?;
    let missing = || std::io::Error::other("child pipes missing");
    let stdout = child.stdout.take().ok_or_else(missing)?.into_owned_fd()?;
    let stderr = child.stderr.take().ok_or_else(missing)?.into_owned_fd()?;
    Ok((StageProcess::Spawned(child), stdout, stderr))
}

fn spawn(
    p: &Prepared,
    limits: &Limits,
    cells: bool,
    via: Via<'_>,
    entry: Option<EntryHandles>,
) -> std::io::Result<(Spawned, Option<HandOver>)> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    ours.set_nonblocking(true)?;
    let theirs: OwnedFd = theirs.into();
    let (mut maps, hand_over) = match &p.sandbox {
        RunRoot::Shared(sb) => {
            let (userns, mntns) = sb.namespaces()?;
            (
                vec![(userns, SANDBOX_USERNS_FD), (mntns, SANDBOX_MNTNS_FD)],
                None,
            )
        }
        RunRoot::Own { .. } => {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
            (
                vec![(OwnedFd::from(theirs), SANDBOX_CHANNEL_FD)],
                Some(ours),
            )
        }
    };
    let egress = super::egress::attach(&mut maps, p, limits)?;
    let (child, stdout, stderr) = match via {
        Via::Spawn => spawn_stage(p, theirs, maps)?,
        Via::Zygote(zygote) => zygote.fork_stage(theirs, maps, entry)?,
    };
    let readers = if cells {
        Readers::Cells(
            CellPipe::start(stdout, Stream::Stdout)?,
            CellPipe::start(stderr, Stream::Stderr)?,
        )
    } else {
        let stdout = tokio::net::unix::pipe::Receiver::from_owned_fd(stdout)?;
        let stderr = tokio::net::unix::pipe::Receiver::from_owned_fd(stderr)?;
        let cap = limits.max_output_bytes;
        let out_tap = p.output.clone().map(|t| (t, Stream::Stdout));
        let err_tap = p.output.clone().map(|t| (t, Stream::Stderr));
        Readers::Whole(tokio::spawn(async move {
            tokio::join!(capture(stdout, cap, out_tap), capture(stderr, cap, err_tap))
        }))
    };
    let (inbox, outbox, flusher) = channel::open(UnixStream::from_std(ours)?);
    let spawned = Spawned {
        child,
        inbox,
        outbox,
        readers,
        io_tasks: [flusher],
        egress,
    };
    Ok((spawned, hand_over))
}

/// The cgroup a run gets (where the machine allows): its name and limits.
pub(super) fn cgroup_for(stage_pid: i32, limits: &Limits) -> (String, CgroupLimits) {
    (
        format!("airlock-{stage_pid}-{}", std::process::id()),
        CgroupLimits {
            memory_bytes: Some(limits.memory_bytes),
            pids: Some(limits.max_processes),
            cpu_millicores: limits.cpu_millicores,
        },
    )
}

/// A spawned stage (in its cgroup where possible, its `setup` frame sent), not yet supervised.
pub(crate) struct Launched {
    pub(crate) s: Spawned,
    pub(crate) stage_pid: i32,
    pub(crate) cgroup: Option<RunCgroup>,
    /// The cgroup being set up (see [`cgroup_attach`]), settled before any code is sent.
    pub(crate) attach: Option<Attach>,
    pub(crate) enforcement: Vec<&'static str>,
    pub(crate) python: bool,
    /// The sandbox the run is in (its filesystem's usage is watched).
    pub(crate) sandbox: Arc<SandboxFs>,
}

/// Where supervision starts.
pub(crate) enum Start<'a> {
    /// A fresh stage: wait for its attestation, then send `execute` (or `start`).
    Cold {
        /// The program (Python mode), or None to send `start` (exec mode).
        code: Option<&'a str>,
        /// The interpreter's `sys.path`, sent with the program.
        sys_path: &'a [PathBuf],
        /// The restricted language profile, when the run has one.
        restricted: Option<&'a super::Restricted>,
        /// The run's environment, when the interpreter did not get it at `execve` (a zygote's
        /// child); the bootstrap applies it before the program.
        env: Option<&'a Map<String, Value>>,
    },
    /// A stage whose attestation the broker already verified and whose `execute` it already
    /// sent (the warm pool, `crate::pool`).
    Attested,
}

/// Spawn the stage, put it in a cgroup where the machine allows, and send its `setup` frame;
/// a one-shot run's stage builds its own root, which is waited for here (it comes before the
/// stage's attestation in any case).
pub(crate) async fn launch(p: &Prepared, limits: &Limits) -> Result<Launched, NotStarted> {
    launch_via(p, limits, Via::Spawn).await
}

/// [`launch`], the stage started `via` the given way.
pub(crate) async fn launch_via(
    p: &Prepared,
    limits: &Limits,
    via: Via<'_>,
) -> Result<Launched, NotStarted> {
    let RunRoot::Own { owner, binds } = &p.sandbox else {
        return launch_shared(p, limits, false, via);
    };
    let (mut s, stage_pid, attach, hand_over) = start_stage(p, limits, false, via)?;
    let received = match hand_over {
        Some(sock) => tokio::task::spawn_blocking(move || receive_root(&sock))
            .await
            .unwrap_or_else(|e| Err(e.to_string())),
        None => Err("no hand-over socket".into()),
    };
    let sandbox = match received.and_then(|fds| {
        SandboxFs::from_hand_over(fds, *owner, binds.clone(), None).map_err(|e| e.to_string())
    }) {
        Ok(sb) => Arc::new(sb),
        Err(why) => {
            // The stage says why on its socket before it exits.
            let refusal = drain_refusal(&mut s.inbox).await.unwrap_or(why);
            let _ = teardown::kill(&mut s.child, None).await;
            cgroup_attach::abandon(Some(attach)).await;
            for t in &s.io_tasks {
                t.abort();
            }
            s.readers.abort();
            return Err(NotStarted {
                code: ErrorCode::SandboxRefused,
                message: refusal,
            });
        }
    };
    Ok(launched(s, stage_pid, attach, p, sandbox))
}

/// The one-shot run's sandbox as its stage handed it over.
fn receive_root(sock: &HandOver) -> Result<[OwnedFd; 3], String> {
    sock.set_read_timeout(Some(HAND_OVER_TIMEOUT))
        .map_err(|e| e.to_string())?;
    match receive_hand_over(sock) {
        Ok(Some(fds)) => Ok(fds),
        Ok(None) => Err(
            "the sandbox root could not be assembled (the stage exited without a reason)".into(),
        ),
        Err(e) => Err(format!("cannot receive the sandbox root: {e}")),
    }
}

/// [`launch`] for a run in a sandbox that outlives it; `cells` reads the output one capture
/// per cell (a stateful kernel).
pub(crate) fn launch_with(
    p: &Prepared,
    limits: &Limits,
    cells: bool,
) -> Result<Launched, NotStarted> {
    launch_shared(p, limits, cells, Via::Spawn)
}

fn launch_shared(
    p: &Prepared,
    limits: &Limits,
    cells: bool,
    via: Via<'_>,
) -> Result<Launched, NotStarted> {
    let RunRoot::Shared(sandbox) = &p.sandbox else {
        return Err(NotStarted {
            code: ErrorCode::InternalError,
            message: "a one-shot run is launched with its own root".into(),
        });
    };
    let (s, stage_pid, attach, _) = start_stage(p, limits, cells, via)?;
    Ok(launched(s, stage_pid, attach, p, Arc::clone(sandbox)))
}

#[allow(
    clippy::type_complexity,
    reason = "a private tuple of what a start produced"
)]
fn start_stage(
    p: &Prepared,
    limits: &Limits,
    cells: bool,
    via: Via<'_>,
) -> Result<(Spawned, i32, Attach, Option<HandOver>), NotStarted> {
    // A zygote's child enters its cgroups by itself as it is born (see `cgroup_attach`): they
    // exist before it. A spawned stage is moved in beside its start.
    let made = match via {
        Via::Spawn => None,
        Via::Zygote(_) => Some(cgroup_attach::create(limits)),
    };
    let entry = match &made {
        Some(Ok(cg)) => cg.entry_handles().ok(),
        _ => None,
    };
    let (s, hand_over) = spawn(p, limits, cells, via, entry).map_err(|e| NotStarted {
        code: ErrorCode::SandboxRefused,
        message: format!("cannot start the executor {}: {e}", p.executor.display()),
    })?;
    let stage_pid = s
        .child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .unwrap_or(0);
    let attach = match made {
        Some(made) => cgroup_attach::adopt(made, stage_pid),
        None => {
            let (name, cg_limits) = cgroup_for(stage_pid, limits);
            cgroup_attach::start(name, cg_limits, stage_pid)
        }
    };
    let setup = serde_json::to_value(&p.config).unwrap_or(Value::Null);
    let _ = s
        .outbox
        .try_send(Message::notification(SETUP_METHOD, Some(setup)));
    Ok((s, stage_pid, attach, hand_over))
}

fn launched(
    s: Spawned,
    stage_pid: i32,
    attach: Attach,
    p: &Prepared,
    sandbox: Arc<SandboxFs>,
) -> Launched {
    let enforcement = vec![
        "rlimits",
        "rss_watchdog",
        "sandbox_root",
        "tmpfs_disk_bound",
    ];
    Launched {
        s,
        stage_pid,
        cgroup: None,
        attach: Some(attach),
        enforcement,
        python: p.code.is_some(),
        sandbox,
    }
}

impl Launched {
    /// The stage's pid (0 if unknown).
    pub(crate) fn stage_pid(&self) -> i32 {
        self.stage_pid
    }

    /// The next message from the executor; None once its socket is closed or broken.
    pub(crate) async fn recv(&mut self) -> Option<Message> {
        match self.s.inbox.recv().await {
            Some(Ok(Some(m))) => Some(m),
            _ => None,
        }
    }

    /// Queue a message to the executor; false when the socket is gone.
    pub(crate) fn send(&self, msg: Message) -> bool {
        self.s.outbox.try_send(msg).is_ok()
    }

    /// True once the stage has exited (it is reaped by this call).
    pub(crate) fn exited(&mut self) -> bool {
        !matches!(self.s.child.try_wait(), Ok(None))
    }

    /// Wait until the tree is in its cgroup (see [`cgroup_attach`]); Err is a refusal.
    pub(crate) async fn attached(&mut self, cpu_requested: bool) -> Result<(), String> {
        cgroup_attach::settle(
            &mut self.attach,
            &mut self.cgroup,
            &mut self.enforcement,
            cpu_requested,
        )
        .await
    }

    /// A kernel's cell begins: its output goes to fresh captures (no-op for a one-shot run).
    pub(crate) async fn readers_begin(&self, cap: usize, tap: Option<crate::output::OutputTap>) {
        if let Readers::Cells(out, err) = &self.s.readers {
            tokio::join!(out.begin(cap, tap.clone()), err.begin(cap, tap));
        }
    }

    /// A kernel's cell ended: what it wrote (empty for a one-shot run, read at its end).
    pub(crate) async fn readers_end(&self) -> (Captured, Captured) {
        match &self.s.readers {
            Readers::Cells(out, err) => tokio::join!(out.end(), err.end()),
            Readers::Whole(_) => Default::default(),
        }
    }

    /// Kill the whole tree and reap it, for a stage that will never run anything.
    pub(crate) async fn discard(mut self) {
        let _ = teardown::kill(&mut self.s.child, self.cgroup.as_ref()).await;
        cgroup_attach::abandon(self.attach.take()).await;
        for t in &self.s.io_tasks {
            t.abort();
        }
        self.s.readers.abort();
    }
}

/// Check the attestation a `ready` notification carries against the broker's own namespaces.
pub(crate) fn check_ready(
    params: Option<Value>,
    broker_ns: &BTreeMap<String, String>,
) -> Result<(), String> {
    let proof: Result<Attestation, _> = serde_json::from_value(params.unwrap_or(Value::Null));
    match proof {
        Ok(a) => a.verify(broker_ns).map_err(|v| v.join("; ")),
        Err(e) => Err(format!("unreadable attestation: {e}")),
    }
}

pub(crate) async fn supervise(
    p: Prepared,
    limits: &Limits,
    tools: &dyn ToolHandler,
    cancel: Cancel,
    started: Instant,
) -> RunResult {
    supervise_via(p, limits, tools, cancel, started, Via::Spawn, None).await
}

/// [`supervise`] with the stage started `via` the given way, and `env` sent with the program
/// (see [`Start::Cold`]).
pub(crate) async fn supervise_via(
    p: Prepared,
    limits: &Limits,
    tools: &dyn ToolHandler,
    cancel: Cancel,
    started: Instant,
    via: Via<'_>,
    env: Option<&Map<String, Value>>,
) -> RunResult {
    let launched = match launch_via(&p, limits, via).await {
        Ok(l) => l,
        Err(refusal) => return verdict::before_spawn(refusal, started),
    };
    let start = Start::Cold {
        code: p.code.as_deref(),
        sys_path: &p.sys_path,
        restricted: p.restricted.as_ref(),
        env,
    };
    drive(launched, start, limits, tools, cancel, started).await
}

/// Supervise a launched stage to the end; returns after every process of the run is gone.
pub(crate) async fn drive(
    launched: Launched,
    start: Start<'_>,
    limits: &Limits,
    tools: &dyn ToolHandler,
    mut cancel: Cancel,
    started: Instant,
) -> RunResult {
    let Launched {
        mut s,
        stage_pid,
        mut cgroup,
        mut attach,
        mut enforcement,
        python,
        sandbox,
    } = launched;
    let mut disk = disk_watch::watch(Arc::clone(&sandbox));
    let mut disk_watching = true;
    let broker_ns: BTreeMap<String, String> = own_namespaces();
    let (code, sys_path, restricted, env, mut phase) = match start {
        Start::Cold {
            code,
            sys_path,
            restricted,
            env,
        } => (code, sys_path, restricted, env, Phase::AwaitReady),
        Start::Attested => (None, &[][..], None, None, Phase::Running),
    };

    let deadline = tokio::time::Instant::from_std(started + limits.timeout);
    let mut watchdog = tokio::time::interval(WATCHDOG_PERIOD);
    let mut hint: Option<Hint> = None;
    let mut refusal: Option<String> = None;
    let mut relay = ToolRelay::new(tools);
    let mut peak_rss: u64 = 0;
    let mut exit = None;
    let mut timeout = std::pin::pin!(super::clock::at(deadline));

    let end = loop {
        let reported_by = match phase {
            Phase::Reported { by } => tokio::time::Instant::from_std(by),
            _ => deadline,
        };
        tokio::select! {
            status = s.child.wait() => {
                exit = status.ok();
                break End::Exited;
            }
            () = &mut timeout => break End::Timeout,
            _ = tokio::time::sleep_until(reported_by), if matches!(phase, Phase::Reported { .. }) => {
                break End::NoExitAfterResult;
            }
            _ = &mut cancel => break End::Cancelled,
            over = &mut disk, if disk_watching => match over {
                Ok(why) => break End::Disk(why),
                Err(_) => disk_watching = false,
            },
            _ = watchdog.tick() => {
                let rss = procfs::tree_rss_bytes(stage_pid);
                peak_rss = peak_rss.max(rss);
                if rss > limits.memory_bytes {
                    break End::Memory;
                }
            }
            reply = relay.answered(limits), if relay.busy() => {
                if s.outbox.try_send(reply).is_err() {
                    break End::Protocol("executor stopped reading its socket".into());
                }
            }
            msg = s.inbox.recv() => {
                let msg = match msg {
                    Some(Ok(Some(m))) => m,
                    // Clean EOF: the guest closed its end; wait for the process to exit.
                    Some(Ok(None)) | None => {
                        match wait_exit(&mut s.child, deadline).await {
                            Some(status) => { exit = Some(status); break End::Exited; }
                            None => break End::Timeout,
                        }
                    }
                    Some(Err(e)) => break End::Protocol(e.to_string()),
                };
                match (&phase, msg) {
                    (Phase::AwaitReady, Message::Notification(n)) if n.method == "ready" => {
                        if let Err(why) = check_ready(n.params, &broker_ns) {
                            break End::Refused(format!("the sandbox could not prove its isolation: {why}"));
                        }
                        // No code before the tree is in its cgroup.
                        let cpu = limits.cpu_millicores.is_some();
                        if let Err(why) = cgroup_attach::settle(&mut attach, &mut cgroup, &mut enforcement, cpu).await {
                            break End::Refused(why);
                        }
                        let go = match code {
                            Some(code) => {
                                let mut params = json!({ "code": code, "sys_path": sys_path, "restricted": restricted });
                                if let Some(env) = env {
                                    params["env"] = Value::Object(env.clone());
                                }
                                Message::request(Id::Number(EXECUTE_ID), "execute", Some(params))
                            }
                            None => Message::notification("start", None),
                        };
                        if s.outbox.try_send(go).is_err() {
                            break End::Internal("executor socket closed".into());
                        }
                        phase = Phase::Running;
                    }
                    // Only trusted code can refuse: the stage or bootstrap before `ready`, or
                    // the stage of a command (whose socket the command never holds). Once a
                    // Python program runs, a `refused` is the program forging its status.
                    (phase_now, Message::Notification(n))
                        if n.method == "refused"
                            && (matches!(phase_now, Phase::AwaitReady) || !python) =>
                    {
                        refusal = Some(refusal_of(n.params));
                    }
                    (Phase::Running, Message::Request(req)) if req.method == "call_tool" => {
                        if let Some(r) = relay.request(req, limits) {
                            if s.outbox.try_send(r).is_err() {
                                break End::Protocol("executor floods requests without reading".into());
                            }
                        }
                    }
                    (Phase::Running, Message::Response(resp)) if resp.id == Some(Id::Number(EXECUTE_ID)) && python => {
                        hint = match resp.outcome {
                            Ok(v) => serde_json::from_value(v).ok(),
                            Err(_) => None,
                        };
                        // The guest is still alive at its peak: a run shorter than the
                        // watchdog's period would otherwise report its start-up size.
                        peak_rss = peak_rss.max(procfs::tree_rss_bytes(stage_pid));
                        phase = Phase::Reported { by: Instant::now() + limits.grace };
                    }
                    (_, other) => {
                        break End::Protocol(format!("unexpected message: {}", describe(&other)));
                    }
                }
            }
        }
    };
    let tool_calls = relay.calls;
    drop(relay);
    // The guest writes its result and then exits: the exit can be seen before the result was
    // read. Every writer is gone once the stage exited, so this drain ends at EOF promptly.
    if end == End::Exited && python && hint.is_none() && matches!(phase, Phase::Running) {
        hint = drain_hint(&mut s.inbox).await;
    }
    // Likewise a stage that refused and exited: its refusal may still be in the inbox.
    if end == End::Exited && refusal.is_none() && matches!(phase, Phase::AwaitReady) {
        refusal = drain_refusal(&mut s.inbox).await;
    }

    let end = match (end, refusal) {
        (End::Exited, Some(r)) => End::Refused(r),
        (End::Protocol(_), Some(r)) => End::Refused(r),
        // No code was ever sent: whatever ended the executor, the sandbox did not come up.
        (End::Exited, None) if matches!(phase, Phase::AwaitReady) => {
            End::Refused("the executor exited before proving its isolation (see stderr)".into())
        }
        (end, _) => end,
    };
    if exit.is_none() {
        if matches!(end, End::Timeout | End::Cancelled) {
            exit = teardown::terminate(&mut s.child, limits.grace).await;
        }
        if exit.is_none() {
            exit = teardown::kill(&mut s.child, cgroup.as_ref()).await;
        }
    }
    // The stage is reaped; make sure no descendant lingers (cgroup members included).
    let _ = teardown::kill(&mut s.child, cgroup.as_ref()).await;
    cgroup_attach::abandon(attach.take()).await;
    let oom_killed = cgroup.as_ref().is_some_and(RunCgroup::oom_killed);
    if let Some(cg) = &cgroup {
        peak_rss = peak_rss.max(cg.peak_memory_bytes().unwrap_or(0));
    }
    for t in &s.io_tasks {
        t.abort();
    }
    let (stdout, stderr) = s.readers.finish().await;
    teardown::release(cgroup);
    let egress = s.egress.take().map(super::egress::Egress::finish);
    let mut result = verdict::result(Observed {
        end,
        exit,
        hint,
        python,
        oom_killed,
        stdout,
        stderr,
        started,
        peak_rss,
        tool_calls,
        memory_limit: limits.memory_bytes,
        enforcement,
        before_program: matches!(phase, Phase::AwaitReady),
    });
    result.egress = egress.unwrap_or_default();
    result
}

/// Read what is left on the socket after the executor exited, looking for the execute result.
/// A `refused` notification's layer and message, as the run's refusal.
pub(crate) fn refusal_of(params: Option<Value>) -> String {
    let params = params.unwrap_or(Value::Null);
    let layer = params["layer"].as_str().unwrap_or("unknown");
    let message = params["message"].as_str().unwrap_or("");
    format!("sandbox layer {layer} unavailable: {message}")
}

/// A `refused` notification still queued after the stage exited.
async fn drain_refusal(inbox: &mut Inbox) -> Option<String> {
    let until = tokio::time::Instant::now() + DRAIN;
    loop {
        match tokio::time::timeout_at(until, inbox.recv()).await {
            Ok(Some(Ok(Some(Message::Notification(n))))) if n.method == "refused" => {
                return Some(refusal_of(n.params));
            }
            Ok(Some(Ok(Some(_)))) => continue,
            _ => return None,
        }
    }
}

async fn drain_hint(inbox: &mut Inbox) -> Option<Hint> {
    let until = tokio::time::Instant::now() + DRAIN;
    loop {
        match tokio::time::timeout_at(until, inbox.recv()).await {
            Ok(Some(Ok(Some(Message::Response(r))))) if r.id == Some(Id::Number(EXECUTE_ID)) => {
                return r.outcome.ok().and_then(|v| serde_json::from_value(v).ok());
            }
            Ok(Some(Ok(Some(_)))) => continue,
            _ => return None,
        }
    }
}

async fn wait_exit(
    child: &mut StageProcess,
    deadline: tokio::time::Instant,
) -> Option<std::process::ExitStatus> {
    tokio::time::timeout_at(deadline, child.wait())
        .await
        .ok()
        .and_then(Result::ok)
}

pub(crate) fn describe(m: &Message) -> String {
    match m {
        Message::Request(r) => format!("request {:?}", truncate(&r.method)),
        Message::Notification(n) => format!("notification {:?}", truncate(&n.method)),
        Message::Response(r) => format!("response to {}", truncate(&format!("{:?}", r.id))),
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use airlock_protocol::Response;

    use super::*;

    /// Found by the `guest_messages` fuzz target: a guest's stray response was named with its
    /// whole id, so a guest chose up to a frame (1 MiB) of the run's protocol error message.
    #[test]
    fn a_stray_message_is_named_within_bounds_whatever_its_id() {
        let id = Id::String("x".repeat(1 << 20));
        let named = describe(&Message::Response(Response::success(id, Value::Null)));
        assert!(named.len() <= 300, "{} bytes", named.len());
        assert!(named.starts_with("response to "), "{named}");
        let method = "\u{1b}".repeat(1 << 16);
        let named = describe(&Message::notification(&method, None));
        assert!(named.len() <= 700, "{} bytes", named.len());
    }
}
