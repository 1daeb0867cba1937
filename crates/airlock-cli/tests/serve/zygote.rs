//! `airlock serve --zygote`: runs forked from the zygote keep every layer, each run is fresh,
//! tool calls work, nothing of a run outlives it, and a zygote that cannot start is a refusal
//! that says how to fix it — never a quiet fall back. As root and as `airlock-test`.
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use super::support::*;

async fn layers_and_freshness(user: Option<&str>) {
    let server = WsServer::start_as(user, &["--zygote"]);
    let mut c = server.connect().await;
    let code = "import os, socket\nprint(sorted(os.listdir('.')), os.getcwd(), os.getpid(), os.getuid())\nopen('m','w').write('x')\nst = open('/proc/self/status').read()\nprint('NoNewPrivs:\\t1' in st, 'Seccomp:\\t2' in st, 'CapEff:\\t0000000000000000' in st)\ntry:\n    os.fork(); print('FORKED')\nexcept OSError:\n    print('no fork')\ntry:\n    socket.socket(); print('SOCKET')\nexcept OSError:\n    print('no socket')\nprint(call_tool('echo', {'n': 7}))";
    for id in 1..=3 {
        let r = result_of(&c.execute(id, json!({"code": code}), &echo_tools).await).clone();
        assert_eq!(r["status"], "completed", "{r}");
        assert_eq!(
            r["stdout"].as_str().unwrap(),
            "[] /work 1 1000\nTrue True True\nno fork\nno socket\n{'n': 7}\n",
            "{r}"
        );
    }
    // The server's children: the zygote only, once the runs are over (each run's stage was
    // the server's child, forked by the zygote, and is gone).
    let left = settle_to(server.pid(), 1, Duration::from_secs(5));
    assert_eq!(left.len(), 1, "processes left under the server: {left:?}");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", left[0])).unwrap_or_default();
    assert!(
        cmdline.windows(19).any(|w| w == b"libairlock_zygote.s"),
        "the one child left is not the zygote"
    );
}

/// Wait (bounded) until `pid` has at most `n` descendants; returns them.
fn settle_to(pid: i32, n: usize, within: Duration) -> Vec<i32> {
    let end = std::time::Instant::now() + within;
    loop {
        let left = all_descendants(pid);
        if left.len() <= n || std::time::Instant::now() > end {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn zygote_runs_keep_every_layer_and_start_fresh() {
    layers_and_freshness(None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn zygote_runs_keep_every_layer_and_start_fresh_as_airlock_test() {
    layers_and_freshness(Some("airlock-test")).await;
}

#[test]
fn zygote_without_its_library_is_refused_with_how_to_fix() {
    // A copy of the binary with nothing beside it: no libairlock_zygote.so.
    let dir = tempfile::tempdir().unwrap();
    let lone = dir.path().join("airlock");
    std::fs::copy(binary(), &lone).unwrap();
    let out = Command::new(&lone)
        .args(["serve", "--stdio", "--zygote"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "served without its zygote: {stderr}");
    assert!(
        stderr.contains("libairlock_zygote.so not found beside")
            && stderr.contains("without --zygote"),
        "{stderr}"
    );
}
