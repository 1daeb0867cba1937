//! A copy-on-write fork (`--fork-copy-on-write`) against a hostile parent kernel. Untrusted
//! code runs in a branch from the instant of its clone — here an `os.register_at_fork` hook a
//! cell left — before the broker has finished the branch: what it can reach then is the
//! parent's mount namespace (sealed read-only before the fork) and the parent's process group
//! (`kill` of a group refused), and whatever it keeps past the broker's outside checks
//! (capabilities, fds) makes the broker refuse the fork: no branch sandbox is made, no process
//! of it is left, and the parent's next cell says its kernel restarted, its files as they were.
use std::collections::BTreeSet;

use serde_json::json;

use super::snapshots::{cell, stateful, StateDir};
use super::support::*;

const IDENTITIES: [Option<&str>; 2] = [None, Some("airlock-test")];
const REFUSED: i64 = -32007;

/// A hook that keeps the branch's capabilities: the bootstrap's own globals (reached through
/// `call_tool`, one of its functions) get a no-op for dropping them.
const KEEP_CAPS: &str = "import os\n\
open('/work/f', 'w').write('parent')\n\
call_tool.__globals__['_drop_capabilities'] = lambda: None\n\
x = 1";

/// A hook that keeps an fd on the parent's files in every branch (and the bootstrap from
/// closing it: `os.closerange` made a no-op).
const KEEP_FD: &str = "import os, builtins\n\
open('/work/f', 'w').write('parent')\n\
os.register_at_fork(after_in_child=lambda: setattr(builtins, 'kept', open('/work/f')))\n\
os.closerange = lambda low, high: None\n\
x = 1";

/// A hook that writes the parent's file and signals the parent's process group from every
/// branch, and leaves what happened where the branch's cells can read it.
const WRITE_AND_SIGNAL: &str = r#"
import os, builtins
open('/work/f', 'w').write('parent')
def hook():
    for name, attempt in (('wrote', lambda: open('/work/f', 'w').write('a branch')),
                          ('signalled', lambda: os.kill(0, 9))):
        try:
            attempt()
            setattr(builtins, name, 'yes')
        except OSError as e:
            setattr(builtins, name, str(e.errno))
os.register_at_fork(after_in_child=hook)
x = 1
"#;

/// A fork the hook makes the broker refuse: an error saying why, no sandbox made, no process
/// of the fork left, the parent's kernel restarted and its file intact.
pub(super) async fn refused(c: &mut WsClient, server: i32, setup: &str, why: &str) {
    let parent = stateful(c).await;
    cell(c, &parent, setup).await;
    let listed = ids(c).await;
    let before: BTreeSet<i32> = all_descendants(server).into_iter().collect();
    let r = c
        .call("sandbox.fork", json!({ "sandbox_id": parent, "count": 2 }))
        .await;
    assert_eq!(error_code(&r), REFUSED, "{r}");
    assert!(r.to_string().contains(why), "{why}: {r}");
    assert_eq!(ids(c).await, listed, "no branch was made");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut left: Vec<i32>;
    loop {
        left = all_descendants(server)
            .into_iter()
            .filter(|p| !before.contains(p))
            .collect();
        if left.is_empty() || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(left.is_empty(), "processes of the fork left: {left:?}");
    let r = ok(
        c,
        "sandbox.run_code",
        json!({ "sandbox_id": parent, "code": "print('x' in dir(), open('/work/f').read())" }),
    )
    .await;
    assert_eq!(r["stdout"], "False parent\n", "{r}");
    assert_eq!(r["kernel_restarted"], true, "{r}");
}

/// The ids of the connection's sandboxes.
async fn ids(c: &mut WsClient) -> BTreeSet<String> {
    let r = ok(c, "sandbox.list", json!({})).await;
    r["sandboxes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sandbox_id"].as_str().unwrap().to_owned())
        .collect()
}

async fn hostile_parents(user: Option<&str>) {
    let state = StateDir::new(user);
    let server = state.serve_cow(user, true);
    let mut c = server.connect().await;
    refused(&mut c, server.pid(), KEEP_CAPS, "CapEff").await;
    refused(&mut c, server.pid(), KEEP_FD, "fds").await;
    // What the hook does in the parent's own mount namespace and process group fails; the
    // fork goes on, every sandbox holding the parent's file as it was.
    let parent = stateful(&mut c).await;
    cell(&mut c, &parent, WRITE_AND_SIGNAL).await;
    let r = ok(
        &mut c,
        "sandbox.fork",
        json!({ "sandbox_id": parent, "count": 2 }),
    )
    .await;
    assert_eq!(r["copy_on_write"], true, "{r}");
    for b in r["sandbox_ids"].as_array().unwrap() {
        let b = b.as_str().unwrap();
        let seen = cell(
            &mut c,
            b,
            "import builtins\nprint(builtins.wrote, builtins.signalled, open('/work/f').read(), x)",
        )
        .await;
        // EROFS: the parent's /work was sealed read-only; EPERM: no group signals.
        assert_eq!(seen, "30 1 parent 1\n", "{user:?}: {b}");
    }
    assert_eq!(
        cell(&mut c, &parent, "print(open('/work/f').read(), x)").await,
        "parent 1\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_parent_kernel_cannot_reach_past_the_fork() {
    for user in IDENTITIES {
        hostile_parents(user).await;
    }
}

/// What a clone would share with its parent — an open file, a thread — makes the fork a copy:
/// it still succeeds, says so, and every branch holds the parent's variables.
async fn cloning_would_share(user: Option<&str>) {
    let state = StateDir::new(user);
    let server = state.serve_cow(user, true);
    let mut c = server.connect().await;
    for (what, setup) in [
        ("an open file", "f = open('/work/held', 'w')\nx = 1"),
        (
            "a thread",
            "import threading, time\nt = threading.Thread(target=time.sleep, args=(30,), daemon=True)\nt.start()\nx = 1",
        ),
    ] {
        let parent = stateful(&mut c).await;
        cell(&mut c, &parent, setup).await;
        let r = ok(
            &mut c,
            "sandbox.fork",
            json!({ "sandbox_id": parent, "count": 1 }),
        )
        .await;
        assert_eq!(r["copy_on_write"], false, "{user:?}: {what}: {r}");
        let branch = r["sandbox_ids"][0].as_str().unwrap();
        assert_eq!(cell(&mut c, branch, "print(x)").await, "1\n", "{what}");
        assert_eq!(cell(&mut c, &parent, "print(x)").await, "1\n", "{what}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kernel_holding_a_file_or_a_thread_is_forked_by_a_copy() {
    for user in IDENTITIES {
        cloning_would_share(user).await;
    }
}

/// A copy-on-write fork whose branches would pass the server's `--max-sandboxes` is refused
/// before the kernel forks (a fork makes the parent's kernel a branch of a frozen one for good,
/// forkable again only by a copy): nothing of a branch is made or left, and the parent, its
/// state as it was, still forks copy-on-write once the branches fit.
async fn over_the_cap(user: Option<&str>) {
    let state = StateDir::new(user);
    let dir = state.dir.to_str().unwrap().to_owned();
    let args = [
        "--state-dir",
        &dir,
        "--fork-copy-on-write",
        "--max-sandboxes",
        "3",
    ];
    let server = WsServer::start_as(user, &args);
    let mut c = server.connect().await;
    let parent = stateful(&mut c).await;
    cell(&mut c, &parent, "x = 41").await;
    let listed = ids(&mut c).await;
    let before: BTreeSet<i32> = all_descendants(server.pid()).into_iter().collect();
    // The parent and 3 branches are 4 sandboxes, over the cap of 3.
    let r = c
        .call("sandbox.fork", json!({ "sandbox_id": parent, "count": 3 }))
        .await;
    assert_eq!(error_code(&r), -32018, "{user:?}: {r}");
    assert_eq!(ids(&mut c).await, listed, "{user:?}: no branch was made");
    let now: BTreeSet<i32> = all_descendants(server.pid()).into_iter().collect();
    assert_eq!(now, before, "{user:?}: the refused fork started processes");
    let r = ok(
        &mut c,
        "sandbox.fork",
        json!({ "sandbox_id": parent, "count": 2 }),
    )
    .await;
    assert_eq!(r["copy_on_write"], true, "{user:?}: {r}");
    for b in r["sandbox_ids"].as_array().unwrap() {
        let b = b.as_str().unwrap();
        assert_eq!(cell(&mut c, b, "print(x)").await, "41\n", "{user:?}: {b}");
    }
    let r = ok(
        &mut c,
        "sandbox.run_code",
        json!({ "sandbox_id": parent, "code": "print(x)" }),
    )
    .await;
    assert_eq!(r["stdout"], "41\n", "{user:?}: {r}");
    assert_ne!(r["kernel_restarted"], true, "{user:?}: {r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_over_the_servers_cap_is_refused_before_the_kernel_forks() {
    for user in IDENTITIES {
        over_the_cap(user).await;
    }
}
