//! `airlock run --put/--get` and `--tool` end to end through the real binary: files in and
//! out on the same no-follow machinery as the local backend, an occupied or linked
//! destination refused, and `--tool` calls going through the host-tool registry.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::path::Path;
use std::process::{Command, Output};

fn airlock(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn put_and_get_round_trip_exact_bytes() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("in.txt"), "hello airlock").unwrap();
    std::fs::write(
        t.path().join("prog.py"),
        "import os\nos.makedirs('out')\n\
         open('out/r.txt','w').write(open('data/in.txt').read().upper())",
    )
    .unwrap();
    let o = airlock(
        &[
            "run",
            "--put",
            "in.txt=data/in.txt",
            "--get",
            "out/r.txt=got/r.txt",
            "prog.py",
        ],
        t.path(),
    );
    // The destination directory must exist; create it and run again.
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    std::fs::create_dir(t.path().join("got")).unwrap();
    let o = airlock(
        &[
            "run",
            "--put",
            "in.txt=data/in.txt",
            "--get",
            "out/r.txt=got/r.txt",
            "prog.py",
        ],
        t.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(t.path().join("got/r.txt")).unwrap(),
        "HELLO AIRLOCK"
    );
    // Run again: the destination is occupied, refused, and left as it was.
    std::fs::write(t.path().join("got/r.txt"), "mine").unwrap();
    let o = airlock(
        &[
            "run",
            "--put",
            "in.txt=data/in.txt",
            "--get",
            "out/r.txt=got/r.txt",
            "prog.py",
        ],
        t.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("already exists"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(t.path().join("got/r.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn a_guest_symlink_is_not_collected_and_bad_paths_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let secret = t.path().join("secret.txt");
    std::fs::write(&secret, "HOST SECRET").unwrap();
    std::fs::write(
        t.path().join("prog.py"),
        format!("import os\nos.symlink('{}', 'out.txt')", secret.display()),
    )
    .unwrap();
    let o = airlock(&["run", "--get", "out.txt=stolen.txt", "prog.py"], t.path());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(!t.path().join("stolen.txt").exists());
    for bad in ["in.txt=../x", "in.txt=/etc/x", "in.txt="] {
        let o = airlock(&["run", "--put", bad, "prog.py"], t.path());
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o.stderr));
    }
}

#[test]
fn a_work_prefixed_guest_path_names_the_same_file_and_nothing_outside_work() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("in.txt"), "abc").unwrap();
    std::fs::write(
        t.path().join("prog.py"),
        "import os\nprint(open('/work/d/in.txt').read())\n\
         open('out.txt','w').write('from the guest')",
    )
    .unwrap();
    // `/work/x` and `x` are one file, on the way in and out, as MCP's file tools take them.
    let o = airlock(
        &[
            "run",
            "--put",
            "in.txt=/work/d/in.txt",
            "--get",
            "/work/out.txt=a.txt",
            "--get",
            "d/in.txt=b.txt",
            "prog.py",
        ],
        t.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "abc\n");
    assert_eq!(
        std::fs::read_to_string(t.path().join("a.txt")).unwrap(),
        "from the guest"
    );
    assert_eq!(
        std::fs::read_to_string(t.path().join("b.txt")).unwrap(),
        "abc"
    );
    // Anything that would leave /work (or name it whole) is refused before the run.
    for bad in [
        "/work/../etc/passwd",
        "/work",
        "/work/",
        "/work//etc/passwd",
        "/etc/passwd",
        "/workx/a",
        "/tmp/a",
    ] {
        let flag = format!("{bad}=c.txt");
        let o = airlock(&["run", "--get", &flag, "prog.py"], t.path());
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("relative to /work or starts with /work/"),
            "{bad}: {}",
            text(&o.stderr)
        );
        assert!(text(&o.stdout).is_empty(), "{bad}: the program ran");
        assert!(!t.path().join("c.txt").exists(), "{bad}");
    }
}

#[test]
fn tools_go_through_the_registry() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(
        t.path().join("prog.py"),
        "print(call_tool('echo', {'a': 1})['a'])\n\
         for name, args in [('echo', [1, 2]), ('ghost', {})]:\n\
         \x20   try:\n\
         \x20       call_tool(name, args)\n\
         \x20   except ToolError as e:\n\
         \x20       print(e.data['code'], e.data['retryable'])",
    )
    .unwrap();
    let o = airlock(&["run", "--tool", "echo=cat", "prog.py"], t.path());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "1\ninvalid_arguments True\nunknown_tool False\n"
    );
}
