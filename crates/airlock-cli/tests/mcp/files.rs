//! The session's sandbox: files persist across the calls of one MCP session and not across
//! sessions; `--scope call` gives every call a fresh one; outputs come back once, in the
//! right form, with exact bytes.
use base64::Engine;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::{json, Value};

use super::session::POLICY;
use super::{start, text};

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn unb64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

fn structured(r: &CallToolResult) -> Value {
    r.structured_content.clone().expect("structured content")
}

/// A small valid PNG (1x1, one red pixel), built by hand: signature, IHDR, IDAT, IEND.
fn png() -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
        out.extend_from_slice(&u32::try_from(data.len()).unwrap().to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
    }
    fn crc32(data: &[u8]) -> u32 {
        let mut crc = 0xffff_ffffu32;
        for b in data {
            crc ^= u32::from(*b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &[0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0, 0, 0]);
    // zlib stream, stored block: filter byte 0, then R G B.
    let raw = [0u8, 0xff, 0, 0];
    let mut z = vec![0x78, 0x01, 0x01, 0x04, 0x00, 0xfb, 0xff];
    z.extend_from_slice(&raw);
    let (mut a, mut b) = (1u32, 0u32);
    for x in raw {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    z.extend_from_slice(&((b << 16) | a).to_be_bytes());
    chunk(&mut out, b"IDAT", &z);
    chunk(&mut out, b"IEND", &[]);
    out
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn files_persist_across_calls_of_a_session_and_not_across_sessions() {
    let a = start(POLICY, &[]).await;
    let r = a
        .call(
            "write_file",
            json!({"path": "notes/plan.txt", "content": "step one\n"}),
        )
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    let bin: Vec<u8> = (0..=255u8).collect();
    let r = a
        .call(
            "write_file",
            json!({"path": "data.bin", "content": b64(&bin), "encoding": "base64"}),
        )
        .await;
    assert_eq!(structured(&r)["bytes"], 256, "{}", text(&r));
    let code = "import hashlib\n\
                print(open('notes/plan.txt').read().strip())\n\
                print(hashlib.sha256(open('data.bin', 'rb').read()).hexdigest())\n\
                open('made.txt', 'w').write('from a run')\n\
                n = int(open('counter').read()) if __import__('os').path.exists('counter') else 0\n\
                open('counter', 'w').write(str(n + 1))\n";
    let r = a.call("run_python", json!({ "code": code })).await;
    let s = structured(&r);
    let want_sha = "40aff2e9d2d8922e47afd4648e6967497158785fbd1da870e7110266bf944880";
    assert_eq!(s["stdout"], format!("step one\n{want_sha}\n"), "{s}");
    assert_eq!(s["scope"], "conversation");
    let r = a.call("run_python", json!({ "code": code })).await;
    assert_eq!(structured(&r)["status"], "completed");
    // A command sees the same /work.
    let r = a
        .call("exec", json!({"argv": ["cat", "made.txt", "counter"]}))
        .await;
    assert_eq!(structured(&r)["stdout"], "from a run2", "{}", text(&r));

    let r = a.call("list_files", json!({})).await;
    let entries = structured(&r)["entries"].clone();
    let names: Vec<&str> = entries
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["counter", "data.bin", "made.txt", "notes"],
        "{}",
        text(&r)
    );
    assert_eq!(entries[3]["type"], "dir");
    assert_eq!(entries[1]["size"], 256);
    let r = a.call("list_files", json!({"path": "notes"})).await;
    assert!(text(&r).contains("plan.txt  9 bytes"), "{}", text(&r));

    let r = a.call("read_file", json!({"path": "made.txt"})).await;
    assert_eq!(text(&r), "from a run");
    let r = a.call("read_file", json!({"path": "/work/data.bin"})).await;
    let blob = r.content.iter().find_map(|b| match b {
        ContentBlock::Resource(res) => match &res.resource {
            ResourceContents::BlobResourceContents {
                blob, mime_type, ..
            } => Some((unb64(blob), mime_type.clone())),
            _ => None,
        },
        _ => None,
    });
    assert_eq!(
        blob,
        Some((bin.clone(), Some("application/octet-stream".into())))
    );
    let r = a
        .call("read_file", json!({"path": "data.bin", "max_bytes": 10}))
        .await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("above the 10 byte cap"), "{}", text(&r));
    for bad in [
        json!({"path": "../etc/passwd"}),
        json!({"path": "/etc/passwd"}),
        json!({"path": "x", "extra": 1}),
    ] {
        let r = a.call("read_file", bad.clone()).await;
        assert_eq!(r.is_error, Some(true), "{bad}");
        assert_eq!(structured(&r)["status"], "refused", "{bad}");
    }
    // A link the program made is never followed by the file tools.
    a.call(
        "run_python",
        json!({"code": "import os; os.symlink('/etc/hostname', 'link')"}),
    )
    .await;
    let r = a.call("read_file", json!({"path": "link"})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("symlink"), "{}", text(&r));

    // Another session starts from an empty /work.
    let b = start(POLICY, &[]).await;
    let r = b
        .call(
            "run_python",
            json!({"code": "import os; print(sorted(os.listdir('.')))"}),
        )
        .await;
    assert_eq!(structured(&r)["stdout"], "[]\n", "{}", text(&r));
    let r = b.call("read_file", json!({"path": "made.txt"})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("no such file"), "{}", text(&r));
}

#[tokio::test]
async fn call_scope_gives_every_call_a_fresh_sandbox_and_no_file_tools() {
    let a = start(POLICY, &["--scope", "call"]).await;
    let tools = a.client.peer().list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["execute", "run_python", "exec"]);
    assert!(tools[1].description.as_deref().unwrap().contains("fresh"));
    let code = "import os\nprint(os.path.exists('x'))\nopen('x', 'w').write('1')";
    for _ in 0..2 {
        let r = a.call("run_python", json!({ "code": code })).await;
        let s = structured(&r);
        assert_eq!(s["stdout"], "False\n", "{s}");
        assert_eq!(s["scope"], "call");
        // `airlock mcp` forks a (not stateful) run from its zygote by default.
        assert_eq!(s["via"], "zygote", "{s}");
    }
    let mut params = rmcp::model::CallToolRequestParams::new("write_file");
    params.arguments = json!({"path": "a", "content": "b"}).as_object().cloned();
    let err = a.client.peer().call_tool(params).await.unwrap_err();
    assert!(err.to_string().contains("--scope call"), "{err}");
}

#[tokio::test]
async fn a_png_comes_back_once_as_image_content_with_its_exact_bytes() {
    let a = start(POLICY, &[]).await;
    let png = png();
    let pdf = b"%PDF-1.4\n\xe2\xe3\xcf\xd3\n".to_vec();
    let raw: Vec<u8> = vec![0, 159, 146, 150, 255, 1];
    let code = format!(
        "open('plot.png', 'wb').write(bytes.fromhex('{}'))\n\
         open('doc.pdf', 'wb').write(bytes.fromhex('{}'))\n\
         open('raw.bin', 'wb').write(bytes.fromhex('{}'))\n\
         open('fake.png', 'w').write('not an image')\n\
         print('drew it')",
        hex(&png),
        hex(&pdf),
        hex(&raw)
    );
    let r = a
        .call(
            "run_python",
            json!({"code": code, "outputs": ["plot.png", "doc.pdf", "raw.bin", "fake.png"]}),
        )
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    // One short text block, then one block per output, in order; nothing else.
    assert_eq!(r.content.len(), 5, "{:?}", r.content);
    let ContentBlock::Text(summary) = &r.content[0] else {
        panic!("first block: {:?}", r.content[0]);
    };
    assert!(summary.text.contains("drew it"));
    let line = format!("output plot.png: image/png, {} bytes, attached", png.len());
    assert!(summary.text.contains(&line), "{}", summary.text);
    assert!(!summary.text.contains('\u{fffd}'));
    let ContentBlock::Image(img) = &r.content[1] else {
        panic!("second block: {:?}", r.content[1]);
    };
    assert_eq!(img.mime_type, "image/png");
    assert_eq!(unb64(&img.data), png);
    let blobs: Vec<(String, Option<String>, Vec<u8>)> = r.content[2..4]
        .iter()
        .map(|b| match b {
            ContentBlock::Resource(res) => match &res.resource {
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => (uri.clone(), mime_type.clone(), unb64(blob)),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        blobs,
        vec![
            (
                "airlock://work/doc.pdf".to_owned(),
                Some("application/pdf".to_owned()),
                pdf
            ),
            (
                "airlock://work/raw.bin".to_owned(),
                Some("application/octet-stream".to_owned()),
                raw
            ),
        ]
    );
    // A .png that is not a PNG is not passed off as an image.
    let fake = serde_json::to_value(&r.content[4]).unwrap();
    assert_eq!(fake["resource"]["text"], "not an image", "{fake}");
    assert_eq!(fake["resource"]["mimeType"], "text/plain");
    // The structured content carries metadata only, never the bytes a second time.
    let s = structured(&r);
    assert_eq!(
        s["outputs"][0],
        json!({"path": "plot.png", "mime_type": "image/png", "content": "image",
               "bytes": png.len()})
    );
    assert_eq!(s["outputs"][2]["content"], "blob");
    let whole = s.to_string();
    assert!(!whole.contains(&b64(&png)), "{whole}");
    assert!(!whole.contains('\u{fffd}'), "{whole}");

    // read_file hands the same image back the same way.
    let r = a.call("read_file", json!({"path": "plot.png"})).await;
    let img = r.content.iter().find_map(|b| match b {
        ContentBlock::Image(i) => Some(unb64(&i.data)),
        _ => None,
    });
    assert_eq!(img, Some(png));
    assert_eq!(structured(&r)["mime_type"], "image/png");
}
