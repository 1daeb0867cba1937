//! Rich output through `airlock mcp` (docs/mcp.md): HTML and SVG come back as embedded resources
//! with their media type, images as image content; a file or display item that starts with
//! the PNG signature and goes on as HTML is never labelled `image/png`; a raised exception's
//! name, value and traceback are in the structured content.
use rmcp::model::{ContentBlock, ResourceContents};
use serde_json::Value;

use super::session::POLICY;
use super::{start, text};

/// The PNG signature, then a script: what a browser that trusts the label would not run.
const FAKE_PNG: &str = "b'\\x89PNG\\r\\n\\x1a\\n<html><script>alert(1)</script></html>'";

fn resources(content: &[ContentBlock]) -> Vec<(String, String, String)> {
    content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Resource(r) => match &r.resource {
                ResourceContents::TextResourceContents {
                    uri,
                    mime_type,
                    text,
                    ..
                } => Some((
                    uri.clone(),
                    mime_type.clone().unwrap_or_default(),
                    text.clone(),
                )),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn images(content: &[ContentBlock]) -> Vec<String> {
    content
        .iter()
        .filter_map(|b| b.as_image().map(|i| i.mime_type.clone()))
        .collect()
}

#[tokio::test]
async fn html_and_svg_come_back_as_resources_with_their_media_type() {
    let a = start(POLICY, &[]).await;
    let code = "class Table:\n    def _repr_html_(self):\n        return '<table><tr><td>1</td></tr></table>'\n\
                class Icon:\n    def _repr_svg_(self):\n        return '<svg xmlns=\"http://www.w3.org/2000/svg\"/>'\n\
                display(Icon())\nTable()";
    let r = a
        .call("run_python", serde_json::json!({ "code": code }))
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    let got = resources(&r.content);
    assert_eq!(
        got,
        vec![
            (
                "airlock://value".to_owned(),
                "text/html".to_owned(),
                "<table><tr><td>1</td></tr></table>".to_owned()
            ),
            (
                "airlock://display/0".to_owned(),
                "image/svg+xml".to_owned(),
                "<svg xmlns=\"http://www.w3.org/2000/svg\"/>".to_owned()
            ),
        ],
        "{:?}",
        r.content
    );
    assert!(images(&r.content).is_empty(), "{:?}", r.content);
    assert!(
        text(&r).contains("2 rich output(s) attached"),
        "{}",
        text(&r)
    );
}

#[tokio::test]
async fn a_png_signature_followed_by_html_is_not_labelled_image_png() {
    let a = start(POLICY, &[]).await;
    let code = format!(
        "open('x.png', 'wb').write({FAKE_PNG})\n\
         class Fake:\n    def _repr_png_(self):\n        return {FAKE_PNG}\n\
         display(Fake())"
    );
    let r = a
        .call(
            "run_python",
            serde_json::json!({"code": code, "outputs": ["x.png"]}),
        )
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert!(images(&r.content).is_empty(), "{:?}", r.content);
    let s = r.structured_content.clone().unwrap();
    assert_ne!(s["outputs"][0]["mime_type"], "image/png", "{s}");
    // The display item kept only what it is: its text.
    assert_eq!(s["display"][0]["mime"], "text/plain", "{s}");
    assert!(s["display"][0].get("bundle").is_none(), "{s}");
    let r = a
        .call("read_file", serde_json::json!({"path": "x.png"}))
        .await;
    assert!(images(&r.content).is_empty(), "{:?}", r.content);
    let s: Value = r.structured_content.unwrap();
    assert_eq!(s["mime_type"], "application/octet-stream", "{s}");
}

#[tokio::test]
async fn a_raised_exception_is_structured() {
    let a = start(POLICY, &[]).await;
    let code = "def f():\n    raise KeyError('k')\nf()";
    let r = a
        .call("run_python", serde_json::json!({ "code": code }))
        .await;
    assert_eq!(r.is_error, Some(true));
    let e = &r.structured_content.unwrap()["error"];
    assert_eq!(
        (&e["name"], &e["value"]),
        (&Value::from("KeyError"), &Value::from("'k'"))
    );
    let tb: Vec<&str> = e["traceback"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(
        tb.first(),
        Some(&"Traceback (most recent call last):\n"),
        "{e}"
    );
    assert_eq!(tb.last(), Some(&"KeyError: 'k'\n"), "{e}");
    assert!(tb.iter().any(|l| l.contains("raise KeyError('k')")), "{e}");
}
