//! The [`ToolHandler`] of a served run: each guest `call_tool` becomes a `call_tool` request
//! to the orchestrator with a broker-minted string id (never the guest's), and the answer is
//! routed back through a oneshot registered under that id.
//!
//! Each call has its own timeout, so an orchestrator that never answers costs the run one
//! tool error, not its whole budget. An answer that arrives after the call timed out (or after
//! the run ended) finds no entry and is dropped. What the orchestrator answers is bounded by
//! the transport's message cap and, for results, by the relay's tool-response cap; error
//! messages and data are bounded here before they reach the guest.
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use airlock_protocol::{ErrorCode, ErrorObject, Message, DEFAULT_MAX_MESSAGE_BYTES};
use futures_util::future::BoxFuture;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use crate::telemetry::audit::ToolCallRecord;
use crate::wire::transport::Outbound;
use airlock_broker::tools::{ToolFailure, ToolHandler};

/// Longest error message from the orchestrator relayed into the guest.
const MAX_ERROR_MESSAGE: usize = 4096;
/// Largest error `data` from the orchestrator relayed into the guest, in JSON bytes.
const MAX_ERROR_DATA: usize = 64 * 1024;

/// An orchestrator's answer to one `call_tool`.
pub type Answer = Result<Value, ErrorObject>;

/// Tool calls awaiting the orchestrator's answer on one connection.
#[derive(Debug, Default, Clone)]
pub struct Pending {
    map: Arc<Mutex<HashMap<String, oneshot::Sender<Answer>>>>,
}

impl Pending {
    fn insert(&self, id: String) -> oneshot::Receiver<Answer> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut m) = self.map.lock() {
            m.insert(id, tx);
        }
        rx
    }

    fn remove(&self, id: &str) {
        if let Ok(mut m) = self.map.lock() {
            m.remove(id);
        }
    }

    /// Route an answer; false when no call waits under `id`.
    pub fn deliver(&self, id: &str, answer: Answer) -> bool {
        let waiter = self.map.lock().ok().and_then(|mut m| m.remove(id));
        match waiter {
            Some(tx) => tx.send(answer).is_ok(),
            None => false,
        }
    }

    /// Calls currently waiting.
    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// True when no call waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Relays one run's tool calls to the orchestrator.
pub struct RemoteTools {
    run_id: String,
    sandbox_id: Option<String>,
    outbound: mpsc::Sender<Outbound>,
    pending: Pending,
    next: AtomicU64,
    timeout: Duration,
    allowed: Option<BTreeSet<String>>,
    calls: Mutex<Vec<ToolCallRecord>>,
}

impl std::fmt::Debug for RemoteTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteTools")
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

/// Removes the pending entry and records the call however the call future ends.
struct CallGuard<'a> {
    tools: &'a RemoteTools,
    id: String,
    name: &'a str,
    started: Instant,
    outcome: Option<String>,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        self.tools.pending.remove(&self.id);
        let outcome = self.outcome.take().unwrap_or_else(|| "abandoned".into());
        self.tools.record(self.name, self.started, outcome);
    }
}

fn outcome_name(r: &Result<Value, ToolFailure>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(f) => f.code.name().into(),
    }
}

impl RemoteTools {
    /// Tools for run `run_id`, sending requests on `outbound`, answers arriving via `pending`.
    pub fn new(
        run_id: String,
        outbound: mpsc::Sender<Outbound>,
        pending: Pending,
        timeout: Duration,
        allowed: Option<BTreeSet<String>>,
    ) -> Self {
        Self {
            run_id,
            sandbox_id: None,
            outbound,
            pending,
            next: AtomicU64::new(1),
            timeout,
            allowed,
            calls: Mutex::new(Vec::new()),
        }
    }

    /// Names the sandbox in every `call_tool` (a client with several runs on one connection
    /// can route a call before it has seen the run's id).
    #[must_use]
    pub fn in_sandbox(mut self, sandbox_id: &str) -> Self {
        self.sandbox_id = Some(sandbox_id.to_owned());
        self
    }

    /// The calls made so far (for the audit record).
    pub fn take_calls(&self) -> Vec<ToolCallRecord> {
        self.calls
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default()
    }

    fn record(&self, name: &str, started: Instant, outcome: String) {
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        if let Ok(mut c) = self.calls.lock() {
            c.push(ToolCallRecord::new(name, ms, outcome));
        }
    }

    async fn relay(&self, guard: &CallGuard<'_>, args: Value) -> Result<Value, ToolFailure> {
        let fail = |m: String| ToolFailure::new(ErrorCode::ToolError, m);
        let mut params = json!({ "tool": guard.name, "args": args, "run_id": self.run_id });
        if let Some(sid) = &self.sandbox_id {
            params["sandbox_id"] = json!(sid);
        }
        let request = Message::request(
            guard.id.clone(),
            airlock_protocol::method::CALL_TOOL,
            Some(params),
        );
        let size = request.to_vec().map(|v| v.len()).unwrap_or(usize::MAX);
        if size > DEFAULT_MAX_MESSAGE_BYTES {
            return Err(fail(format!(
                "tool call of {size} bytes does not fit one message"
            )));
        }
        let answer = self.pending.insert(guard.id.clone());
        let exchange = async {
            self.outbound
                .send(Outbound::Message(request))
                .await
                .map_err(|_| fail("the orchestrator is gone".into()))?;
            answer
                .await
                .map_err(|_| fail("the orchestrator is gone".into()))
        };
        let answer = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| {
                fail(format!(
                    "the orchestrator did not answer within {} s",
                    self.timeout.as_secs_f64()
                ))
            })??;
        answer.map_err(from_orchestrator)
    }
}

/// Map an orchestrator's error into what the guest sees: a tool-band code, bounded text.
fn from_orchestrator(e: ErrorObject) -> ToolFailure {
    let code = match e.error_code() {
        Some(c @ (ErrorCode::ToolError | ErrorCode::UnknownTool | ErrorCode::ToolDenied)) => c,
        _ => ErrorCode::ToolError,
    };
    let message: String = e.message.chars().take(MAX_ERROR_MESSAGE).collect();
    let data = e.data.filter(|d| {
        serde_json::to_vec(d)
            .map(|v| v.len() <= MAX_ERROR_DATA)
            .unwrap_or(false)
    });
    ToolFailure {
        code,
        message,
        data,
    }
}

impl ToolHandler for RemoteTools {
    fn call<'a>(&'a self, name: &'a str, args: Value) -> BoxFuture<'a, Result<Value, ToolFailure>> {
        Box::pin(async move {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let mut guard = CallGuard {
                tools: self,
                id: format!("{}.t{n}", self.run_id),
                name,
                started: Instant::now(),
                outcome: None,
            };
            let result = match &self.allowed {
                Some(allowed) if !allowed.contains(name) => {
                    let shown = crate::telemetry::audit::sanitize(name);
                    Err(ToolFailure::new(
                        ErrorCode::UnknownTool,
                        format!("no tool named {shown:?} is available"),
                    ))
                }
                _ => self.relay(&guard, args).await,
            };
            guard.outcome = Some(outcome_name(&result));
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(
        timeout: Duration,
        allowed: Option<&[&str]>,
    ) -> (RemoteTools, mpsc::Receiver<Outbound>, Pending) {
        let (tx, rx) = mpsc::channel(4);
        let pending = Pending::default();
        let allowed = allowed.map(|a| a.iter().map(|s| s.to_string()).collect());
        (
            RemoteTools::new("r9".into(), tx, pending.clone(), timeout, allowed),
            rx,
            pending,
        )
    }

    #[tokio::test]
    async fn a_call_is_relayed_under_a_minted_id_and_answered() {
        let (t, mut rx, pending) = tools(Duration::from_secs(5), None);
        let call = t.call("add", json!({"a": 1}));
        let answer = async {
            let Some(Outbound::Message(Message::Request(req))) = rx.recv().await else {
                panic!("no request")
            };
            assert_eq!(req.method, "call_tool");
            assert_eq!(req.params.as_ref().unwrap()["tool"], "add");
            let airlock_protocol::Id::String(id) = req.id else {
                panic!("id is not a string")
            };
            assert!(id.starts_with("r9.t"));
            assert!(pending.deliver(&id, Ok(json!(2))));
        };
        let (got, ()) = tokio::join!(call, answer);
        assert_eq!(got.unwrap(), json!(2));
        assert!(pending.is_empty());
        let calls = t.take_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].outcome, "ok");
    }

    #[tokio::test]
    async fn an_unanswered_call_times_out_and_leaves_nothing_pending() {
        let (t, _rx, pending) = tools(Duration::from_millis(50), None);
        let err = t.call("slow", Value::Null).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::ToolError);
        assert!(err.message.contains("did not answer"), "{err:?}");
        assert!(pending.is_empty());
        assert!(
            !pending.deliver("r9.t1", Ok(Value::Null)),
            "a late answer must find no waiter"
        );
    }

    #[tokio::test]
    async fn unlisted_tools_are_unknown_without_a_round_trip() {
        let (t, mut rx, _) = tools(Duration::from_secs(5), Some(&["a"]));
        let err = t.call("b", Value::Null).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::UnknownTool);
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn orchestrator_errors_are_mapped_into_the_tool_band_and_bounded() {
        let f = from_orchestrator(ErrorObject::new(
            ErrorCode::InternalError,
            "x".repeat(10_000),
        ));
        assert_eq!(f.code, ErrorCode::ToolError);
        assert_eq!(f.message.len(), MAX_ERROR_MESSAGE);
        let f = from_orchestrator(ErrorObject::new(ErrorCode::ToolDenied, "no"));
        assert_eq!(f.code, ErrorCode::ToolDenied);
    }
}
