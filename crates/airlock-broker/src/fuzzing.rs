//! What the broker reads from a guest, reachable from `fuzz/` (hidden from the docs; not an
//! API): the `ready` attestation and the `refused` notification, a kernel's `display`
//! notifications and a cell's answer, a running guest's `call_tool` requests, its report on
//! its program and any other message, each through the function the broker runs on it.
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::time::Instant;

use airlock_protocol::{Message, Request};
use serde_json::Value;

use crate::kernel::cell;
use crate::kernel::display::Displays;
use crate::limits::Limits;
use crate::output::Captured;
use crate::result::{CellValue, DisplayItem, RunResult};
use crate::run::{verdict, End, Observed, ToolRelay};
use crate::tools::ToolHandler;

/// The id of the broker's `execute` request, which the guest's report answers.
pub const EXECUTE_ID: i64 = crate::run::EXECUTE_ID;

/// A run's tool relay (`run::tool_relay`), one step at a time: what a one-shot run and a
/// kernel's cell do with each `call_tool` the guest sends and each answer its handler gives.
pub struct Relay<'a>(ToolRelay<'a>);

impl std::fmt::Debug for Relay<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("busy", &self.busy())
            .field("calls", &self.calls())
            .finish()
    }
}

impl<'a> Relay<'a> {
    /// A relay calling `tools`.
    pub fn new(tools: &'a dyn ToolHandler) -> Self {
        Relay(ToolRelay::new(tools))
    }

    /// Take a `call_tool` request: None when its handler started, else the refusal to send.
    pub fn request(&mut self, req: Request, limits: &Limits) -> Option<Message> {
        self.0.request(req, limits)
    }

    /// The answer to the call in flight (its handler's future polled to the end).
    pub async fn answered(&mut self, limits: &Limits) -> Message {
        self.0.answered(limits).await
    }

    /// True while a call is in flight.
    pub fn busy(&self) -> bool {
        self.0.busy()
    }

    /// Calls the guest made, refused ones included.
    pub fn calls(&self) -> u32 {
        self.0.calls
    }

    /// The run ends: the answer owed to a call in flight.
    pub fn abandon(&mut self, why: &str) -> Option<Message> {
        self.0.abandon(why)
    }
}

/// How a message outside the protocol is named in the run's protocol error.
pub fn describe(m: &Message) -> String {
    crate::run::describe(m)
}

/// The result of a Python run whose guest reported `report` (the result of `execute`, as the
/// run reads it) and exited with `exit_code`, having written `stdout` and `stderr`.
pub fn reported(
    report: Option<Value>,
    exit_code: i32,
    stdout: Captured,
    stderr: Captured,
) -> RunResult {
    verdict(Observed {
        end: End::Exited,
        exit: Some(std::process::ExitStatus::from_raw((exit_code & 0xff) << 8)),
        hint: report.and_then(|v| serde_json::from_value(v).ok()),
        python: true,
        oom_killed: false,
        stdout,
        stderr,
        started: Instant::now(),
        peak_rss: 0,
        tool_calls: 0,
        memory_limit: Limits::default().memory_bytes,
        enforcement: Vec::new(),
        before_program: false,
    })
}

/// The `ready` notification's params checked against `broker_ns`, as a run and a warm pool do.
pub fn ready(params: Option<Value>, broker_ns: &BTreeMap<String, String>) -> Result<(), String> {
    crate::run::check_ready(params, broker_ns)
}

/// The message a `refused` notification's params become.
pub fn refused(params: Option<Value>) -> String {
    crate::run::refusal_of(params)
}

/// A cell's `display` notifications, in order: the items kept and the number dropped, or the
/// protocol error that ends the kernel (at the first malformed one).
pub fn displays(all: Vec<Option<Value>>) -> Result<(Vec<DisplayItem>, u32), String> {
    let mut d = Displays::default();
    for params in all {
        d.offer(params)?;
    }
    Ok((d.items, d.dropped))
}

/// A cell's answer (its `execute` result) as kept: the exit code the guest intends, and the
/// value within its caps.
pub fn cell_answer(result: Option<Value>) -> (Option<i64>, Option<CellValue>) {
    let (hint, value) = cell::answer(result);
    let mut displays = Displays::default();
    let value = value.map(|v| cell::bounded(v, &mut displays));
    (hint.and_then(|h| h.exit_code), value)
}

/// Longest `repr` a cell's value keeps.
pub const MAX_REPR: usize = cell::MAX_REPR;
/// Largest encoded JSON copy a cell's value keeps.
pub const MAX_JSON: usize = cell::MAX_JSON;
