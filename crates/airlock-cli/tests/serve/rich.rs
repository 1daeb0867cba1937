//! Rich results (docs/protocol.md, "Rich output" and "Errors a program raised"): displayed
//! objects and a cell's value as Jupyter MIME bundles, the `IPython.display` stand-in, a
//! structured error for every raised exception (stateless and stateful), only true labels,
//! and matplotlib's files kept out of /work. Every test runs the server as root and as
//! `airlock-test`.
use serde_json::{json, Value};

use super::support::*;

const IDENTITIES: [Option<&str>; 2] = [None, Some("airlock-test")];

async fn open(who: Option<&str>) -> (WsServer, WsClient, String) {
    let server = WsServer::start_as(who, &[]);
    let mut c = server.connect().await;
    let spec = json!({"stateful": true, "limits": {"timeout_s": 30}});
    let r = c.call("sandbox.create", json!({ "spec": spec })).await;
    let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_string();
    (server, c, sid)
}

async fn cell(c: &mut WsClient, sid: &str, code: &str) -> Value {
    let r = c
        .call("sandbox.run_code", json!({"sandbox_id": sid, "code": code}))
        .await;
    result_of(&r).clone()
}

/// Every representation of a display item or value: media type → decoded text.
fn reps(item: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = item["bundle"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&unb64(v)).into_owned()))
                .collect()
        })
        .unwrap_or_default();
    if let Some(mime) = item["mime"].as_str() {
        out.insert(
            0,
            (
                mime.to_owned(),
                String::from_utf8_lossy(&unb64(&item["data"])).into_owned(),
            ),
        );
    }
    out
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

/// What IPython's formatter would make of objects with `_repr_*_` methods, a mimebundle, and
/// the stand-in's classes (real IPython hidden, as in a sandbox without it).
const NOTEBOOK: &str = r#"import sys
sys.path[:] = [p for p in sys.path if 'site-packages' not in p and 'dist-packages' not in p]
from IPython.display import display, HTML, Markdown, JSON, SVG, Latex, Image
import IPython
assert IPython.__airlock_shim__ and IPython.display.display is display
class Both:
    def _repr_html_(self): return '<b>both</b>'
    def _repr_markdown_(self): return '**both**'
    def __repr__(self): return 'Both()'
class Bundle:
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {'text/latex': '$x^2$', 'application/vnd.custom': 'dropped'}
    def __repr__(self): return 'Bundle()'
display(HTML('<i>h</i>'), Markdown('# m'), JSON({'k': [1]}), SVG('<svg/>'), Latex('$y$'), Both(), Bundle())
class Frame:
    def _repr_html_(self): return '<table><tr><td>1</td></tr></table>'
    def __repr__(self): return '   a\n0  1'
Frame()"#;

#[tokio::test(flavor = "multi_thread")]
async fn displayed_objects_and_values_are_mime_bundles_and_ipython_display_works_without_ipython() {
    for who in IDENTITIES {
        let (_server, mut c, sid) = open(who).await;
        let r = cell(&mut c, &sid, NOTEBOOK).await;
        assert_eq!(r["status"], "completed", "{who:?} {r}");
        let items: Vec<_> = r["display"].as_array().unwrap().iter().map(reps).collect();
        let shim = |class: &str| format!("<IPython.core.display.{class} object>");
        assert_eq!(
            items,
            vec![
                pairs(&[("text/html", "<i>h</i>"), ("text/plain", &shim("HTML"))]),
                pairs(&[("text/markdown", "# m"), ("text/plain", &shim("Markdown"))]),
                pairs(&[
                    ("application/json", "{\"k\":[1]}"),
                    ("text/plain", &shim("JSON"))
                ]),
                pairs(&[("image/svg+xml", "<svg/>"), ("text/plain", &shim("SVG"))]),
                pairs(&[("text/latex", "$y$"), ("text/plain", &shim("Latex"))]),
                pairs(&[
                    ("text/html", "<b>both</b>"),
                    ("text/markdown", "**both**"),
                    ("text/plain", "Both()")
                ]),
                pairs(&[("text/latex", "$x^2$"), ("text/plain", "Bundle()")]),
            ],
            "{who:?} {r}"
        );
        assert_eq!(r["value"]["repr"], "   a\n0  1", "{r}");
        assert_eq!(
            r["value"]["bundle"],
            json!({"text/html": b64(b"<table><tr><td>1</td></tr></table>")}),
            "{r}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dataframe_value_carries_html() {
    for who in IDENTITIES {
        let (_server, mut c, sid) = open(who).await;
        let r = cell(
            &mut c,
            &sid,
            "import importlib.util\nimportlib.util.find_spec('pandas') is not None",
        )
        .await;
        if r["value"]["json"] != true {
            assert!(
                std::env::var_os("AIRLOCK_REQUIRE_PANDAS").is_none(),
                "pandas is missing"
            );
            eprintln!("skipped for {who:?}: pandas is not installed for the sandbox's Python");
            continue;
        }
        let r = cell(
            &mut c,
            &sid,
            "import pandas as pd\npd.DataFrame({'a': [1, 2]}).describe()",
        )
        .await;
        let html = String::from_utf8(unb64(&r["value"]["bundle"]["text/html"])).unwrap();
        assert!(
            html.contains("<table") && html.contains("mean"),
            "{who:?} {r}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_ipythons_display_shows_through_the_kernel() {
    for who in IDENTITIES {
        let (_server, mut c, sid) = open(who).await;
        let r = cell(
            &mut c,
            &sid,
            // Past airlock's own finder: whether a real IPython is installed.
            "import importlib.machinery as m\nm.PathFinder.find_spec('IPython') is not None",
        )
        .await;
        if r["value"]["json"] != true {
            eprintln!("skipped for {who:?}: IPython is not installed for the sandbox's Python");
            continue;
        }
        let code = "from IPython.display import display, HTML\nimport IPython\n\
                    assert not hasattr(IPython, '__airlock_shim__')\ndisplay(HTML('<u>real</u>'))";
        let r = cell(&mut c, &sid, code).await;
        assert_eq!(r["status"], "completed", "{who:?} {r}");
        assert_eq!(
            reps(&r["display"][0])[0],
            pairs(&[("text/html", "<u>real</u>")])[0],
            "{r}"
        );
    }
}

fn traceback(e: &Value) -> String {
    e["traceback"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_raised_exception_is_name_value_and_traceback_stateless_and_stateful() {
    let code = "def ratio(x):\n    return 10 / x\nratio(0)";
    for who in IDENTITIES {
        let (_server, mut c, sid) = open(who).await;
        let stateful = cell(&mut c, &sid, code).await;
        let r = c.call("execute", json!({ "code": code })).await;
        let stateless = result_of(&r).clone();
        let r = c.call("sandbox.create", json!({"spec": {}})).await;
        let plain = result_of(&r)["sandbox_id"].as_str().unwrap().to_string();
        let kept = cell(&mut c, &plain, code).await;
        for r in [&stateful, &stateless, &kept] {
            assert_eq!(r["status"], "error", "{who:?} {r}");
            let e = &r["error"];
            assert_eq!(e["code"], -32015, "{r}");
            assert_eq!(e["message"], "ZeroDivisionError: division by zero", "{r}");
            assert_eq!(
                (&e["name"], &e["value"]),
                (&json!("ZeroDivisionError"), &json!("division by zero")),
                "{r}"
            );
            // The traceback's lines are what stderr shows.
            assert_eq!(traceback(e), r["stderr"].as_str().unwrap(), "{r}");
            assert!(traceback(e).contains("return 10 / x"), "{r}");
        }
        // An exit is not an exception; a clean cell has no error.
        let r = cell(&mut c, &sid, "raise SystemExit(3)").await;
        assert_eq!(r["exit_code"], 3, "{r}");
        assert!(r["error"].get("name").is_none(), "{r}");
        assert!(cell(&mut c, &sid, "1").await["error"].is_null());
    }
}

/// The red team's one-liner: a chained cause never raised prints a first line of 80 KB of
/// 4-byte characters with no "Traceback" header. Every run still gets its one result, within
/// the traceback's 64 KiB byte cap, stateless and stateful, and the kernel goes on.
#[tokio::test(flavor = "multi_thread")]
async fn a_traceback_line_of_wide_characters_is_cut_and_answered() {
    let code = "raise RuntimeError('x') from ValueError('\\U0001F600' * 20000)";
    for who in IDENTITIES {
        let (_server, mut c, sid) = open(who).await;
        let stateful = cell(&mut c, &sid, code).await;
        let r = c.call("execute", json!({ "code": code })).await;
        let stateless = result_of(&r).clone();
        for r in [&stateful, &stateless] {
            assert_eq!(r["status"], "error", "{who:?}");
            let e = &r["error"];
            assert_eq!(e["name"], "RuntimeError", "{who:?}");
            assert!(
                traceback(e).len() <= 64 * 1024 + 64,
                "{who:?}: {}",
                traceback(e).len()
            );
            assert!(traceback(e).starts_with("ValueError: \u{1F600}"), "{who:?}");
            assert!(traceback(e).ends_with("RuntimeError: x\n"), "{who:?}");
        }
        assert_eq!(cell(&mut c, &sid, "6 * 7").await["value"]["json"], 42);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fake_png_is_not_labelled_image_png_and_the_kernel_lives_on() {
    let fake = "b'\\x89PNG\\r\\n\\x1a\\n<html><script>alert(1)</script></html>'";
    let forge = format!(
        "import binascii\nsend = call_tool.__globals__['_send']\n\
         send({{'jsonrpc': '2.0', 'method': 'display', 'params': {{'mime': 'image/png', \
         'data': binascii.b2a_base64({fake}, newline=False).decode()}}}})"
    );
    let via_repr = format!(
        "class Fake:\n    def _repr_png_(self):\n        return {fake}\ndisplay(Fake())\nFake()"
    );
    for who in IDENTITIES {
        let (_server, mut c, sid) = open(who).await;
        cell(&mut c, &sid, "x = 5").await;
        let r = cell(&mut c, &sid, &forge).await;
        assert_eq!(r["status"], "completed", "{who:?} {r}");
        assert!(r.get("display").is_none(), "{r}");
        assert_eq!(r["display_dropped"], 1, "{r}");
        let r = cell(&mut c, &sid, &via_repr).await;
        assert_eq!(r["display"][0]["mime"], "text/plain", "{r}");
        assert!(r["display"][0].get("bundle").is_none(), "{r}");
        assert!(r["value"].get("bundle").is_none(), "{r}");
        assert!(!r.to_string().contains("image/png"), "{r}");
        // The state is intact: nothing broke the kernel.
        assert_eq!(cell(&mut c, &sid, "x").await["value"]["json"], 5);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn matplotlib_leaves_nothing_in_work() {
    for who in IDENTITIES {
        let (_server, mut c, sid) = open(who).await;
        let r = cell(&mut c, &sid, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nimport matplotlib\nmatplotlib.get_cachedir()").await;
        assert_eq!(r["status"], "completed", "{who:?} {r}");
        assert_eq!(r["display"][0]["mime"], "image/png", "{r}");
        assert_eq!(r["value"]["json"], "/tmp/matplotlib", "{r}");
        let r = c.call("sandbox.create", json!({"spec": {}})).await;
        let plain = result_of(&r)["sandbox_id"].as_str().unwrap().to_string();
        let code = "import matplotlib.pyplot as plt\nplt.plot([1])\nplt.savefig('/tmp/x.png')";
        assert_eq!(cell(&mut c, &plain, code).await["status"], "completed");
        for id in [&sid, &plain] {
            let r = c.call("files.list", json!({ "sandbox_id": id })).await;
            assert_eq!(result_of(&r)["entries"], json!([]), "{who:?} {r}");
        }
    }
}
