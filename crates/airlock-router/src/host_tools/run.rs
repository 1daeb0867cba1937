//! One run's door: the call cap, the gates in order, the response caps, and the record.
//!
//! The order of a call: count it (refusals count), refuse past the call cap, refuse an
//! unknown tool (echoing a sanitized name), mint the user authority for a `user` tool or
//! refuse, validate the arguments against the schema, run the body, then cap the response
//! (per response, per run, responses per run). Every outcome is one `HostToolCalled` event.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use airlock_policy::{Identity, SandboxKey};
use serde_json::Value;
use tokio::sync::OnceCell;

use super::declaration::{ToolCall, UserIdentity};
use super::denial::{sanitize, Denial, DenialCode};
use super::registry::{Registered, SealedRegistry};
use crate::observe::{HostToolCalled, HostToolOutcome};

/// Longest guest-chosen tool name echoed back in a refusal.
const ECHO_NAME_CHARS: usize = 64;
/// Schema errors reported per refusal, and characters per error.
const SCHEMA_ERRORS: usize = 3;
const SCHEMA_ERROR_CHARS: usize = 200;
/// Characters of a tool body's public failure reason passed on.
const BODY_REASON_CHARS: usize = 1000;

/// The door for one run. Create one per run with [`SealedRegistry::run`].
pub struct HostToolRun {
    registry: SealedRegistry,
    key: Option<SandboxKey>,
    calls: AtomicU32,
    served: AtomicU64,
    bytes: AtomicU64,
    user: OnceCell<Option<UserIdentity>>,
}

impl SealedRegistry {
    /// The door for one run, with its own call and response counters.
    #[must_use]
    pub fn run(&self, key: Option<SandboxKey>) -> HostToolRun {
        HostToolRun::new(self.clone(), key)
    }
}

impl std::fmt::Debug for HostToolRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostToolRun")
            .field("key", &self.key)
            .field("calls", &self.calls())
            .finish_non_exhaustive()
    }
}

impl HostToolRun {
    pub(crate) fn new(registry: SealedRegistry, key: Option<SandboxKey>) -> HostToolRun {
        HostToolRun {
            registry,
            key,
            calls: AtomicU32::new(0),
            served: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            user: OnceCell::new(),
        }
    }

    /// Calls made so far in this run, refusals included.
    #[must_use]
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }

    fn record(
        &self,
        tool: &str,
        reg: Option<&Registered>,
        outcome: HostToolOutcome,
        response_bytes: u64,
        failure: Option<&'static str>,
    ) {
        self.registry.inner.observers.emit(
            || HostToolCalled {
                key: self.key.clone(),
                tool: sanitize(tool, ECHO_NAME_CHARS),
                sink: reg.and_then(|r| r.declaration.sink.clone()),
                identity: reg.and_then(|r| r.declaration.identity),
                outcome,
                response_bytes,
                failure,
            },
            |o, e| o.host_tool_called(e),
        );
    }

    fn refuse(
        &self,
        tool: &str,
        reg: Option<&Registered>,
        outcome: HostToolOutcome,
        denial: Denial,
    ) -> Result<Value, Denial> {
        self.record(tool, reg, outcome, 0, Some(denial.code.kind()));
        Err(denial)
    }

    /// Calls `name` with `args` through every gate.
    pub async fn call(&self, name: &str, args: Value) -> Result<Value, Denial> {
        let inner = &self.registry.inner;
        let limits = inner.limits;
        let n = self.calls.fetch_add(1, Ordering::SeqCst).saturating_add(1);
        let reg = inner.tools.get(name);
        if n > limits.max_calls_per_run {
            let d = Denial::new(
                DenialCode::CallCapExhausted,
                format!(
                    "this run has used its {} host-tool calls; no further calls will be served",
                    limits.max_calls_per_run
                ),
                false,
            );
            return self.refuse(name, reg, HostToolOutcome::CapExhausted, d);
        }
        let Some(reg) = reg else {
            let names = self.registry.names().join(", ");
            let d = Denial::new(
                DenialCode::UnknownTool,
                format!(
                    "no host tool named {:?} is registered; available tools: [{names}]",
                    sanitize(name, ECHO_NAME_CHARS)
                ),
                false,
            );
            return self.refuse(name, None, HostToolOutcome::Refused, d);
        };
        let user_identity = if reg.declaration.identity == Some(Identity::User) {
            let minted = self
                .user
                .get_or_init(|| async {
                    match &inner.mint_user {
                        Some(m) => m.mint(self.key.as_ref()).await,
                        None => None,
                    }
                })
                .await
                .clone();
            if minted.is_none() {
                let d = Denial::new(
                    DenialCode::IdentityUnavailable,
                    "this tool acts as the user, and no user authority was granted to this run",
                    false,
                );
                return self.refuse(name, Some(reg), HostToolOutcome::Refused, d);
            }
            minted
        } else {
            None
        };
        let problems: Vec<String> = reg
            .validator
            .iter_errors(&args)
            .take(SCHEMA_ERRORS)
            .map(|e| sanitize(&e.to_string(), SCHEMA_ERROR_CHARS))
            .collect();
        if !problems.is_empty() {
            let d = Denial::new(
                DenialCode::InvalidArguments,
                format!(
                    "the arguments do not match the tool's schema: {}",
                    problems.join("; ")
                ),
                true,
            );
            return self.refuse(name, Some(reg), HostToolOutcome::Refused, d);
        }
        let call = ToolCall {
            args,
            user_identity,
            key: self.key.clone(),
        };
        let value = match reg.body.call(call).await {
            Ok(v) => v,
            Err(e) => {
                let d = Denial::new(
                    DenialCode::ToolFailed,
                    sanitize(&e.public_reason, BODY_REASON_CHARS),
                    e.retryable,
                );
                return self.refuse(name, Some(reg), HostToolOutcome::Failed, d);
            }
        };
        let size = serde_json::to_vec(&value).map_or(u64::MAX, |v| v.len() as u64);
        let caps = limits.responses;
        let total = self
            .bytes
            .fetch_add(size, Ordering::SeqCst)
            .saturating_add(size);
        let served = self.served.fetch_add(1, Ordering::SeqCst).saturating_add(1);
        let over = if size > caps.max_bytes_per_file {
            Some(format!(
                "the tool's answer is {size} bytes, above the {}-byte response cap",
                caps.max_bytes_per_file
            ))
        } else if total > caps.max_total_bytes {
            Some(format!(
                "this run's host-tool answers total {total} bytes, above the {}-byte cap",
                caps.max_total_bytes
            ))
        } else if served > caps.max_files {
            Some(format!(
                "this run has received its {} host-tool answers",
                caps.max_files
            ))
        } else {
            None
        };
        if let Some(reason) = over {
            let d = Denial::new(DenialCode::ResponseTooLarge, reason, false);
            return self.refuse(name, Some(reg), HostToolOutcome::Refused, d);
        }
        self.record(name, Some(reg), HostToolOutcome::Served, size, None);
        Ok(value)
    }
}
