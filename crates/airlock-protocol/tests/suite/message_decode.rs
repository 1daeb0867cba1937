//! The strict decoder's shape rules and the serializer's wire form.

use airlock_protocol::{DecodeError, ErrorCode, ErrorObject, Id, Message, ShapeError};
use serde_json::json;

fn shape(body: &str) -> ShapeError {
    match Message::from_slice(body.as_bytes()) {
        Err(DecodeError::InvalidShape(e)) => e,
        other => panic!("expected a shape error for {body}, got {other:?}"),
    }
}

fn ok(body: &str) -> Message {
    Message::from_slice(body.as_bytes()).unwrap_or_else(|e| panic!("{body}: {e}"))
}

#[test]
fn accepts_each_kind() {
    assert_eq!(
        ok(r#"{"jsonrpc":"2.0","id":1,"method":"execute","params":{"code":"print(1)"}}"#),
        Message::request(1, "execute", Some(json!({"code": "print(1)"})))
    );
    assert_eq!(
        ok(r#"{"id":"a","method":"m","params":[1,2],"jsonrpc":"2.0"}"#),
        Message::request("a", "m", Some(json!([1, 2])))
    );
    assert_eq!(
        ok(r#"{"jsonrpc":"2.0","method":"ready"}"#),
        Message::notification("ready", None)
    );
    assert_eq!(
        ok(r#"{"jsonrpc":"2.0","id":7,"result":null}"#),
        Message::success(7, json!(null))
    );
    assert_eq!(
        ok(r#"{"jsonrpc":"2.0","id":-3,"error":{"code":-32002,"message":"t","data":null}}"#),
        Message::error(
            Id::Number(-3),
            ErrorCode::Timeout.with_message("t").with_data(json!(null))
        )
    );
    // Null id on an error response: the sender could not determine the id.
    assert_eq!(
        ok(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}"#),
        Message::error(None, ErrorCode::ParseError.with_message("bad"))
    );
    // Codes outside the table survive decoding.
    let m = ok(r#"{"jsonrpc":"2.0","id":1,"error":{"code":12,"message":""}}"#);
    assert_eq!(
        m,
        Message::error(
            Id::Number(1),
            ErrorObject {
                code: 12,
                message: String::new(),
                data: None
            }
        )
    );
}

#[test]
fn rejects_bad_version() {
    assert_eq!(shape(r#"{"method":"m"}"#), ShapeError::BadVersion);
    assert_eq!(
        shape(r#"{"jsonrpc":2.0,"method":"m"}"#),
        ShapeError::BadVersion
    );
    assert_eq!(
        shape(r#"{"jsonrpc":"2.00","method":"m"}"#),
        ShapeError::BadVersion
    );
}

#[test]
fn rejects_non_objects() {
    for body in ["1", "\"x\"", "null", "true"] {
        assert_eq!(shape(body), ShapeError::NotAnObject, "{body}");
    }
    assert!(matches!(
        Message::from_slice(b" [ ] "),
        Err(DecodeError::BatchUnsupported)
    ));
}

#[test]
fn rejects_duplicate_and_unknown_members() {
    assert_eq!(
        shape(r#"{"jsonrpc":"2.0","id":1,"result":1,"result":2}"#),
        ShapeError::DuplicateMember("result".into())
    );
    assert_eq!(
        shape(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#),
        ShapeError::DuplicateMember("id".into())
    );
    assert_eq!(
        shape(r#"{"jsonrpc":"2.0","method":"m","extra":{}}"#),
        ShapeError::UnknownMember("extra".into())
    );
    let long = "k".repeat(10_000);
    match shape(&format!(r#"{{"jsonrpc":"2.0","method":"m","{long}":1}}"#)) {
        ShapeError::UnknownMember(name) => assert_eq!(name.len(), 64),
        other => panic!("{other:?}"),
    }
}

#[test]
fn rejects_bad_method_and_params() {
    assert_eq!(
        shape(r#"{"jsonrpc":"2.0","id":1,"method":5}"#),
        ShapeError::MethodNotString
    );
    assert_eq!(
        shape(r#"{"jsonrpc":"2.0","method":null}"#),
        ShapeError::MethodNotString
    );
    for params in ["\"s\"", "1", "null", "true"] {
        let body = format!(r#"{{"jsonrpc":"2.0","method":"m","params":{params}}}"#);
        assert_eq!(shape(&body), ShapeError::BadParams, "{params}");
    }
}

#[test]
fn rejects_bad_ids() {
    for id in ["1.5", "1e3", "18446744073709551615", "true", "[]", "{}"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#);
        assert_eq!(shape(&body), ShapeError::BadId, "{id}");
    }
    assert_eq!(
        shape(r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#),
        ShapeError::NullRequestId
    );
    assert_eq!(
        shape(r#"{"jsonrpc":"2.0","id":null,"result":1}"#),
        ShapeError::NullIdOnSuccess
    );
    assert_eq!(
        shape(r#"{"jsonrpc":"2.0","result":1}"#),
        ShapeError::MissingResponseId
    );
    // i64 bounds are ids.
    assert_eq!(
        ok(&format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"m"}}"#,
            i64::MIN
        ))
        .id(),
        Some(&Id::Number(i64::MIN))
    );
}

#[test]
fn rejects_mixed_and_empty_messages() {
    assert_eq!(
        shape(r#"{"jsonrpc":"2.0","id":1,"method":"m","result":1}"#),
        ShapeError::RequestWithOutcome
    );
    assert_eq!(
        shape(r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":""}}"#),
        ShapeError::ResultAndError
    );
    assert_eq!(
        shape(r#"{"jsonrpc":"2.0","id":1,"result":1,"params":{}}"#),
        ShapeError::ResponseWithParams
    );
    assert_eq!(
        shape(r#"{"jsonrpc":"2.0","id":1}"#),
        ShapeError::NotAMessage
    );
    assert_eq!(shape(r#"{"jsonrpc":"2.0"}"#), ShapeError::NotAMessage);
}

#[test]
fn rejects_bad_error_objects() {
    for error in [
        r#""boom""#,
        r#"{"message":"x"}"#,
        r#"{"code":"-32001","message":"x"}"#,
        r#"{"code":-32001.0,"message":"x"}"#,
        r#"{"code":-32001}"#,
        r#"{"code":-32001,"message":1}"#,
        r#"{"code":-32001,"message":"x","extra":1}"#,
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"error":{error}}}"#);
        assert_eq!(shape(&body), ShapeError::BadErrorObject, "{error}");
    }
}

#[test]
fn parse_errors_are_distinct_from_shape_errors() {
    // Malformed JSON is a parse error even where a shape rule would also fail.
    let e = Message::from_slice(br#"{"jsonrpc":"2.0","jsonrpc":"2.0""#).unwrap_err();
    assert!(matches!(e, DecodeError::NotJson(_)), "{e:?}");
    assert_eq!(e.error_code(), ErrorCode::ParseError);
    let trailing = Message::from_slice(br#"{"jsonrpc":"2.0","method":"m"} {}"#).unwrap_err();
    assert!(matches!(trailing, DecodeError::NotJson(_)), "{trailing:?}");
    let deep = format!(
        r#"{{"jsonrpc":"2.0","method":"m","params":{}{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    assert!(matches!(
        Message::from_slice(deep.as_bytes()),
        Err(DecodeError::NotJson(_))
    ));
    assert_eq!(
        Message::from_slice(b"[]").unwrap_err().error_code(),
        ErrorCode::InvalidRequest
    );
    assert_eq!(
        Message::from_slice(b"\xff").unwrap_err().error_code(),
        ErrorCode::ParseError
    );
}

#[test]
fn serializes_the_wire_form() {
    let cases = [
        (
            Message::request(1, "call_tool", Some(json!({"tool": "t", "args": {}}))),
            r#"{"jsonrpc":"2.0","id":1,"method":"call_tool","params":{"args":{},"tool":"t"}}"#,
        ),
        (
            Message::notification("ready", None),
            r#"{"jsonrpc":"2.0","method":"ready"}"#,
        ),
        (
            Message::success("x", json!({"status": "completed"})),
            r#"{"jsonrpc":"2.0","id":"x","result":{"status":"completed"}}"#,
        ),
        (
            Message::error(None, ErrorCode::ProtocolViolation.with_message("bad frame")),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"bad frame"}}"#,
        ),
    ];
    for (message, wire) in cases {
        assert_eq!(String::from_utf8(message.to_vec().unwrap()).unwrap(), wire);
        assert_eq!(Message::from_slice(wire.as_bytes()).unwrap(), message);
    }
}

/// Found by the `jsonrpc_decode` fuzz target (docs/fuzzing.md): bytes serde_json refuses as
/// JSON (a number out of range, a lone surrogate) were read as JSON-RPC shape errors when they
/// sat where the decoder only skipped values (an unknown or duplicate member, a batch, a
/// non-object), so the peer heard `invalid_request` for what is a `parse_error`.
#[test]
fn bytes_serde_json_refuses_are_parse_errors_wherever_they_sit() {
    for body in [
        r#"{"jsonrpc":"3.0","`arams":[1e400,-0,0.1]}"#,
        r#"{"jsonrpc":"2.0","x":1e400,"method":"m"}"#,
        r#"{"jsonrpc":"2.0","method":"m","method":-1e400}"#,
        r#"{"jsonrpc":"2.0","method":"m","x":{"k":"\ud800"}}"#,
        r#"[1e400]"#,
        r#"1e400"#,
    ] {
        assert!(
            serde_json::from_str::<serde_json::Value>(body).is_err(),
            "{body}"
        );
        let e = Message::from_slice(body.as_bytes()).unwrap_err();
        assert!(matches!(e, DecodeError::NotJson(_)), "{body}: {e:?}");
        assert_eq!(e.error_code(), ErrorCode::ParseError);
    }
}

#[test]
fn serde_deserialize_applies_the_same_rules() {
    let m: Message = serde_json::from_value(json!({"jsonrpc": "2.0", "method": "ready"})).unwrap();
    assert_eq!(m, Message::notification("ready", None));
    let err = serde_json::from_value::<Message>(json!({"jsonrpc": "2.0", "id": null, "result": 1}))
        .unwrap_err();
    assert!(err.to_string().contains("null id"), "{err}");
    assert!(serde_json::from_value::<Message>(json!([])).is_err());
}
