//! The supervision loop's handlers for what arrives on the executor's socket: a message (each
//! kind its own handler, allowed only in the phase it belongs to), a closed socket, a broken
//! frame.
//!
//! **Invariant:** no code is sent before the stage's attestation was checked and its tree is in
//! its cgroup (`handle_ready`); once a Python program runs, only its result and its tool calls
//! are accepted from it.
use std::ops::ControlFlow;
use std::process::ExitStatus;
use std::time::Instant;

use airlock_jail::procfs;
use airlock_protocol::{ErrorObject, Id, Message, Request};
use serde_json::{json, Value};

use super::channel::Received;
use super::guest_messages::{check_ready, describe, refusal_of, EXECUTE_ID};
use super::stage_proc::StageProcess;
use super::supervisor::{Flow, Phase, Program, Supervisor};
use super::verdict::End;
use crate::stage_cgroup;

impl Supervisor<'_> {
    /// The socket yielded a message, was closed, or broke.
    pub(super) async fn on_inbound(&mut self, received: Received) -> Flow {
        match received {
            Some(Ok(Some(msg))) => self.on_message(msg).await,
            // Clean EOF: the guest closed its end; wait for the process to exit.
            Some(Ok(None)) | None => self.on_socket_closed().await,
            Some(Err(e)) => ControlFlow::Break(End::Protocol(e.to_string())),
        }
    }

    /// The guest closed its end: the run ends when the process exits (or at the deadline).
    async fn on_socket_closed(&mut self) -> Flow {
        match wait_exit(&mut self.s.child, self.deadline).await {
            Some(status) => {
                self.exit = Some(status);
                ControlFlow::Break(End::Exited)
            }
            None => ControlFlow::Break(End::Timeout),
        }
    }

    /// One message, to its handler when the phase allows it; any other is a protocol violation.
    async fn on_message(&mut self, msg: Message) -> Flow {
        match (&self.phase, msg) {
            (Phase::AwaitReady, Message::Notification(n)) if n.method == "ready" => {
                self.handle_ready(n.params).await
            }
            // Only trusted code can refuse: the stage or bootstrap before `ready`, or
            // the stage of a command (whose socket the command never holds). Once a
            // Python program runs, a `refused` is the program forging its status.
            (phase_now, Message::Notification(n))
                if n.method == "refused"
                    && (matches!(phase_now, Phase::AwaitReady) || !self.python) =>
            {
                self.handle_refused(n.params)
            }
            (Phase::Running, Message::Request(req)) if req.method == "call_tool" => {
                self.handle_call_tool(req)
            }
            (Phase::Running, Message::Response(resp))
                if resp.id == Some(Id::Number(EXECUTE_ID)) && self.python =>
            {
                self.handle_execute_result(resp.outcome)
            }
            (_, other) => {
                let what = describe(&other);
                ControlFlow::Break(End::Protocol(format!("unexpected message: {what}")))
            }
        }
    }

    /// `ready`: check the attestation, settle the cgroup, and only then send the code.
    async fn handle_ready(&mut self, attestation: Option<Value>) -> Flow {
        if let Err(why) = check_ready(attestation, &self.broker_ns) {
            let why = format!("the sandbox could not prove its isolation: {why}");
            return ControlFlow::Break(End::Refused(why));
        }
        // No code before the tree is in its cgroup.
        let cpu = self.limits.cpu_millicores.is_some();
        let attached = stage_cgroup::settle(
            &mut self.attach,
            &mut self.cgroup,
            &mut self.enforcement,
            cpu,
        )
        .await;
        if let Err(why) = attached {
            return ControlFlow::Break(End::Refused(why));
        }
        // A tree already past its memory limit when it is ready never gets the program: the
        // interpreter cannot start within the limit (a sample now, not at the next tick, so the
        // verdict does not hang on when the watchdog last looked).
        self.on_watchdog_tick()?;
        if self.s.outbox.try_send(go(&self.program)).is_err() {
            return ControlFlow::Break(End::Internal("executor socket closed".into()));
        }
        self.phase = Phase::Running;
        ControlFlow::Continue(())
    }

    /// `refused` from trusted code: the run's refusal (it ends when the stage exits).
    fn handle_refused(&mut self, params: Option<Value>) -> Flow {
        self.refusal = Some(refusal_of(params));
        ControlFlow::Continue(())
    }

    /// `call_tool`: relay it; an answer ready at once (or a refusal) goes back now.
    fn handle_call_tool(&mut self, req: Request) -> Flow {
        if let Some(r) = self.relay.request(req, self.limits) {
            if self.s.outbox.try_send(r).is_err() {
                let why = "executor floods requests without reading";
                return ControlFlow::Break(End::Protocol(why.into()));
            }
        }
        ControlFlow::Continue(())
    }

    /// The `execute` result: the guest's report (a hint); it must exit within the grace period.
    fn handle_execute_result(&mut self, outcome: Result<Value, ErrorObject>) -> Flow {
        self.hint = match outcome {
            Ok(v) => serde_json::from_value(v).ok(),
            Err(_) => None,
        };
        // The guest is still alive at its peak: a run shorter than the
        // watchdog's period would otherwise report its start-up size.
        self.peak_rss = self.peak_rss.max(procfs::tree_rss_bytes(self.stage_pid));
        self.phase = Phase::Reported {
            by: Instant::now() + self.limits.grace,
        };
        ControlFlow::Continue(())
    }
}

/// What starts the run once the stage proved its isolation: `execute` with the program (Python
/// mode), or `start` (exec mode).
fn go(program: &Program<'_>) -> Message {
    match program.code {
        Some(code) => {
            let mut params = json!({
                "code": code,
                "sys_path": program.sys_path,
                "restricted": program.restricted,
            });
            if let Some(env) = program.env {
                params["env"] = Value::Object(env.clone());
            }
            Message::request(Id::Number(EXECUTE_ID), "execute", Some(params))
        }
        None => Message::notification("start", None),
    }
}

/// The stage's exit status, waited for until `deadline` (None past it).
async fn wait_exit(child: &mut StageProcess, deadline: tokio::time::Instant) -> Option<ExitStatus> {
    tokio::time::timeout_at(deadline, child.wait())
        .await
        .ok()
        .and_then(Result::ok)
}
