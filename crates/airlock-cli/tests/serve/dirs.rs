//! `files.make_dir` and `files.rename` (issue 40): what they do, and links the guest plants to
//! turn them onto the host, attacked as root and as `airlock-test` and asserted by the host's
//! own evidence (the victim file's content, mode, mtime and inode; nothing new in its dir).
use serde_json::{json, Value};

use super::sessions::{exec, victim, within_5s, HostFile};
use super::support::*;

const IDENTITIES: [Option<&str>; 2] = [None, Some("airlock-test")];
const FILE_REFUSED: i64 = -32017;
const NOT_FOUND: i64 = -32016;

async fn sandbox(c: &mut WsClient) -> String {
    let spec = json!({ "requires": ["exec", "run_code", "files_in", "files_out", "files_list",
                                    "files_delete"] });
    let r = c.call("sandbox.create", json!({ "spec": spec })).await;
    result_of(&r)["sandbox_id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn make_dir_and_rename_answer_as_stat_and_move_what_they_name() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let sid = sandbox(&mut c).await;
    let mk =
        |path: &str, parents: bool| json!({ "sandbox_id": sid, "path": path, "parents": parents });
    let r = c.call("files.make_dir", mk("a/b/c", false)).await;
    assert_eq!(
        error_code(&r),
        NOT_FOUND,
        "a missing parent without parents: {r}"
    );
    let r = result_of(&c.call("files.make_dir", mk("a/b/c", true)).await).clone();
    assert_eq!(
        (&r["kind"], &r["created"], &r["path"]),
        (&json!("dir"), &json!(true), &json!("a/b/c")),
        "{r}"
    );
    let r = result_of(&c.call("files.make_dir", mk("a/b", false)).await).clone();
    assert_eq!(r["created"], false, "an existing directory: {r}");
    exec(&mut c, &sid, "echo one > a/one.txt && echo two > two.txt").await;
    let r = c.call("files.make_dir", mk("two.txt", true)).await;
    assert_eq!(error_code(&r), FILE_REFUSED, "over a file: {r}");
    let mv = |from: &str, to: &str| json!({ "sandbox_id": sid, "from": from, "to": to });
    let r = result_of(
        &c.call("files.rename", mv("a/one.txt", "a/b/c/moved.txt"))
            .await,
    )
    .clone();
    assert_eq!(
        (&r["kind"], &r["size"], &r["from"]),
        (&json!("file"), &json!(4), &json!("a/one.txt")),
        "{r}"
    );
    let r = result_of(
        &c.call("files.rename", mv("two.txt", "a/b/c/moved.txt"))
            .await,
    )
    .clone();
    assert_eq!(r["size"], 4, "a file at `to` is replaced: {r}");
    let r = c.call("files.rename", mv("gone.txt", "x.txt")).await;
    assert_eq!(error_code(&r), NOT_FOUND, "{r}");
    let script = "cat a/b/c/moved.txt; ls a; test -e two.txt || echo gone";
    let r = exec(&mut c, &sid, script).await;
    assert_eq!(r["stdout"], "two\nb\ngone\n", "{r}");
}

async fn links_to_the_host(user: Option<&str>) {
    let (vdir, vpath) = victim();
    let victim_before = HostFile::snapshot(&vpath);
    let server = WsServer::start_as(user, &[]);
    let mut c = server.connect().await;
    let sid = sandbox(&mut c).await;
    let plant = format!(
        "ln -s {d} dlink && ln -s {v} vlink && echo mine > mine.txt && mkdir sub && echo planted",
        d = vdir.path().display(),
        v = vpath.display()
    );
    assert_eq!(
        exec(&mut c, &sid, &plant).await["stdout"],
        "planted\n",
        "{user:?}"
    );
    let mk = |path: &str| json!({ "sandbox_id": sid, "path": path, "parents": true });
    for path in ["dlink/made", "dlink/deep/made", "dlink"] {
        let r = within_5s(&mut c, "files.make_dir", mk(path)).await;
        assert_eq!(
            error_code(&r),
            FILE_REFUSED,
            "{user:?} make_dir {path}: {r}"
        );
    }
    let mv = |from: &str, to: &str| json!({ "sandbox_id": sid, "from": from, "to": to });
    for (from, to) in [
        ("mine.txt", "dlink/mine.txt"),
        ("dlink/victim", "stolen.txt"),
        ("sub", "dlink/sub"),
        ("mine.txt", "dlink/victim"),
    ] {
        let r = within_5s(&mut c, "files.rename", mv(from, to)).await;
        assert_eq!(
            error_code(&r),
            FILE_REFUSED,
            "{user:?} rename {from} {to}: {r}"
        );
    }
    // A link itself is moved as the link it is, never followed.
    let r = within_5s(&mut c, "files.rename", mv("vlink", "sub/vlink")).await;
    assert_eq!(result_of(&r)["kind"], "symlink", "{user:?}: {r}");
    victim_before.assert_unchanged();
    let in_dir: Vec<_> = std::fs::read_dir(vdir.path()).unwrap().collect();
    assert_eq!(
        in_dir.len(),
        1,
        "{user:?}: something landed in the victim's dir"
    );
    let r = exec(&mut c, &sid, "cat mine.txt; ls sub").await;
    assert_eq!(r["stdout"], "mine\nvlink\n", "{user:?}: {r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn make_dir_and_rename_never_follow_a_link_the_guest_planted_to_the_host() {
    for user in IDENTITIES {
        links_to_the_host(user).await;
    }
}

/// Without `files_delete` a rename is refused (it takes a name away), and without `files_in`
/// (it makes one) too; `files.make_dir` needs `files_in`.
#[tokio::test(flavor = "multi_thread")]
async fn make_dir_and_rename_need_their_capabilities() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    for (requires, method, params) in [
        (
            json!(["exec", "files_in"]),
            "files.rename",
            json!({ "from": "a", "to": "b" }),
        ),
        (
            json!(["exec", "files_delete"]),
            "files.rename",
            json!({ "from": "a", "to": "b" }),
        ),
        (
            json!(["exec", "files_delete"]),
            "files.make_dir",
            json!({ "path": "d" }),
        ),
    ] {
        let r = c
            .call(
                "sandbox.create",
                json!({ "spec": { "requires": requires } }),
            )
            .await;
        let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_owned();
        let mut p: Value = params;
        p["sandbox_id"] = json!(sid);
        let r = c.call(method, p).await;
        assert!(r.get("error").is_some(), "{requires} {method}: {r}");
        assert!(
            r.to_string().contains("capability"),
            "{requires} {method}: {r}"
        );
    }
}
