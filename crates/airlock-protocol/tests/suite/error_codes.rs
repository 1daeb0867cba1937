//! The error-code table is a wire contract: pin every number and name, and the conversions.

use std::collections::HashSet;

use airlock_protocol::error_code::APPLICATION_CODE_RANGE;
use airlock_protocol::{ErrorCode, ErrorObject};

/// The table as other crates and the Python client code against it.
const CONTRACT: &[(ErrorCode, i64, &str)] = &[
    (ErrorCode::ParseError, -32700, "parse_error"),
    (ErrorCode::InvalidRequest, -32600, "invalid_request"),
    (ErrorCode::MethodNotFound, -32601, "method_not_found"),
    (ErrorCode::InvalidParams, -32602, "invalid_params"),
    (ErrorCode::InternalError, -32603, "internal_error"),
    (ErrorCode::ToolError, -32001, "tool_error"),
    (ErrorCode::Timeout, -32002, "timeout"),
    (ErrorCode::MemoryLimit, -32003, "memory_limit"),
    (ErrorCode::OutputLimit, -32004, "output_limit"),
    (ErrorCode::ProtocolViolation, -32005, "protocol_violation"),
    (ErrorCode::Busy, -32006, "busy"),
    (ErrorCode::SandboxRefused, -32007, "sandbox_refused"),
    (ErrorCode::ProgramTooLarge, -32008, "program_too_large"),
    (ErrorCode::ToolCallLimit, -32009, "tool_call_limit"),
    (ErrorCode::ExecutorCrashed, -32010, "executor_crashed"),
    (ErrorCode::Unauthorized, -32011, "unauthorized"),
    (ErrorCode::Shutdown, -32012, "shutdown"),
    (ErrorCode::UnknownTool, -32013, "unknown_tool"),
    (ErrorCode::ToolDenied, -32014, "tool_denied"),
    (ErrorCode::ProgramError, -32015, "program_error"),
    (ErrorCode::NotFound, -32016, "not_found"),
    (ErrorCode::FileRefused, -32017, "file_refused"),
    (ErrorCode::OverCapacity, -32018, "over_capacity"),
];

#[test]
fn numbers_and_names_match_the_contract() {
    for &(code, number, name) in CONTRACT {
        assert_eq!(code.code(), number, "{code:?}");
        assert_eq!(code.name(), name, "{code:?}");
        assert_eq!(ErrorCode::from_code(number), Some(code));
        assert_eq!(ErrorCode::from_name(name), Some(code));
    }
    assert_eq!(
        ErrorCode::ALL.len(),
        CONTRACT.len(),
        "ALL and the contract differ"
    );
    for code in ErrorCode::ALL {
        assert!(
            CONTRACT.iter().any(|(c, _, _)| c == code),
            "{code:?} missing from contract"
        );
    }
}

#[test]
fn numbers_and_names_are_unique() {
    let numbers: HashSet<i64> = ErrorCode::ALL.iter().map(|c| c.code()).collect();
    let names: HashSet<&str> = ErrorCode::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(numbers.len(), ErrorCode::ALL.len());
    assert_eq!(names.len(), ErrorCode::ALL.len());
}

#[test]
fn application_codes_sit_in_the_server_band() {
    for code in ErrorCode::ALL {
        let standard = [-32700, -32600, -32601, -32602, -32603].contains(&code.code());
        assert_eq!(code.is_application(), !standard, "{code:?}");
        assert_eq!(
            APPLICATION_CODE_RANGE.contains(&code.code()),
            !standard,
            "{code:?}"
        );
    }
}

#[test]
fn unknown_numbers_and_names_are_none() {
    for n in [0, -32000, -32019, -32099, -32604, -32701, 1, i64::MIN] {
        assert_eq!(ErrorCode::from_code(n), None, "{n}");
    }
    assert_eq!(ErrorCode::from_name("Timeout"), None);
    assert_eq!(ErrorCode::from_name(""), None);
}

#[test]
fn error_object_carries_the_code() {
    let e = ErrorCode::Busy.with_message("a run is in flight");
    assert_eq!(
        e,
        ErrorObject {
            code: -32006,
            message: "a run is in flight".into(),
            data: None
        }
    );
    assert_eq!(e.error_code(), Some(ErrorCode::Busy));
    let foreign = ErrorObject {
        code: -32050,
        message: String::new(),
        data: None,
    };
    assert_eq!(foreign.error_code(), None);
    assert_eq!(ErrorCode::Timeout.to_string(), "timeout (-32002)");
}
