//! `files.write` answers what `files.stat` says of the file it leaves (docs/server.md): the
//! whole `{path, exists, size, is_dir, kind}`, for a replacing write and an appended chunk.
//! The server runs as root and as `airlock-test`.
use base64::Engine as _;
use serde_json::json;

use super::support::*;

const IDENTITIES: [Option<&str>; 2] = [None, Some("airlock-test")];

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_answers_as_stat_describes_the_file() {
    for who in IDENTITIES {
        let server = WsServer::start_as(who, &[]);
        let mut c = server.connect().await;
        let r = c.call("sandbox.create", json!({"spec": {}})).await;
        let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_owned();
        let chunks: [(&[u8], u64); 2] = [(b"hello ", 0), (b"world", 6)];
        for (data, offset) in chunks {
            let p =
                json!({"sandbox_id": sid, "path": "d/w.txt", "data": b64(data), "offset": offset});
            let w = c.call("files.write", p).await;
            let s = c
                .call("files.stat", json!({"sandbox_id": sid, "path": "d/w.txt"}))
                .await;
            assert_eq!(result_of(&w), result_of(&s), "{who:?} offset {offset}");
            assert_eq!(result_of(&w)["kind"], "file", "{who:?}: {w}");
            assert_eq!(result_of(&w)["size"], offset + data.len() as u64, "{w}");
        }
    }
}
