//! Helpers: spawn `airlock mcp` with upstreams and a policy, talk MCP to it.
mod files;
mod logs;
mod policy;
mod processes;
mod rich;
mod session;
mod wire;

use std::path::PathBuf;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
    Implementation, ProtocolVersion,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::Value;

pub const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

pub fn upstream_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/upstream.py")
}

/// `--upstream` values for the two test upstreams.
pub fn upstream_args() -> Vec<String> {
    let script = upstream_script();
    let s = script.display();
    vec![
        "--upstream".into(),
        format!("weather=python3 '{s}' weather"),
        "--upstream".into(),
        format!("calc=python3 '{s}' calc"),
    ]
}

pub struct Airlock {
    pub client: RunningService<RoleClient, ClientConfig>,
    _policy: tempfile::TempDir,
}

/// Start `airlock mcp` with the test upstreams, `policy` as policy.toml and `extra` flags.
pub async fn start(policy: &str, extra: &[&str]) -> Airlock {
    let mut args = upstream_args();
    args.extend(extra.iter().map(|s| s.to_string()));
    start_with(policy, &args).await
}

/// Start `airlock mcp --policy <policy> ARGS...`.
pub async fn start_with(policy: &str, args: &[String]) -> Airlock {
    let dir = tempfile::tempdir().unwrap();
    let policy_path = dir.path().join("policy.toml");
    std::fs::write(&policy_path, policy).unwrap();
    let mut cmd = tokio::process::Command::new(AIRLOCK);
    cmd.arg("mcp")
        .arg("--policy")
        .arg(&policy_path)
        .args(args)
        .env("SECRET_TOKEN", "s3cret-value");
    let transport = TokioChildProcess::new(cmd).unwrap();
    let mut info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("airlock-test", "0"),
    );
    info.protocol_version = ProtocolVersion::V_2025_06_18;
    let client = tokio::time::timeout(Duration::from_secs(30), info.serve(transport))
        .await
        .expect("initialize within 30 s")
        .expect("initialize succeeds");
    Airlock {
        client,
        _policy: dir,
    }
}

impl Airlock {
    /// Call an airlock tool and return the result.
    pub async fn call(&self, tool: &'static str, args: Value) -> CallToolResult {
        let mut params = CallToolRequestParams::new(tool);
        params.arguments = args.as_object().cloned();
        tokio::time::timeout(
            Duration::from_secs(60),
            self.client.peer().call_tool(params),
        )
        .await
        .expect("tools/call within 60 s")
        .expect("tools/call succeeds")
    }

    /// Run a Python program with `execute`; returns (result, structured RunResult).
    pub async fn execute(&self, code: &str) -> (CallToolResult, Value) {
        let r = self
            .call("execute", serde_json::json!({ "code": code }))
            .await;
        let s = r.structured_content.clone().expect("structured content");
        (r, s)
    }
}

/// All text blocks of a result, joined.
pub fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}
