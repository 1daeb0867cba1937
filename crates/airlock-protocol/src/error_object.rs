//! The `error` member of a failed response, built from the error-code table.
use serde::Serialize;
use serde_json::Value;

use crate::error_code::ErrorCode;

/// The `error` member of a failed [`Response`](crate::Response).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorObject {
    /// A code from [`ErrorCode`] (the decoder accepts any `i64`, so a newer peer's codes survive).
    pub code: i64,
    /// A short human- and model-readable description.
    pub message: String,
    /// Optional structured detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error object with a code from the table and no `data`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorObject {
            code: code.code(),
            message: message.into(),
            data: None,
        }
    }

    /// Attaches structured `data`.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// The table entry for [`ErrorObject::code`], if the code is one airlock knows.
    pub fn error_code(&self) -> Option<ErrorCode> {
        ErrorCode::from_code(self.code)
    }
}

impl ErrorCode {
    /// An [`ErrorObject`] with this code and `message`.
    pub fn with_message(self, message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(self, message)
    }
}
