//! A forkable kernel's copy-on-write fork (issue 27): between cells the kernel clones itself,
//! through the door the broker holds (`door.rs`), into branches in new namespaces; the broker
//! finishes each from outside — a root of its own made in its user namespace with a copy of
//! the files, grafted over the parent's; its own `/proc`; its cgroup — checks it while it is
//! stopped, and only then lets it go on. The kernel itself never runs again: stopped for good,
//! it holds the pages its branches share and their pid namespaces, and ends with the last of
//! them ([`Template`]). The parent sandbox goes on as branch 0.
//!
//! Untrusted code runs in a branch from the instant of its clone (at-fork, trace and audit
//! hooks), so nothing the branch does before `go` is relied on: the kernel's writable mounts
//! are sealed read-only before the fork (`seal.rs`), and the checks here are the broker's own
//! reading of `/proc`.
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use airlock_executor::attest::own_namespaces;
use airlock_jail::{process, procfs};
use airlock_protocol::Message;
use serde_json::json;

use super::branch_check::GivenFds;
use super::door::BranchFds;
use super::live::{Live, Template};
use super::procs::Procs;
use super::signals::{signal_kernel, stop_kernel, SIGCONT};
use crate::run::{adopt_branch, check_ready, Launched};
use crate::sandbox_fs::SandboxFs;
use crate::stage_cgroup;

/// How long the kernel gets to clone its branches, and a branch to get ready.
const FORK_TIMEOUT: Duration = Duration::from_secs(30);
const SIGSTOP: i32 = 19;

/// One finished branch: its own filesystem, and its live kernel process.
pub(super) struct Forked {
    /// Its filesystem (a root of its own, a copy of the parent's files).
    pub(super) fs: Arc<SandboxFs>,
    /// Its kernel, attested and stopped between cells.
    pub(super) live: Live,
}

/// Why a kernel was not forked.
#[derive(Debug, thiserror::Error)]
pub enum ForkError {
    /// Nothing changed: the kernel goes on as it was (a copy may be made instead).
    #[error("{0}")]
    NotForkable(String),
    /// The fork failed part way: the kernel was ended (its next cell starts a fresh one).
    #[error("the kernel could not be forked: {0}")]
    Failed(String),
}

/// The broker's ends of one branch's channel, stdout and stderr, and what the branch's ends are.
type OurEnds = (UnixStream, OwnedFd, OwnedFd, GivenFds);

/// Fork the (forkable) kernel in `live` of the sandbox `parent` into `count + 1` branches,
/// each finished, checked and attested; branch 0 is for the parent to go on with. On success
/// and on [`ForkError::Failed`], `live` is left empty (the kernel's state lives on in the
/// branches, or is gone); on [`ForkError::NotForkable`] nothing changed.
pub(super) async fn fork(
    live: &mut Option<Live>,
    parent: &SandboxFs,
    count: usize,
    executor: &Path,
) -> Result<Vec<Forked>, ForkError> {
    let kernel_pid = forkable_pid(live.as_ref())?;
    if let Err(e) = super::seal::seal(executor, parent.owner(), kernel_pid).await {
        return Err(end_for(live, e).await);
    }
    let total = count + 1;
    let (ours, theirs) = match channels(total) {
        Ok(c) => c,
        Err(e) => return Err(end_for(live, e.to_string()).await),
    };
    let pids = match clone_branches(live.as_mut(), kernel_pid, total, theirs).await {
        Ok(p) => p,
        Err(e) => return Err(end_for(live, e).await),
    };
    let Some(live) = live.take() else {
        return Err(ForkError::Failed("the kernel went away".into()));
    };
    let template = Arc::new(Template::new(live));
    // The branches are finished side by side: each its own helper, checks and cgroup.
    let finishing = pids
        .into_iter()
        .zip(ours)
        .map(|(host, ends)| finish(host, kernel_pid, ends, &template, parent, executor));
    let mut branches = Vec::with_capacity(total);
    let mut failed = None;
    for made in futures_util::future::join_all(finishing).await {
        match made {
            Ok(b) => branches.push(b),
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    match failed {
        // The made branches and the kernel end with them.
        Some(e) => Err(ForkError::Failed(e)),
        None => Ok(branches),
    }
}

/// The live kernel's pid, if it can be forked as it is.
fn forkable_pid(live: Option<&Live>) -> Result<i32, ForkError> {
    let not = |why: &str| ForkError::NotForkable(why.into());
    let live = live.ok_or_else(|| not("no kernel is alive"))?;
    if live.door.is_none() || live.template.is_some() {
        return Err(not("this kernel was not started forkable"));
    }
    let pid = live.procs().pids().first().copied();
    let pid = pid.ok_or_else(|| not("the kernel's process was not found"))?;
    super::branch_check::clonable(pid).map_err(ForkError::NotForkable)?;
    match procfs::thread_count(pid) {
        Some(1) => Ok(pid),
        n => Err(ForkError::NotForkable(format!(
            "the kernel runs {} threads; a fork needs it to run one",
            n.map_or_else(|| "an unknown number of".into(), |n| n.to_string())
        ))),
    }
}

/// End the kernel after a failure past the point of no return.
async fn end_for(live: &mut Option<Live>, why: String) -> ForkError {
    if let Some(l) = live.take() {
        l.end().await;
    }
    ForkError::Failed(why)
}

/// Let the kernel clone `total` branches, each holding its fds; their host pids in clone
/// order. The kernel is stopped for good afterwards.
async fn clone_branches(
    live: Option<&mut Live>,
    kernel_pid: i32,
    total: usize,
    fds: Vec<BranchFds>,
) -> Result<Vec<i32>, String> {
    let live = live.ok_or("the kernel went away")?;
    let door = live.door.as_ref().ok_or("no door")?;
    door.allow(kernel_pid.cast_unsigned(), fds);
    let procs = live.procs();
    signal_kernel(procs, SIGCONT);
    let id = super::ids::request_id("fork");
    let asked = Message::request(id.clone(), "fork", Some(json!({ "count": total })));
    let answer = if live.launched.send(asked) {
        tokio::time::timeout(FORK_TIMEOUT, answer_to(&mut live.launched, &id)).await
    } else {
        Ok(Err("its socket is closed".into()))
    };
    let _ = process::kill(kernel_pid, SIGSTOP);
    door.shut();
    if !stopped(kernel_pid).await {
        return Err("the kernel would not stop after its fork".into());
    }
    let pids = answer.map_err(|_| "the kernel did not answer the fork".to_string())??;
    host_pids(kernel_pid, &pids)
}

/// Wait until every thread of the kernel is stopped (nothing it does after its answer — an
/// owner set on a branch's files, say — may come after the branches' checks).
async fn stopped(kernel_pid: i32) -> bool {
    let until = std::time::Instant::now() + Duration::from_secs(2);
    while !procfs::all_threads_stopped(kernel_pid) {
        if std::time::Instant::now() > until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    true
}

/// `total` branches' channels and output pipes: ours, and theirs in the door's order.
fn channels(total: usize) -> std::io::Result<(Vec<OurEnds>, Vec<BranchFds>)> {
    let mut ours = Vec::with_capacity(total);
    let mut theirs = Vec::with_capacity(total);
    for _ in 0..total {
        let (sock, their_sock) = UnixStream::pair()?;
        let (out_r, out_w) = std::io::pipe()?;
        let (err_r, err_w) = std::io::pipe()?;
        let their: BranchFds = [their_sock.into(), out_w.into(), err_w.into()];
        ours.push((sock, out_r.into(), err_r.into(), GivenFds::of(&their)?));
        theirs.push(their);
    }
    Ok((ours, theirs))
}

/// The kernel's answer to `id`: the branches' pids as it sees them.
async fn answer_to(l: &mut Launched, id: &airlock_protocol::Id) -> Result<Vec<i64>, String> {
    loop {
        match l.recv().await {
            Some(Message::Response(r)) if r.id.as_ref() == Some(id) => {
                let result = r.outcome.map_err(|e| e.message)?;
                let pids = result.get("pids").and_then(|p| p.as_array()).cloned();
                return pids
                    .unwrap_or_default()
                    .iter()
                    .map(|p| {
                        p.as_i64()
                            .ok_or_else(|| "a pid that is no number".to_string())
                    })
                    .collect();
            }
            Some(_) => {} // output of hooks in the kernel is its own business
            None => return Err("the kernel closed its socket".into()),
        }
    }
}

/// The host pids of the kernel's children, in the order of `inner` (their pids in the
/// kernel's namespace): every child accounted for, none twice, none missing.
fn host_pids(kernel_pid: i32, inner: &[i64]) -> Result<Vec<i32>, String> {
    let children = procfs::children_of(kernel_pid);
    if children.len() != inner.len() {
        return Err(format!(
            "the kernel has {} children, it named {}",
            children.len(),
            inner.len()
        ));
    }
    // Each child's pid in the kernel's namespace, read once.
    let inside: Vec<(i32, Option<i64>)> = children
        .iter()
        .map(|c| (*c, procfs::ns_pids(*c).get(1).copied()))
        .collect();
    inner
        .iter()
        .map(|want| {
            inside
                .iter()
                .find(|(_, seen)| *seen == Some(*want))
                .map(|(host, _)| *host)
                .ok_or_else(|| format!("no child of the kernel is its pid {want}"))
        })
        .collect()
}

/// Finish branch `host`: wait for it to get ready, stop it, make its filesystem, check it
/// from outside, put it in a cgroup of its own, let it go on and check its attestation.
async fn finish(
    host: i32,
    kernel_pid: i32,
    (sock, out, err, given): OurEnds,
    template: &Arc<Template>,
    parent: &SandboxFs,
    executor: &Path,
) -> Result<Forked, String> {
    let inner = template.live().ok_or("the kernel went away")?;
    let mut s = adopt_branch(host, sock, out, err).map_err(|e| e.to_string())?;
    let ready = tokio::time::timeout(FORK_TIMEOUT, s.inbox.recv()).await;
    if !matches!(ready, Ok(Some(Ok(Some(Message::Notification(ref n))))) if n.method == "branch") {
        return Err(format!("branch {host} did not get ready"));
    }
    let procs = Procs::Branch(host);
    if !stop_kernel(procs).await {
        return Err(format!("branch {host} would not stop"));
    }
    let fs = Arc::new(
        parent
            .create_branch(executor, host)
            .await
            .map_err(|e| e.to_string())?,
    );
    super::branch_check::check(host, kernel_pid, &given)?;
    let (name, limits) = stage_cgroup::cgroup_for(host, &inner.limits);
    let mut launched = Launched {
        s,
        stage_pid: host,
        cgroup: None,
        attach: Some(stage_cgroup::start(name, limits, host)),
        enforcement: inner.launched.enforcement.clone(),
        python: true,
        sandbox: Arc::clone(&fs),
    };
    launched
        .attached(inner.limits.cpu_millicores.is_some())
        .await?;
    signal_kernel(procs, SIGCONT);
    go_and_attest(&mut launched).await?;
    if !stop_kernel(procs).await {
        return Err(format!(
            "branch {host} would not stop after its attestation"
        ));
    }
    let live = Live {
        launched,
        sys_path: inner.sys_path.clone(),
        limits: inner.limits.clone(),
        guard: Some(super::guard::Guard::start(procs, inner.limits.memory_bytes)),
        door: None,
        procs,
        template: Some(Arc::clone(template)),
    };
    Ok(Forked { fs, live })
}

/// Let the finished branch go on and check its attestation as a fresh kernel's.
async fn go_and_attest(l: &mut Launched) -> Result<(), String> {
    let go = Message::notification("go", Some(json!({ "cwd": "/work" })));
    if !l.send(go) {
        return Err("the branch's socket is closed".into());
    }
    let broker_ns = own_namespaces();
    match tokio::time::timeout(FORK_TIMEOUT, l.recv()).await {
        Ok(Some(Message::Notification(n))) if n.method == "ready" => {
            check_ready(n.params, &broker_ns)
                .map_err(|why| format!("a branch could not prove its isolation: {why}"))
        }
        _ => Err("the branch did not attest".into()),
    }
}
