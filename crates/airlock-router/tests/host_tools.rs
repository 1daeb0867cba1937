//! The host-tool registry: empty by default, declarations read once at registration, sealing
//! freezes it, identities default to app, the per-run call cap counts refusals, response caps
//! hold, arguments are validated against the schema, unknown tools get a sanitized refusal,
//! and every call is recorded.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use airlock_policy::{Identity, SandboxKey, TransferLimits};
use airlock_router::host_tools::{
    DenialCode, HostTool, HostToolLimits, HostToolRegistry, MintUser, RegisterError, ToolBody,
    ToolBodyError, ToolCall, ToolDeclaration, UserIdentity,
};
use airlock_router::{HostToolCalled, HostToolOutcome, Observers, SandboxObserver};
use async_trait::async_trait;
use serde_json::{json, Value};

/// Echoes its arguments (or a large string), counting calls and recording the user.
#[derive(Default)]
struct Echo {
    calls: AtomicUsize,
    users: Mutex<Vec<Option<UserIdentity>>>,
}

#[async_trait]
impl ToolBody for Echo {
    async fn call(&self, call: ToolCall) -> Result<Value, ToolBodyError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.users.lock().unwrap().push(call.user_identity.clone());
        if call.args.get("fail").is_some() {
            return Err(ToolBodyError {
                public_reason: "the upstream said no\u{7}".into(),
                retryable: true,
            });
        }
        if let Some(n) = call.args.get("big").and_then(Value::as_u64) {
            return Ok(json!("x".repeat(usize::try_from(n).unwrap())));
        }
        Ok(call.args)
    }
}

fn tool(name: &str, identity: Option<Identity>, body: Arc<Echo>) -> HostTool {
    HostTool {
        name: name.into(),
        description: "echo".into(),
        schema: json!({
            "type": "object",
            "properties": {"text": {"type": "string"}, "big": {"type": "integer"}, "fail": {}},
            "additionalProperties": false
        }),
        declaration: ToolDeclaration::new(Some("echo-source"), Some("echo-sink"), identity),
        body,
    }
}

#[derive(Default)]
struct Records(Mutex<Vec<HostToolCalled>>);

impl SandboxObserver for Records {
    fn host_tool_called(&self, e: &HostToolCalled) {
        self.0.lock().unwrap().push(e.clone());
    }
}

#[tokio::test]
async fn an_empty_registry_serves_nothing_and_refusals_are_structured() {
    let reg = HostToolRegistry::new().seal();
    assert!(reg.is_empty());
    let run = reg.run(None);
    let d = run.call("rm_rf\u{1b}[31m", json!({})).await.unwrap_err();
    assert_eq!(d.code, DenialCode::UnknownTool);
    assert!(!d.reason.contains('\u{1b}'), "{}", d.reason);
    assert!(!d.retryable);
    let j = d.to_json();
    assert_eq!(j["code"], "unknown_tool");
    assert_eq!(j["retryable"], false);
    let long = "n".repeat(10_000);
    let d = run.call(&long, json!({})).await.unwrap_err();
    assert!(
        d.reason.len() < 300,
        "an unbounded echo: {} bytes",
        d.reason.len()
    );
}

#[tokio::test]
async fn registration_gates_and_sealing() {
    let body = Arc::new(Echo::default());
    let mut reg = HostToolRegistry::new();
    reg.register(tool("echo", Some(Identity::App), body.clone()))
        .unwrap();
    assert_eq!(
        reg.register(tool("echo", None, body.clone())),
        Err(RegisterError::Duplicate("echo".into()))
    );
    assert!(matches!(
        reg.register(tool("as-user", Some(Identity::User), body.clone())),
        Err(RegisterError::IdentityNotAllowed {
            identity: Identity::User,
            ..
        })
    ));
    reg.register(tool("no-identity", None, body.clone()))
        .unwrap();
    for bad in ["", "a b", "x/y", &"n".repeat(65)] {
        assert!(matches!(
            reg.register(tool(bad, None, body.clone())),
            Err(RegisterError::InvalidName(_))
        ));
    }
    let mut t = tool("bad-schema", None, body.clone());
    t.schema = json!({"type": 12});
    assert!(matches!(
        reg.register(t),
        Err(RegisterError::InvalidSchema { .. })
    ));
    let sealed = reg.seal();
    assert_eq!(sealed.names(), vec!["echo", "no-identity"]);
    assert_eq!(sealed.identities(), [Identity::App].into_iter().collect());
    assert_eq!(
        sealed.declaration("echo").unwrap().sink.as_deref(),
        Some("echo-sink")
    );
}

#[tokio::test]
async fn arguments_are_validated_host_side_and_the_body_never_sees_bad_ones() {
    let body = Arc::new(Echo::default());
    let mut reg = HostToolRegistry::new();
    reg.register(tool("echo", Some(Identity::App), body.clone()))
        .unwrap();
    let run = reg.seal().run(None);
    assert_eq!(
        run.call("echo", json!({"text": "hi"})).await.unwrap(),
        json!({"text": "hi"})
    );
    for bad in [
        json!({"text": 5}),
        json!({"other": 1}),
        json!("string"),
        json!(null),
    ] {
        let d = run.call("echo", bad.clone()).await.unwrap_err();
        assert_eq!(d.code, DenialCode::InvalidArguments, "{bad}");
        assert!(d.retryable);
    }
    assert_eq!(body.calls.load(Ordering::SeqCst), 1);
    let d = run.call("echo", json!({"fail": 1})).await.unwrap_err();
    assert_eq!((d.code, d.retryable), (DenialCode::ToolFailed, true));
    assert!(!d.reason.contains('\u{7}'));
}

#[tokio::test]
async fn the_call_cap_counts_refusals_and_resets_per_run() {
    let body = Arc::new(Echo::default());
    let mut reg = HostToolRegistry::new().limits(HostToolLimits {
        max_calls_per_run: 3,
        ..HostToolLimits::default()
    });
    reg.register(tool("echo", None, body.clone())).unwrap();
    let sealed = reg.seal();
    let run = sealed.run(None);
    run.call("nope", json!({})).await.unwrap_err();
    run.call("echo", json!({"text": 1})).await.unwrap_err();
    run.call("echo", json!({})).await.unwrap();
    let d = run.call("echo", json!({})).await.unwrap_err();
    assert_eq!((d.code, d.retryable), (DenialCode::CallCapExhausted, false));
    assert_eq!(run.calls(), 4);
    assert_eq!(body.calls.load(Ordering::SeqCst), 1);
    sealed.run(None).call("echo", json!({})).await.unwrap();
}

#[tokio::test]
async fn response_caps_hold_per_response_per_run_and_per_count() {
    let body = Arc::new(Echo::default());
    let mut reg = HostToolRegistry::new().limits(HostToolLimits {
        max_calls_per_run: 100,
        responses: TransferLimits {
            max_bytes_per_file: 1000,
            max_total_bytes: 2500,
            max_files: 4,
        },
    });
    reg.register(tool("echo", None, body)).unwrap();
    let sealed = reg.seal();
    let run = sealed.run(None);
    let d = run.call("echo", json!({"big": 2000})).await.unwrap_err();
    assert_eq!(d.code, DenialCode::ResponseTooLarge);
    assert!(d.reason.contains("1000"), "{}", d.reason);
    let run = sealed.run(None);
    run.call("echo", json!({"big": 900})).await.unwrap();
    run.call("echo", json!({"big": 900})).await.unwrap();
    let d = run.call("echo", json!({"big": 900})).await.unwrap_err();
    assert!(d.reason.contains("2500"), "{}", d.reason);
    let run = sealed.run(None);
    for _ in 0..4 {
        run.call("echo", json!({})).await.unwrap();
    }
    assert_eq!(
        run.call("echo", json!({})).await.unwrap_err().code,
        DenialCode::ResponseTooLarge
    );
}

struct Minter(Option<&'static str>);

#[async_trait]
impl MintUser for Minter {
    async fn mint(&self, _key: Option<&SandboxKey>) -> Option<UserIdentity> {
        self.0.map(|s| UserIdentity(s.into()))
    }
}

#[tokio::test]
async fn user_authority_is_opt_in_and_minted_per_run() {
    let body = Arc::new(Echo::default());
    let both = [Identity::App, Identity::User];
    let mut reg = HostToolRegistry::new().allowed_identities(both);
    reg.register(tool("me", Some(Identity::User), body.clone()))
        .unwrap();
    let d = reg
        .seal()
        .run(None)
        .call("me", json!({}))
        .await
        .unwrap_err();
    assert_eq!(d.code, DenialCode::IdentityUnavailable);
    assert_eq!(body.calls.load(Ordering::SeqCst), 0);
    let mut reg = HostToolRegistry::new()
        .allowed_identities(both)
        .mint_user(Arc::new(Minter(Some("alice-token"))));
    reg.register(tool("me", Some(Identity::User), body.clone()))
        .unwrap();
    reg.seal().run(None).call("me", json!({})).await.unwrap();
    assert_eq!(
        body.users.lock().unwrap().last().cloned().flatten(),
        Some(UserIdentity("alice-token".into()))
    );
}

#[tokio::test]
async fn every_call_is_recorded_with_its_declaration() {
    let rec = Arc::new(Records::default());
    let body = Arc::new(Echo::default());
    let mut reg = HostToolRegistry::new()
        .observers(Observers::new(
            Some(rec.clone() as Arc<dyn SandboxObserver>),
        ))
        .limits(HostToolLimits {
            max_calls_per_run: 2,
            ..HostToolLimits::default()
        });
    reg.register(tool("echo", Some(Identity::App), body))
        .unwrap();
    let run = reg.seal().run(None);
    run.call("echo", json!({"text": "abc"})).await.unwrap();
    run.call("ghost", json!({})).await.unwrap_err();
    run.call("echo", json!({})).await.unwrap_err();
    let r = rec.0.lock().unwrap();
    let seen: Vec<(String, HostToolOutcome, Option<&str>)> = r
        .iter()
        .map(|e| (e.tool.clone(), e.outcome, e.failure))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("echo".into(), HostToolOutcome::Served, None),
            (
                "ghost".into(),
                HostToolOutcome::Refused,
                Some("HostToolUnknown")
            ),
            (
                "echo".into(),
                HostToolOutcome::CapExhausted,
                Some("HostToolCallCapExhausted")
            ),
        ]
    );
    assert_eq!(r[0].sink.as_deref(), Some("echo-sink"));
    assert_eq!(r[0].identity, Some(Identity::App));
    assert_eq!(r[0].response_bytes, 14);
}
