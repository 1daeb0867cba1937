//! Supervising a live run: the socket to the executor, the tool relay, the clock, the RSS
//! watchdog and the process itself, all serviced concurrently so no branch can starve another
//! (a tool call in flight never blocks the timeout, a guest that stops reading never blocks the
//! broker).
//!
//! The loop only waits; what each event means is one handler of the run's [`Supervisor`] (see
//! `supervisor.rs` and, for the guest's messages, `inbound.rs`), each returning whether the run
//! goes on or how it ended; `conclude.rs` turns the ending into the one result.
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::launch::launch_via;
use super::launched::Launched;
use super::prepared::Prepared;
use super::spawn::Via;
use super::spec::Cancel;
pub(crate) use super::supervisor::Start;
use super::supervisor::{on_cancel, on_timeout, Supervisor};
use super::{clock, disk_watch, verdict};
use crate::limits::Limits;
use crate::result::RunResult;
use crate::tools::ToolHandler;

/// How often the watchdog samples the run tree's resident memory.
pub(crate) const WATCHDOG_PERIOD: Duration = Duration::from_millis(25);

/// Launch `p`'s stage (spawned) and supervise it to the end.
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
    let mut disk = disk_watch::watch(Arc::clone(&launched.sandbox));
    let mut sup = Supervisor::new(launched, start, limits, tools, started);
    let mut watchdog = tokio::time::interval(WATCHDOG_PERIOD);
    let mut timeout = std::pin::pin!(clock::at(sup.deadline));
    let end = loop {
        let reported_by = sup.reported_by();
        let flow = tokio::select! {
            status = sup.s.child.wait() => sup.on_exited(status),
            () = &mut timeout => on_timeout(),
            _ = tokio::time::sleep_until(reported_by), if sup.reported() => sup.on_grace_elapsed(),
            _ = &mut cancel => on_cancel(),
            over = &mut disk.over, if sup.disk_watching => sup.on_disk(over),
            _ = watchdog.tick() => sup.on_watchdog_tick(),
            reply = sup.relay.answered(limits), if sup.relay.busy() => sup.on_tool_answer(reply),
            received = sup.s.inbox.recv() => sup.on_inbound(received).await,
        };
        if let ControlFlow::Break(end) = flow {
            break end;
        }
    };
    // A program that filled its filesystem and exited before the watch's next look.
    let end = match end {
        verdict::End::Exited => disk
            .filled_now()
            .map_or(verdict::End::Exited, verdict::End::Disk),
        end => end,
    };
    sup.conclude(end).await
}
