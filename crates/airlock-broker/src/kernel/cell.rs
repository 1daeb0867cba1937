//! Supervising one cell of a live kernel: the same concurrent service as a one-shot run (tool
//! calls, clock, RSS watchdog, disk watch, cancellation, the process), except that an answered
//! cell leaves the kernel alive and stopped, and time running out interrupts before it kills.
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Instant;

use airlock_executor::config::GUEST_WORK_DIR;
use airlock_protocol::{Id, Message};
use serde_json::{json, Value};

use super::display::Displays;
use super::live::{Cell, Live};
use super::procs::Procs;
use super::signals::{signal_kernel, stop_kernel, SIGCONT};
use crate::result::{CellValue, RunResult, RunStatus};
use crate::run::{
    describe, kill_stage, tool_error_response, verdict, watch_disk, Cancel, End, Hint, Launched,
    Observed, ToolRelay, WATCHDOG_PERIOD,
};
use crate::tools::ToolHandler;

const SIGINT: i32 = 2;
/// How long a kernel that closed its socket gets to exit.
const EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
/// Longest `repr` kept from a cell's value.
pub(crate) const MAX_REPR: usize = 64 * 1024;
/// Largest JSON copy of a cell's value kept (encoded).
pub(crate) const MAX_JSON: usize = 256 * 1024;

/// How a cell's supervision stopped.
enum Stop {
    /// The guest answered: the kernel lives on.
    Answered(Option<Hint>, Option<CellValue>),
    /// The kernel must end (or has ended) for this reason.
    Fatal(End),
}

/// After an answer: stop the kernel and check it holds no more than its ceiling (a system call
/// that populates memory can finish after the answer was sent and before the stop takes).
/// `Some` is why the kernel must end instead.
async fn settle(procs: Procs, memory: u64, peak_rss: &mut u64) -> Option<End> {
    if !stop_kernel(procs).await {
        return Some(End::Internal(
            "the kernel could not be stopped between cells".into(),
        ));
    }
    let rss = procs.rss();
    *peak_rss = (*peak_rss).max(rss);
    (rss > memory).then_some(End::Memory)
}

fn execute(id: Id, n: i64, cell: &Cell<'_>, live: &Live, restore: bool) -> Message {
    let env: serde_json::Map<String, Value> = cell
        .spec
        .env
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let cwd = match &cell.spec.cwd {
        Some(rel) => format!("{}/{rel}", GUEST_WORK_DIR),
        None => GUEST_WORK_DIR.to_string(),
    };
    let params = json!({
        "code": cell.code, "cell": n, "sys_path": live.sys_path, "env": env, "cwd": cwd,
        "restricted": cell.spec.restricted, "restore": restore,
    });
    Message::request(id, "execute", Some(params))
}

/// Run cell `n` on `live`. The result's `kernel_restarted` says the kernel must be ended.
pub(super) async fn run(
    live: &mut Live,
    n: i64,
    cell: &Cell<'_>,
    restore: Option<std::fs::File>,
    tools: &dyn ToolHandler,
    cancel: &mut Cancel,
    started: Instant,
) -> RunResult {
    let procs = live.procs();
    signal_kernel(procs, SIGCONT);
    let limits = &cell.spec.limits;
    live.launched
        .readers_begin(limits.max_output_bytes, cell.spec.output.clone())
        .await;
    let mut relay = ToolRelay::new(tools);
    let mut displays = Displays::default();
    let mut peak_rss = 0;
    let mut exit = None;
    let mut interrupted: Option<(End, tokio::time::Instant)> = None;
    let id = super::ids::request_id(&format!("cell-{n}"));
    let request = execute(id.clone(), n, cell, live, restore.is_some());
    let sent = live.launched.send(request);
    let loader = restore
        .filter(|_| sent)
        .map(|state| super::state::load(live.launched.s.outbox.clone(), state));
    let stop = if sent {
        supervise(
            live,
            &id,
            cell,
            &mut relay,
            &mut displays,
            cancel,
            started,
            &mut peak_rss,
            &mut exit,
            &mut interrupted,
        )
        .await
    } else {
        Stop::Fatal(End::Internal("the kernel's socket is closed".into()))
    };
    if let Some(task) = loader {
        task.abort();
    }
    let l = &mut live.launched;
    let stop = match stop {
        Stop::Answered(hint, value) => settle(procs, live.limits.memory_bytes, &mut peak_rss)
            .await
            .map_or(Stop::Answered(hint, value), Stop::Fatal),
        fatal @ Stop::Fatal(_) => fatal,
    };
    let (end, hint, value, restarted) = match stop {
        Stop::Answered(hint, value) => {
            let end = interrupted.map_or(End::Exited, |(why, _)| why);
            let code = hint.as_ref().and_then(|h| h.exit_code).unwrap_or(1);
            let code = i32::try_from(code & 0xff).unwrap_or(1);
            exit = Some(ExitStatus::from_raw(code << 8));
            (end, hint, value, false)
        }
        Stop::Fatal(end) => {
            if exit.is_none() {
                exit = kill_stage(&mut l.s.child, l.cgroup.as_ref()).await;
            }
            (end, None, None, true)
        }
    };
    let (stdout, stderr) = l.readers_end().await;
    let oom_killed = l
        .cgroup
        .as_ref()
        .is_some_and(airlock_jail::cgroup::RunCgroup::oom_killed);
    let mut result = verdict(Observed {
        end,
        exit,
        hint,
        python: true,
        oom_killed,
        stdout,
        stderr,
        started,
        peak_rss,
        tool_calls: relay.calls,
        memory_limit: live.limits.memory_bytes,
        enforcement: l.enforcement.clone(),
        before_program: false,
    });
    result.value = value.map(|v| bounded(v, &mut displays));
    result.display = displays.items;
    result.display_dropped = displays.dropped;
    // A memory limit ends the kernel even when the program survived it (a `MemoryError` under
    // the address-space backstop): the state that filled it is what the next cell would inherit.
    result.kernel_restarted = restarted || result.status == RunStatus::MemoryLimit;
    result
}

#[allow(
    clippy::too_many_arguments,
    reason = "the cell's live state, threaded through one loop"
)]
async fn supervise(
    live: &mut Live,
    id: &Id,
    cell: &Cell<'_>,
    relay: &mut ToolRelay<'_>,
    displays: &mut Displays,
    cancel: &mut Cancel,
    started: Instant,
    peak_rss: &mut u64,
    exit: &mut Option<ExitStatus>,
    interrupted: &mut Option<(End, tokio::time::Instant)>,
) -> Stop {
    let limits = &cell.spec.limits;
    let memory = live.limits.memory_bytes;
    let procs = live.procs();
    let l = &mut live.launched;
    let mut disk = watch_disk(Arc::clone(&l.sandbox));
    let mut disk_watching = true;
    let deadline = tokio::time::Instant::from_std(started + limits.timeout);
    let mut watchdog = tokio::time::interval(WATCHDOG_PERIOD);
    loop {
        let kill_at = interrupted.as_ref().map_or(deadline, |(_, at)| *at);
        tokio::select! {
            status = l.s.child.wait() => {
                *exit = status.ok();
                return Stop::Fatal(interrupted.take().map_or(End::Exited, |(why, _)| why));
            }
            () = tokio::time::sleep_until(deadline), if interrupted.is_none() => {
                interrupt(l, relay, procs, interrupted, End::Timeout, limits.grace);
            }
            () = &mut *cancel, if interrupted.is_none() => {
                interrupt(l, relay, procs, interrupted, End::Cancelled, limits.grace);
            }
            () = tokio::time::sleep_until(kill_at), if interrupted.is_some() => {
                return Stop::Fatal(interrupted.take().map_or(End::Timeout, |(why, _)| why));
            }
            over = &mut disk.over, if disk_watching => match over {
                Ok(why) => return Stop::Fatal(End::Disk(why)),
                Err(_) => disk_watching = false,
            },
            _ = watchdog.tick() => {
                let rss = procs.rss();
                *peak_rss = (*peak_rss).max(rss);
                if rss > memory {
                    return Stop::Fatal(End::Memory);
                }
            }
            reply = relay.answered(limits), if relay.busy() => {
                if !l.send(reply) {
                    return Stop::Fatal(End::Protocol("the kernel stopped reading its socket".into()));
                }
            }
            msg = l.s.inbox.recv() => {
                let msg = match msg {
                    Some(Ok(Some(m))) => m,
                    Some(Err(e)) => return Stop::Fatal(End::Protocol(e.to_string())),
                    _ => {
                        // Its socket closes as it dies: the exit decides.
                        let wait = tokio::time::timeout(EXIT_WAIT, l.s.child.wait()).await;
                        *exit = wait.ok().and_then(Result::ok);
                        let why = if exit.is_some() { End::Exited } else {
                            End::Protocol("the kernel closed its socket".into())
                        };
                        return Stop::Fatal(why);
                    }
                };
                match msg {
                    Message::Response(r) if r.id.as_ref() == Some(id) => {
                        *peak_rss = (*peak_rss).max(procs.rss());
                        let (hint, value) = answer(r.outcome.ok());
                        return Stop::Answered(hint, value);
                    }
                    Message::Notification(d) if d.method == "display" => {
                        if let Err(why) = displays.offer(d.params) {
                            return Stop::Fatal(End::Protocol(why));
                        }
                    }
                    Message::Request(req) if req.method == "call_tool" && interrupted.is_none() => {
                        if let Some(r) = relay.request(req, limits) {
                            if !l.send(r) {
                                return Stop::Fatal(End::Protocol("the kernel floods requests without reading".into()));
                            }
                        }
                    }
                    Message::Request(req) if req.method == "call_tool" => {
                        // Interrupted: no new tool work; answer at once so the guest unwinds.
                        let r = tool_error_response(
                            req.id, airlock_protocol::ErrorCode::Shutdown, "the cell was interrupted");
                        let _ = l.send(r);
                    }
                    other => {
                        return Stop::Fatal(End::Protocol(format!("unexpected message: {}", describe(&other))));
                    }
                }
            }
        }
    }
}

/// A cell's answer (the result of its `execute`) as the broker reads it: the guest's hint
/// about how the program ended, and the value of its last expression. Anything malformed
/// reads as absent.
pub(crate) fn answer(result: Option<Value>) -> (Option<Hint>, Option<CellValue>) {
    let v = result.unwrap_or(Value::Null);
    let value = serde_json::from_value(v["value"].clone()).ok();
    (serde_json::from_value(v).ok(), value)
}

/// A cell's value within its caps: the `repr` truncated at a character boundary, the JSON
/// copy dropped when its encoding is too large, the rich representations checked as display
/// items are (a malformed set is left out and counted as a dropped item).
pub(crate) fn bounded(mut v: CellValue, displays: &mut Displays) -> CellValue {
    v.bundle = displays
        .value_bundle(std::mem::take(&mut v.bundle))
        .unwrap_or_else(|_| {
            displays.dropped = displays.dropped.saturating_add(1);
            Default::default()
        });
    truncate(&mut v.repr, MAX_REPR);
    let json_len = v.json.as_ref().map_or(0, |j| j.to_string().len());
    if json_len > MAX_JSON {
        v.json = None;
    }
    v
}

/// Time ran out or the caller cancelled: interrupt the program (`KeyboardInterrupt`), answer
/// a tool call in flight so the guest is not left waiting, and kill after `grace`.
fn interrupt(
    l: &Launched,
    relay: &mut ToolRelay<'_>,
    procs: Procs,
    interrupted: &mut Option<(End, tokio::time::Instant)>,
    why: End,
    grace: std::time::Duration,
) {
    signal_kernel(procs, SIGINT);
    if let Some(reply) = relay.abandon("the cell was interrupted") {
        let _ = l.send(reply);
    }
    *interrupted = Some((why, tokio::time::Instant::now() + grace));
}

fn truncate(s: &mut String, max: usize) {
    if s.len() > max {
        let mut at = max;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
    }
}
