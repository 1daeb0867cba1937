//! Isolation scope: how much of a conversation one sandbox serves.

use crate::vocab::vocabulary;

/// How much of a conversation one sandbox serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IsolationScope {
    /// One sandbox reused across the conversation's calls (get-or-create).
    #[default]
    Conversation,
    /// One sandbox per call, deleted when the call returns.
    Call,
}

vocabulary!(IsolationScope, "isolation scope", {
    Conversation => "conversation",
    Call => "call",
});

impl IsolationScope {
    /// The one rank table for scopes. Higher is stricter (less of a conversation shared).
    #[must_use]
    pub const fn rank(self) -> u8 {
        match self {
            IsolationScope::Conversation => 0,
            IsolationScope::Call => 1,
        }
    }

    /// The stricter of two scopes.
    #[must_use]
    pub const fn stricter(self, other: IsolationScope) -> IsolationScope {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }
}

impl PartialOrd for IsolationScope {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for IsolationScope {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rank().cmp(&other.rank())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_is_stricter() {
        assert_eq!(
            IsolationScope::Conversation.stricter(IsolationScope::Call),
            IsolationScope::Call
        );
        assert_eq!(
            IsolationScope::Call.stricter(IsolationScope::Conversation),
            IsolationScope::Call
        );
        assert_eq!(IsolationScope::default(), IsolationScope::Conversation);
        assert!("thread".parse::<IsolationScope>().is_err());
    }
}
