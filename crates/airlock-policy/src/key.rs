//! The address of a sandbox, and the caller context that builds it out of the host's request.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use thiserror::Error;

use crate::scope::IsolationScope;

/// Longest accepted key component, in bytes. Backends fold components into container names,
/// labels and paths; a bound keeps every one of those bounded too.
pub const MAX_KEY_COMPONENT_BYTES: usize = 256;

/// A key component that cannot address a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The component is empty.
    #[error("sandbox key {field} is empty")]
    Empty {
        /// Which component.
        field: &'static str,
    },
    /// The component is longer than [`MAX_KEY_COMPONENT_BYTES`].
    #[error("sandbox key {field} is {len} bytes, above the {MAX_KEY_COMPONENT_BYTES}-byte cap")]
    TooLong {
        /// Which component.
        field: &'static str,
        /// Its length.
        len: usize,
    },
    /// The component carries a control character.
    #[error("sandbox key {field} contains a control character")]
    ControlCharacter {
        /// Which component.
        field: &'static str,
    },
    /// A per-call scope was asked of a key with no call id.
    #[error("a call-scoped sandbox needs a key with a call id")]
    MissingCallId,
}

fn check(field: &'static str, value: &str) -> Result<(), KeyError> {
    if value.is_empty() {
        return Err(KeyError::Empty { field });
    }
    if value.len() > MAX_KEY_COMPONENT_BYTES {
        return Err(KeyError::TooLong {
            field,
            len: value.len(),
        });
    }
    if value.chars().any(char::is_control) {
        return Err(KeyError::ControlCharacter { field });
    }
    Ok(())
}

/// The address of one sandbox: whose request (scope, thread), which workload (agent_dir) and,
/// for call-scoped sandboxes, which call.
/// Serialised for records; never deserialised, so every key in memory passed validation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct SandboxKey {
    scope: String,
    thread_id: String,
    agent_dir: String,
    call_id: Option<String>,
}

impl SandboxKey {
    /// A conversation key. Tool-facing code should build keys through [`CallerContext`]:
    /// a key a caller can supply is a key a model can supply.
    pub fn new(
        scope: impl Into<String>,
        thread_id: impl Into<String>,
        agent_dir: impl Into<String>,
    ) -> Result<SandboxKey, KeyError> {
        let key = SandboxKey {
            scope: scope.into(),
            thread_id: thread_id.into(),
            agent_dir: agent_dir.into(),
            call_id: None,
        };
        check("scope", &key.scope)?;
        check("thread_id", &key.thread_id)?;
        check("agent_dir", &key.agent_dir)?;
        Ok(key)
    }

    /// This key, addressing one call.
    pub fn with_call_id(mut self, call_id: impl Into<String>) -> Result<SandboxKey, KeyError> {
        let call_id = call_id.into();
        check("call_id", &call_id)?;
        self.call_id = Some(call_id);
        Ok(self)
    }

    /// The tenant (or other host partition) the request belongs to.
    #[must_use]
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The conversation.
    #[must_use]
    pub fn thread_id(&self) -> &str {
        &self.thread_id
    }

    /// The workload's directory (which agent/kind).
    #[must_use]
    pub fn agent_dir(&self) -> &str {
        &self.agent_dir
    }

    /// The call, when the key addresses one.
    #[must_use]
    pub fn call_id(&self) -> Option<&str> {
        self.call_id.as_deref()
    }

    /// Whether this key belongs to the conversation `(scope, thread_id)`.
    #[must_use]
    pub fn in_conversation(&self, scope: &str, thread_id: &str) -> bool {
        self.scope == scope && self.thread_id == thread_id
    }

    /// The key that names the sandbox serving `scope`: a conversation sandbox is addressed
    /// without the call id (every call shares it); a call sandbox must carry one.
    pub fn for_scope(&self, scope: IsolationScope) -> Result<SandboxKey, KeyError> {
        match scope {
            IsolationScope::Conversation => Ok(SandboxKey {
                call_id: None,
                ..self.clone()
            }),
            IsolationScope::Call => match self.call_id {
                Some(_) => Ok(self.clone()),
                None => Err(KeyError::MissingCallId),
            },
        }
    }
}

impl fmt::Display for SandboxKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.scope, self.thread_id, self.agent_dir)?;
        if let Some(call) = &self.call_id {
            write!(f, "#{call}")?;
        }
        Ok(())
    }
}

/// A value read from the host's request context at call time.
pub type ContextFn = Arc<dyn Fn() -> String + Send + Sync>;

/// Where a key's scope and thread come from: callables the host wires to its own request
/// context, read every time a key is built, never values a caller passes in.
#[derive(Clone)]
pub struct CallerContext {
    scope: ContextFn,
    thread_id: ContextFn,
}

impl fmt::Debug for CallerContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallerContext").finish_non_exhaustive()
    }
}

impl CallerContext {
    /// A context reading scope and thread from the two callables.
    pub fn new(
        scope: impl Fn() -> String + Send + Sync + 'static,
        thread_id: impl Fn() -> String + Send + Sync + 'static,
    ) -> CallerContext {
        CallerContext {
            scope: Arc::new(scope),
            thread_id: Arc::new(thread_id),
        }
    }

    /// The conversation key for `agent_dir`, reading the callables now.
    pub fn key(&self, agent_dir: &str) -> Result<SandboxKey, KeyError> {
        SandboxKey::new((self.scope)(), (self.thread_id)(), agent_dir)
    }

    /// The key for one call of `agent_dir`, reading the callables now.
    pub fn call_key(&self, agent_dir: &str, call_id: &str) -> Result<SandboxKey, KeyError> {
        self.key(agent_dir)?.with_call_id(call_id)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn context_is_read_at_call_time() {
        let n = Arc::new(AtomicUsize::new(0));
        let n2 = Arc::clone(&n);
        let ctx = CallerContext::new(
            || "tenant".to_owned(),
            move || format!("t-{}", n2.fetch_add(1, Ordering::SeqCst)),
        );
        assert_eq!(ctx.key("devops").unwrap().thread_id(), "t-0");
        assert_eq!(ctx.key("devops").unwrap().thread_id(), "t-1");
    }

    #[test]
    fn components_are_validated() {
        assert_eq!(
            SandboxKey::new("", "t", "a"),
            Err(KeyError::Empty { field: "scope" })
        );
        assert_eq!(
            SandboxKey::new("s", "t\n", "a"),
            Err(KeyError::ControlCharacter { field: "thread_id" })
        );
        let long = "x".repeat(MAX_KEY_COMPONENT_BYTES + 1);
        assert!(matches!(
            SandboxKey::new("s", "t", long),
            Err(KeyError::TooLong {
                field: "agent_dir",
                ..
            })
        ));
    }

    #[test]
    fn for_scope_drops_or_requires_the_call_id() {
        let conv = SandboxKey::new("s", "t", "a").unwrap();
        let call = conv.clone().with_call_id("c1").unwrap();
        assert_eq!(call.for_scope(IsolationScope::Conversation).unwrap(), conv);
        assert_eq!(call.for_scope(IsolationScope::Call).unwrap(), call);
        assert_eq!(
            conv.for_scope(IsolationScope::Call),
            Err(KeyError::MissingCallId)
        );
    }
}
