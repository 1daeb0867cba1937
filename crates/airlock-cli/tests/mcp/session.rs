//! Client sessions over rmcp: list tools, run programs that orchestrate upstream tools.
use std::time::{Duration, Instant};

use rmcp::model::ContentBlock;
use serde_json::{json, Value};

use super::{start, start_with, text, upstream_script, AIRLOCK};

pub(super) const POLICY: &str =
    "floor = \"os_process\"\n[limits]\ntimeout_seconds = 20\nmax_tool_calls = 16\n";

pub(super) fn stdout_json(s: &Value) -> Value {
    let out = s["stdout"].as_str().expect("stdout");
    let last = out
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no stdout in {s}"));
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {out:?} / {s}"))
}

#[tokio::test]
async fn lists_tools_and_the_execute_description_names_every_upstream_tool() {
    let a = start(POLICY, &[]).await;
    let tools = a.client.peer().list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        vec![
            "execute",
            "run_python",
            "exec",
            "write_file",
            "read_file",
            "list_files"
        ]
    );
    let desc = tools[0].description.as_deref().unwrap();
    for t in [
        "weather.forecast(city: str, days: int = ...): Forecast",
        "weather.fail(reason: str = ...)",
        "calc.add(a: float, b: float): Add",
        "calc.mul(a: int, b: int = 1) -> int: Multiply",
        "calc.hang()",
        "{\"result\": X} wrapper its outputSchema declares is unwrapped to X",
    ] {
        assert!(desc.contains(t), "{t} missing from: {desc}");
    }
    assert!(desc.contains("Forecast for a city."), "{desc}");
    assert_eq!(tools[0].input_schema["required"], json!(["code"]));
    assert!(
        !desc.contains("Unavailable"),
        "nothing is refused under this policy: {desc}"
    );
}

#[tokio::test]
async fn run_python_and_exec_return_output_and_status() {
    let a = start(POLICY, &[]).await;
    let r = a
        .call(
            "run_python",
            json!({"code": "print(6 * 7)\nopen('out.txt', 'w').write('made inside')",
                   "outputs": ["out.txt", "missing.txt"]}),
        )
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    let s = r.structured_content.clone().unwrap();
    assert_eq!(s["status"], "completed");
    assert_eq!(s["stdout"], "42\n");
    assert!(text(&r).contains("status: completed"));
    assert_eq!(
        s["outputs"][0],
        json!({"path": "out.txt", "mime_type": "text/plain", "content": "text", "bytes": 11})
    );
    assert_eq!(
        s["outputs"][1]["error"], "the program did not create it",
        "{s}"
    );
    // The output is attached once: one text resource, nowhere else.
    let embedded: Vec<_> = r
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Resource(res) => Some(serde_json::to_value(&res.resource).unwrap()),
            _ => None,
        })
        .collect();
    assert_eq!(
        embedded,
        vec![
            json!({"uri": "airlock://work/out.txt", "mimeType": "text/plain", "text": "made inside"})
        ]
    );
    assert_eq!(r.content.len(), 2, "{:?}", r.content);
    assert!(!s.to_string().contains("made inside"), "{s}");
    assert!(!text(&r).contains("made inside"), "{}", text(&r));

    // run_python has no tools: an upstream name is an unknown tool there.
    let r = a
        .call(
            "run_python",
            json!({"code": "try:\n    call_tool('calc.add', {'a': 1, 'b': 2})\nexcept ToolError as e:\n    print(e.code)"}),
        )
        .await;
    assert_eq!(r.structured_content.unwrap()["stdout"], "-32013\n");

    let r = a
        .call("exec", json!({"argv": ["echo", "hi", "there"]}))
        .await;
    assert_eq!(
        r.structured_content.clone().unwrap()["stdout"],
        "hi there\n"
    );

    let r = a
        .call(
            "run_python",
            json!({"code": "import sys; print('bye'); sys.exit(3)"}),
        )
        .await;
    assert_eq!(r.is_error, Some(true));
    let s = r.structured_content.unwrap();
    assert_eq!(s["status"], "error");
    assert_eq!(s["exit_code"], 3);

    let r = a.call("run_python", json!({"code": 5})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("`code` must be a string"), "{}", text(&r));
}

#[tokio::test]
async fn a_program_calls_two_upstream_tools_and_combines_the_results() {
    let a = start(POLICY, &[]).await;
    let code = r#"
import json, os
import airlock_tools
paris = airlock_tools.weather.forecast(city="Paris")
oslo = call_tool("weather.forecast", {"city": "Oslo", "days": 2})
total = airlock_tools.calc.add(a=paris["temp_c"], b=oslo["temp_c"])
who = airlock_tools.weather.whoami()
print(json.dumps({
    "paris": paris, "oslo": oslo, "sum": total,
    "upstream_has_token": who["has_token"],
    "sandbox_has_token": "SECRET_TOKEN" in os.environ,
    "doc": airlock_tools.weather.forecast.__doc__,
    "tools": airlock_tools.TOOLS,
}))
"#;
    let (r, s) = a.execute(code).await;
    assert_eq!(r.is_error, Some(false), "{s}");
    let got = stdout_json(&s);
    assert_eq!(
        got["paris"],
        json!({"city": "Paris", "temp_c": 18, "days": 1})
    );
    assert_eq!(got["oslo"], json!({"city": "Oslo", "temp_c": 4, "days": 2}));
    assert_eq!(got["sum"], 22);
    assert_eq!(got["upstream_has_token"], true);
    assert_eq!(got["sandbox_has_token"], false);
    let doc = got["doc"].as_str().unwrap();
    assert!(doc.starts_with("Forecast for a city."), "{doc}");
    assert!(
        doc.contains("city (string)") && doc.contains("days (integer, optional)"),
        "{doc}"
    );
    assert_eq!(
        got["tools"],
        json!([
            "calc.add",
            "calc.hang",
            "calc.mul",
            "weather.big",
            "weather.fail",
            "weather.forecast",
            "weather.whoami"
        ])
    );
    assert_eq!(s["tool_calls"], 4);
}

#[tokio::test]
async fn upstream_errors_and_refusals_surface_as_structured_tool_errors() {
    let a = start(POLICY, &[]).await;
    let code = r#"
import json
out = []
def attempt(name, args):
    try:
        call_tool(name, args)
        out.append({"name": name, "ok": True})
    except ToolError as e:
        out.append({"name": name, "code": e.code, "message": e.message, "data": e.data})
attempt("weather.fail", {"reason": "no such city"})
attempt("weather.forecast", {"city": "Paris", "days": 99})
attempt("weather.forecast", {"town": "Paris"})
attempt("weather.nope", {})
attempt("secrets.read", {})
attempt("weather.forecast", [1, 2])
attempt("weather.big", {"n": 400000})
attempt("weather.big", {"n": 1000})
print(json.dumps(out))
"#;
    let (_, s) = a.execute(code).await;
    assert_eq!(s["status"], "completed", "{s}");
    let got = stdout_json(&s);
    let fail = &got[0];
    assert_eq!(fail["code"], -32001);
    assert_eq!(fail["data"]["code"], "tool_failed");
    assert_eq!(fail["data"]["retryable"], false);
    assert_eq!(
        fail["data"]["reason"],
        "upstream error: weather.fail: upstream refused: no such city"
    );
    for i in [1, 2, 5] {
        assert_eq!(got[i]["code"], -32602, "{}", got[i]);
        assert_eq!(got[i]["data"]["code"], "invalid_arguments", "{}", got[i]);
    }
    assert!(
        got[1]["message"].as_str().unwrap().contains("maximum of 7"),
        "{}",
        got[1]
    );
    assert!(
        got[2]["message"].as_str().unwrap().contains("city"),
        "{}",
        got[2]
    );
    assert_eq!(got[6]["code"], -32014, "{}", got[6]);
    assert_eq!(got[6]["data"]["code"], "response_too_large", "{}", got[6]);
    assert_eq!(got[7]["ok"], true, "{}", got[7]);
    for i in [3, 4] {
        assert_eq!(got[i]["code"], -32013, "{}", got[i]);
        assert_eq!(got[i]["data"]["code"], "unknown_tool");
    }
}

#[tokio::test]
async fn the_call_cap_from_the_policy_is_enforced_and_counts_refusals() {
    let a = start(
        "floor = \"os_process\"\n[limits]\ntimeout_seconds = 20\nmax_tool_calls = 3\n",
        &[],
    )
    .await;
    let code = r#"
import json
codes = []
for i in range(5):
    try:
        call_tool("calc.add", {"a": i, "b": 1})
        codes.append("ok")
    except ToolError as e:
        codes.append(e.code)
print(json.dumps(codes))
"#;
    let (_, s) = a.execute(code).await;
    assert_eq!(
        stdout_json(&s),
        json!(["ok", "ok", "ok", -32009, -32009]),
        "{s}"
    );
    assert_eq!(s["tool_calls"], 5);

    // A refused call counts too: two unknown names and one bad call use the whole budget.
    let code = r#"
codes = []
for name in ["nope.a", "nope.b", "calc.add", "calc.add"]:
    try:
        call_tool(name, {"a": 1, "b": 2})
        codes.append("ok")
    except ToolError as e:
        codes.append(e.code)
print(codes)
"#;
    let (_, s) = a.execute(code).await;
    assert_eq!(s["stdout"], "[-32013, -32013, 'ok', -32009]\n", "{s}");
}

#[tokio::test]
async fn a_hanging_upstream_is_bounded_by_the_call_timeout() {
    let a = start(POLICY, &["--upstream-timeout", "1"]).await;
    let code = r#"
import json, time
t = time.monotonic()
try:
    call_tool("calc.hang", {})
    res = "answered"
except ToolError as e:
    res = {"code": e.code, "data": e.data}
print(json.dumps({"res": res, "elapsed": time.monotonic() - t}))
"#;
    let started = Instant::now();
    let (_, s) = a.execute(code).await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let got = stdout_json(&s);
    assert_eq!(got["res"]["code"], -32001, "{got}");
    assert_eq!(got["res"]["data"]["code"], "tool_failed");
    let reason = got["res"]["data"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("upstream timeout: calc.hang"),
        "{reason}"
    );
    assert_eq!(got["res"]["data"]["retryable"], true);
    let elapsed = got["elapsed"].as_f64().unwrap();
    assert!((0.9..5.0).contains(&elapsed), "{elapsed}");
    // The other upstream still answers after one hung.
    let (_, s) = a
        .execute("print(call_tool('weather.forecast', {'city': 'Oslo'})['temp_c'])")
        .await;
    assert_eq!(s["stdout"], "4\n", "{s}");
}

#[tokio::test]
async fn upstreams_can_come_from_a_config_file_and_names_must_be_unique() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.toml");
    let script = upstream_script().display().to_string();
    std::fs::write(
        &config,
        format!("[upstreams]\nmaths = [\"python3\", {script:?}, \"calc\"]\n"),
    )
    .unwrap();
    let a = start_with(POLICY, &["--config".into(), config.display().to_string()]).await;
    let (_, s) = a
        .execute("print(call_tool('maths.add', {'a': 2, 'b': 3}))")
        .await;
    assert_eq!(s["stdout"], "5\n", "{s}");

    let out = tokio::process::Command::new(AIRLOCK)
        .arg("mcp")
        .arg("--config")
        .arg(&config)
        .arg("--upstream")
        .arg(format!("maths=python3 '{script}' weather"))
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("used twice"), "{err}");
}

#[tokio::test]
async fn tracebacks_show_the_program_and_none_of_the_bootstrap() {
    let a = start(POLICY, &[]).await;
    let code = "def ratio(x):\n    return 10 / x\n\nprint(ratio(0))\n";
    let r = a.call("run_python", json!({ "code": code })).await;
    let s = r.structured_content.clone().unwrap();
    let err = s["stderr"].as_str().unwrap();
    assert!(
        err.starts_with("Traceback (most recent call last):\n  File \"<cell 1>\", line 4, in <module>\n    print(ratio(0))\n"),
        "{err}"
    );
    assert!(
        err.contains("  File \"<cell 1>\", line 2, in ratio\n    return 10 / x\n"),
        "{err}"
    );
    assert!(
        err.ends_with("ZeroDivisionError: division by zero\n"),
        "{err}"
    );
    assert_eq!(err.matches("  File ").count(), 2, "{err}");

    // A failed tool call: the bootstrap's call_tool frame is left out too, chained causes kept.
    let code = "try:\n    call_tool('weather.fail', {'reason': 'nope'})\n\
                except ToolError as e:\n    raise RuntimeError('wrapped') from e\n";
    let (_, s) = a.execute(code).await;
    let err = s["stderr"].as_str().unwrap();
    for want in [
        "    call_tool('weather.fail', {'reason': 'nope'})",
        "ToolError: upstream error: weather.fail: upstream refused: nope (code -32001)",
        "The above exception was the direct cause of the following exception:",
        "    raise RuntimeError('wrapped') from e",
        "RuntimeError: wrapped",
    ] {
        assert!(err.contains(want), "{want:?} missing from:\n{err}");
    }
    for unwanted in [
        "airlock-bootstrap",
        "<string>",
        "in _run",
        "in main",
        "in call_tool",
    ] {
        assert!(!err.contains(unwanted), "{unwanted:?} in:\n{err}");
    }

    let r = a
        .call("run_python", json!({"code": "x = (1,\nprint(x)"}))
        .await;
    let err = r.structured_content.unwrap()["stderr"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(err.starts_with("  File \"<cell 3>\", line 1\n"), "{err}");
    assert!(err.contains("SyntaxError"), "{err}");
}

#[tokio::test]
async fn a_conversation_keeps_its_python_state_and_figures_come_back_as_images() {
    let a = start(POLICY, &[]).await;
    let r = a
        .call(
            "run_python",
            json!({"code": "import math\nr = 2\nround(math.pi * r * r, 2)"}),
        )
        .await;
    let s = r.structured_content.clone().unwrap();
    assert_eq!(s["value"], json!({"repr": "12.57", "json": 12.57}), "{s}");
    let words = text(&r);
    assert!(words.contains("--- value ---\n12.57\n"), "{words}");
    let code = "import matplotlib.pyplot as plt\nplt.plot([r, r * 2])\nprint('plotted')";
    let r = a.call("run_python", json!({ "code": code })).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let images: Vec<_> = r.content.iter().filter_map(|c| c.as_image()).collect();
    assert_eq!(images.len(), 1, "{:?}", r.content);
    assert_eq!(images[0].mime_type, "image/png");
    let png = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &images[0].data)
        .unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{}", png.len());
    let words = text(&r);
    assert!(
        words.contains(
            "1 rich output(s) attached (images as image content, HTML and SVG as resources)"
        ),
        "{words}"
    );
}

#[tokio::test]
async fn timeout_s_bounds_a_call_and_env_reaches_exec() {
    let a = start(POLICY, &[]).await;
    let started = Instant::now();
    let r = a
        .call(
            "run_python",
            json!({"code": "while True: pass", "timeout_s": 1.5}),
        )
        .await;
    let s = r.structured_content.clone().unwrap();
    assert_eq!(s["status"], "timeout", "{s}");
    // 124 as everywhere else (the CLI's exit status, the wire, the SDK), whatever the killed
    // interpreter exited with.
    assert_eq!(s["exit_code"], 124, "{s}");
    assert!(
        text(&r).starts_with("status: timeout, exit_code: 124"),
        "{}",
        text(&r)
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    let r = a
        .call(
            "exec",
            json!({"argv": ["/bin/sleep", "30"], "timeout_s": 1}),
        )
        .await;
    let e = r.structured_content.clone().unwrap();
    assert_eq!(
        (&e["status"], &e["exit_code"]),
        (&json!("timeout"), &json!(124)),
        "{e}"
    );
    let wall = s["wall_time_ms"].as_f64().unwrap();
    assert!((1400.0..5000.0).contains(&wall), "{wall}");
    for bad in [json!(0), json!(21), json!("1")] {
        let r = a
            .call("run_python", json!({"code": "pass", "timeout_s": bad}))
            .await;
        assert!(
            text(&r).contains("`timeout_s` must be"),
            "{bad}: {}",
            text(&r)
        );
    }
    let r = a
        .call(
            "exec",
            json!({"argv": ["/usr/bin/env"], "env": {"OPENSSL_CONF": "/dev/null", "LANG": "C"},
                   "timeout_s": 5}),
        )
        .await;
    assert_eq!(
        r.structured_content.unwrap()["stdout"],
        "LANG=C\nOPENSSL_CONF=/dev/null\n"
    );
    let r = a
        .call("exec", json!({"argv": ["env"], "env": {"A=B": "x"}}))
        .await;
    assert!(text(&r).contains("env name"), "{}", text(&r));
}

#[tokio::test]
async fn help_works_and_a_wrapped_scalar_result_is_unwrapped() {
    let a = start(POLICY, &[]).await;
    let code = "import airlock_tools\n\
                help(airlock_tools.weather.forecast)\n\
                print('product', airlock_tools.calc.mul(a=6, b=7), call_tool('calc.mul', {'a': 5}))\n";
    let (_, s) = a.execute(code).await;
    assert_eq!(s["status"], "completed", "{s}");
    let out = s["stdout"].as_str().unwrap();
    for want in [
        "_weather__forecast(*, city: 'str', days: 'int' = ...)",
        "Forecast for a city.",
        "days (integer, optional)",
        "product 42 5",
    ] {
        assert!(out.contains(want), "{want:?} missing from:\n{out}");
    }
}

/// A call-scoped sandbox whose lease is dropped unreleased (its call panicked, or its task was
/// dropped half-way) is still disposed, not held until the session ends.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_sandbox_whose_lease_is_dropped_unreleased_is_disposed() {
    let policy: airlock_policy::Policy = POLICY.parse().unwrap();
    let mut config = airlock_mcp::McpConfig::new(AIRLOCK.into(), Some(&policy));
    config.scope = airlock_policy::IsolationScope::Call;
    let sandboxes = airlock_mcp::sandboxes::Sandboxes::new(&config).unwrap();
    let lease = sandboxes.lease().await.unwrap();
    assert_eq!(sandboxes.live(), 1);
    drop(lease);
    let deadline = Instant::now() + Duration::from_secs(10);
    while sandboxes.live() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        sandboxes.live(),
        0,
        "the dropped lease's sandbox is still held"
    );
}
