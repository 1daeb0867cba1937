//! The registry's errors as JSON-RPC says them: one function maps each kind to its code, and
//! a reason or figures become `data` (`data.kind` and each figure by name).
use airlock_protocol::{ErrorCode, ErrorObject};
use serde_json::{Map, Value};

use crate::registry::error::{ErrorKind, Fact, ServerError};

/// The JSON-RPC code of a registry error's kind.
#[must_use]
pub fn code_of(kind: ErrorKind) -> ErrorCode {
    match kind {
        ErrorKind::InvalidParams => ErrorCode::InvalidParams,
        ErrorKind::NotFound => ErrorCode::NotFound,
        ErrorKind::Refused => ErrorCode::SandboxRefused,
        ErrorKind::OverCapacity => ErrorCode::OverCapacity,
        ErrorKind::Busy => ErrorCode::Busy,
        ErrorKind::Internal => ErrorCode::InternalError,
    }
}

impl From<ServerError> for ErrorObject {
    fn from(e: ServerError) -> Self {
        let object = ErrorObject::new(code_of(e.kind), e.message);
        if e.reason.is_none() && e.facts.is_empty() {
            return object;
        }
        let mut data = Map::new();
        if let Some(reason) = e.reason {
            data.insert("kind".into(), Value::String(reason));
        }
        for (name, fact) in e.facts {
            let v = match fact {
                Fact::Number(n) => Value::from(n),
                Fact::Text(t) => Value::String(t),
            };
            data.insert(name.into(), v);
        }
        object.with_data(Value::Object(data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_and_figures_become_data_and_each_kind_its_code() {
        let e = ServerError::over_capacity("over the budget")
            .because("MemoryBudgetExceeded")
            .with("budget_mb", Fact::Number(768))
            .with("host", Fact::Text("example.com".into()));
        let wire = ErrorObject::from(e);
        assert_eq!(wire.code, ErrorCode::OverCapacity.code());
        assert_eq!(wire.message, "over the budget");
        let data = wire.data.unwrap();
        assert_eq!(data["kind"], "MemoryBudgetExceeded");
        assert_eq!(data["budget_mb"], 768);
        assert_eq!(data["host"], "example.com");
        let plain = ErrorObject::from(ServerError::not_found("no such sandbox"));
        assert_eq!(plain.code, ErrorCode::NotFound.code());
        assert!(plain.data.is_none());
        assert_eq!(
            ErrorObject::from(ServerError::busy("b")).code,
            ErrorCode::Busy.code()
        );
        assert_eq!(
            ErrorObject::from(ServerError::refused("r")).code,
            ErrorCode::SandboxRefused.code()
        );
    }
}
