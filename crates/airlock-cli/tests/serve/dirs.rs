//! `files.make_dir` and `files.rename` (issue 40): what they do, and links the guest plants to
//! turn them onto the host, attacked as root and as `airlock-test` and asserted by the host's
//! own evidence (the victim file's content, mode, mtime and inode; nothing new in its dir).
use serde_json::{json, Value};

use super::processes::start_sh;
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

async fn sandbox_with_processes(c: &mut WsClient) -> String {
    let spec = json!({ "requires": ["exec", "run_code", "files_in", "files_out", "files_list",
                                    "files_delete", "processes"] });
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

/// `files.stat`, `files.list` and `files.write` say a file's mode, its permissions as `ls -l`
/// writes them, and when it was last modified (issue 40).
#[tokio::test(flavor = "multi_thread")]
async fn stat_and_list_say_the_mode_permissions_and_modified_time() {
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let sid = sandbox(&mut c).await;
    let set = "echo x > f.txt && chmod 640 f.txt && touch -d @1700000000.25 f.txt && mkdir d && chmod 751 d";
    assert_eq!(exec(&mut c, &sid, set).await["exit_code"], 0);
    let r = c
        .call("files.stat", json!({ "sandbox_id": sid, "path": "f.txt" }))
        .await;
    let r = result_of(&r);
    assert_eq!(
        (&r["mode"], &r["permissions"], &r["modified_ms"]),
        (
            &json!(0o640),
            &json!("rw-r-----"),
            &json!(1_700_000_000_250_u64)
        ),
        "{r}"
    );
    let l = c.call("files.list", json!({ "sandbox_id": sid })).await;
    let d = result_of(&l)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "d")
        .cloned()
        .unwrap();
    assert_eq!(
        (&d["kind"], &d["permissions"]),
        (&json!("dir"), &json!("rwxr-x--x")),
        "{d}"
    );
    let missing = c
        .call("files.stat", json!({ "sandbox_id": sid, "path": "nope" }))
        .await;
    let m = result_of(&missing);
    assert_eq!(
        (&m["exists"], &m["mode"], &m["modified_ms"]),
        (&json!(false), &Value::Null, &Value::Null),
        "{m}"
    );
}

fn dir_listing(p: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(p)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The guest swaps `d` (a real directory holding `victim`) with a symlink to the host
/// victim's dir, atomically and continuously (renameat2 RENAME_EXCHANGE), while the broker
/// makes dirs and renames through `d`.
async fn parent_swapped(user: Option<&str>) {
    use std::os::unix::fs::MetadataExt;
    let (vdir, vpath) = victim();
    let before = HostFile::snapshot(&vpath);
    let dir_before = std::fs::metadata(vdir.path()).unwrap();
    let server = WsServer::start_as(user, &[]);
    let mut c = server.connect().await;
    let sid = sandbox_with_processes(&mut c).await;
    let py = r#"
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs('d/sub', exist_ok=True)
open('d/victim', 'w').write('decoy\n')
os.symlink(VDIR, 'lnk')
print('ready', flush=True)
end = time.time() + 12
n = 0
bad = 0
while time.time() < end:
    if libc.renameat2(-100, b'd', -100, b'lnk', 2) != 0:
        bad += 1
    n += 1
    if n % 5000 == 0:
        open('src.txt', 'a').close()
        os.makedirs('srcdir', exist_ok=True)
        print('swaps', n, 'failed', bad, flush=True)
"#
    .replace("VDIR", &format!("{:?}", vdir.path().display().to_string()));
    let racer = format!("python3 - <<'EOF'\n{py}\nEOF");
    exec(&mut c, &sid, "echo mine > src.txt && mkdir srcdir").await;
    let pid = start_sh(&mut c, &sid, &racer).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let r = c.call("process.output", json!({ "process_id": pid })).await;
    assert!(
        r.to_string().contains("cmVhZHk"),
        "{user:?}: the racer is not swapping: {r}"
    );
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(8);
    let mut i = 0u32;
    while std::time::Instant::now() < deadline {
        i += 1;
        let calls = [
            (
                "files.make_dir",
                json!({ "sandbox_id": sid, "path": format!("d/m{i}"), "parents": false }),
            ),
            (
                "files.make_dir",
                json!({ "sandbox_id": sid, "path": format!("d/p{i}/q"), "parents": true }),
            ),
            (
                "files.make_dir",
                json!({ "sandbox_id": sid, "path": format!("d/sub/s{i}"), "parents": true }),
            ),
            (
                "files.rename",
                json!({ "sandbox_id": sid, "from": "src.txt", "to": format!("d/r{i}") }),
            ),
            (
                "files.rename",
                json!({ "sandbox_id": sid, "from": "srcdir", "to": "d/victim" }),
            ),
            (
                "files.rename",
                json!({ "sandbox_id": sid, "from": "src.txt", "to": "d/victim" }),
            ),
            (
                "files.rename",
                json!({ "sandbox_id": sid, "from": "d/victim", "to": format!("stolen{i}") }),
            ),
            (
                "files.rename",
                json!({ "sandbox_id": sid, "from": format!("d/r{}", i.saturating_sub(1)), "to": "src.txt" }),
            ),
        ];
        for (m, p) in calls {
            let r = within_5s(&mut c, m, p).await;
            let k = match r.get("error") {
                Some(e) => format!("{m} err {}", e["code"]),
                None => format!("{m} ok"),
            };
            *outcomes.entry(k).or_default() += 1;
        }
    }
    eprintln!("{user:?}: {i} rounds, outcomes {outcomes:?}");
    // The swap was live: some calls found the link in place of `d` and were refused.
    assert!(
        outcomes.keys().any(|k| k.contains("err -32017")),
        "{user:?}: no call met the swapped link: {outcomes:?}"
    );
    before.assert_unchanged();
    assert_eq!(
        dir_listing(vdir.path()),
        vec!["victim".to_string()],
        "{user:?}: something landed in the victim's dir"
    );
    let dir_after = std::fs::metadata(vdir.path()).unwrap();
    assert_eq!(
        (
            dir_before.mtime(),
            dir_before.mtime_nsec(),
            dir_before.ino()
        ),
        (dir_after.mtime(), dir_after.mtime_nsec(), dir_after.ino()),
        "{user:?}: the victim dir was modified"
    );
    // A stolen file must be the decoy, never the host's.
    let r = exec(&mut c, &sid, "cat stolen* 2>/dev/null | sort -u; echo end").await;
    assert!(
        !r["stdout"].as_str().unwrap().contains("host secret"),
        "{user:?}: {r}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn make_dir_and_rename_hold_while_the_guest_swaps_a_parent_for_a_host_link() {
    for user in IDENTITIES {
        parent_swapped(user).await;
    }
}

/// `files.write_many` (issue 40): several files in one call, parents made, each answered as
/// `files.write` answers; bounded in all to one write's chunk; a link the guest planted on
/// the way ends the call there (the files before it written, nothing of the host touched).
#[tokio::test(flavor = "multi_thread")]
async fn write_many_writes_each_file_and_stops_at_a_planted_link() {
    use base64::Engine as _;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let (vdir, vpath) = victim();
    let before = HostFile::snapshot(&vpath);
    let server = WsServer::start(&[]);
    let mut c = server.connect().await;
    let sid = sandbox(&mut c).await;
    let files = json!([
        { "path": "a.txt", "data": b64(b"one") },
        { "path": "deep/b.txt", "data": b64(b"two!") },
    ]);
    let r = c
        .call(
            "files.write_many",
            json!({ "sandbox_id": sid, "files": files }),
        )
        .await;
    let got = result_of(&r)["files"].as_array().unwrap().clone();
    assert_eq!(
        (got[0]["path"].as_str(), got[0]["size"].as_u64()),
        (Some("a.txt"), Some(3))
    );
    assert_eq!(
        (got[1]["kind"].as_str(), got[1]["size"].as_u64()),
        (Some("file"), Some(4))
    );
    let big = b64(&vec![7u8; 300 * 1024]);
    let over = json!([{ "path": "x", "data": big }, { "path": "y", "data": big }]);
    let r = c
        .call(
            "files.write_many",
            json!({ "sandbox_id": sid, "files": over }),
        )
        .await;
    assert_eq!(error_code(&r), -32602, "over one chunk in all: {r}");
    let plant = format!("ln -s {} dlink && echo planted", vdir.path().display());
    assert_eq!(exec(&mut c, &sid, &plant).await["stdout"], "planted\n");
    let files = json!([
        { "path": "first.txt", "data": b64(b"ok") },
        { "path": "dlink/victim", "data": b64(b"PWNED") },
        { "path": "never.txt", "data": b64(b"no") },
    ]);
    let r = c
        .call(
            "files.write_many",
            json!({ "sandbox_id": sid, "files": files }),
        )
        .await;
    assert_eq!(error_code(&r), FILE_REFUSED, "{r}");
    let r = exec(
        &mut c,
        &sid,
        "cat first.txt; test -e never.txt || echo none",
    )
    .await;
    assert_eq!(r["stdout"], "oknone\n", "{r}");
    before.assert_unchanged();
    assert_eq!(std::fs::read_dir(vdir.path()).unwrap().count(), 1);
}
