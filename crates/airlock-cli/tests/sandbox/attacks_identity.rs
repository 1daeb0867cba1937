//! The sandbox owns its filesystem and identity (issue 12): no host file's metadata can change,
//! nothing set-id reaches the host, the guest's host uid owns nothing, and nothing is left
//! behind, after any ending. Evidence is taken on the host side.
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::support::*;

/// Everything a metadata attack could change, as the host sees it (ctime moves on any chmod,
/// chown, utime, xattr or ACL change, so an equal ctime proves none happened).
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    content: Vec<u8>,
    mode: u32,
    uid: u32,
    gid: u32,
    mtime: (i64, i64),
    ctime: (i64, i64),
    nlink: u64,
}

fn snapshot(p: &Path) -> Snapshot {
    let m = std::fs::symlink_metadata(p).unwrap();
    Snapshot {
        content: std::fs::read(p).unwrap(),
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
        nlink: m.nlink(),
    }
}

/// A victim file inside a directory the sandbox's root binds (read-only), owned by `who`.
fn bound_victim(who: As) -> PathBuf {
    let dir = Path::new("/usr/local/share");
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(marker("victim"));
    std::fs::write(&p, "victim").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    if who == As::User {
        let st = Command::new("chown")
            .arg(format!("{TEST_USER}:"))
            .arg(&p)
            .status()
            .unwrap();
        assert!(st.success());
    }
    p
}

/// Python that tries every metadata change on each path and prints CHANGED for a success.
fn metadata_attack(paths: &[&str]) -> String {
    format!(
        r#"import os
attacks = [
    ("chmod", lambda p: os.chmod(p, 0o4777)),
    ("utime", lambda p: os.utime(p, (0, 0))),
    ("chown", lambda p: os.chown(p, -1, os.getgid())),
    ("xattr", lambda p: os.setxattr(p, "user.airlock", b"1")),
    ("acl", lambda p: os.setxattr(p, "system.posix_acl_access", b"\x02\x00\x00\x00\x01\x00\x07\x00\xff\xff\xff\xff\x04\x00\x07\x00\xff\xff\xff\xff\x20\x00\x07\x00\xff\xff\xff\xff")),
    ("rename", lambda p: os.rename(p, p + ".moved")),
    ("link", lambda p: os.link(p, "/work/hard")),
    ("unlink", lambda p: os.unlink(p)),
    ("truncate", lambda p: os.truncate(p, 0)),
]
for p in {paths:?}:
    for name, f in attacks:
        try:
            f(p)
            print("CHANGED", name, p)
        except OSError as e:
            print("denied", name, e.errno)
"#
    )
}

#[test]
fn host_file_metadata_cannot_change() {
    for who in identities() {
        let bound = bound_victim(who);
        let private = private_file(who, "private");
        let interp = interpreter_path(who);
        let before: Vec<Snapshot> = [&bound, &private, &interp]
            .iter()
            .map(|p| snapshot(p))
            .collect();
        let paths = [
            bound.to_str().unwrap(),
            private.to_str().unwrap(),
            interp.to_str().unwrap(),
        ];
        let v = run_py(who, &metadata_attack(&paths), &[]);
        assert_completed(&v);
        let out = v["stdout"].as_str().unwrap();
        assert!(!out.contains("CHANGED"), "{who:?}: {out}");
        assert_eq!(out.matches("denied").count(), 27, "{who:?}: {out}");
        let after: Vec<Snapshot> = [&bound, &private, &interp]
            .iter()
            .map(|p| snapshot(p))
            .collect();
        assert_eq!(before, after, "{who:?}: a host file changed");
        std::fs::remove_file(&bound).unwrap();
        std::fs::remove_file(&private).unwrap();
    }
}

/// The interpreter binary the run uses, as a host path.
fn interpreter_path(who: As) -> PathBuf {
    let v = run_py(who, "import sys\nprint(sys.executable)", &[]);
    assert_completed(&v);
    PathBuf::from(v["stdout"].as_str().unwrap().trim())
}

/// `(pid, ppid)` of every process, from /proc.
fn processes() -> Vec<(u32, u32)> {
    let mut all = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().nth(1)?.parse().ok());
        if let Some(ppid) = ppid {
            all.push((pid, ppid));
        }
    }
    all
}

/// Every live descendant of `root`.
fn tree(root: u32) -> Vec<u32> {
    let all = processes();
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(all.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    out.remove(0);
    out
}

/// Whether `pid` is alive (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// The `airlock` process itself (the child, or runuser's child for airlock-test).
fn broker_pid(child: &std::process::Child) -> Option<u32> {
    let bin = binary().to_string_lossy().into_owned();
    std::iter::once(child.id())
        .chain(tree(child.id()))
        .find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .map(|c| c.starts_with(bin.as_bytes()))
                .unwrap_or(false)
        })
}

/// The guest of the run under `broker`: the process that is pid 1 of its own pid namespace.
fn guest_of(broker: u32) -> Option<u32> {
    tree(broker).into_iter().find(|p| {
        std::fs::read_to_string(format!("/proc/{p}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("NSpid:"))
                    .map(|l| l.split_whitespace().count() > 2 && l.ends_with("\t1"))
            })
            .unwrap_or(false)
    })
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn status_ids(pid: u32, key: &str) -> Vec<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(key))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn uid_of(user: &str) -> u32 {
    let out = Command::new("id").args(["-u", user]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// A run in the background that tags itself with `tag` and sleeps; returns the airlock child.
fn background(who: As, code: &str, extra: &[&str]) -> std::process::Child {
    let mut args = vec!["run", "--json"];
    if let Some(p) = python_for(who) {
        args.extend(["--python", p]);
    }
    args.extend_from_slice(extra);
    args.push("-");
    let mut child = command(who)
        .args(&args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(code.as_bytes())
        .unwrap();
    child
}

#[test]
fn the_guest_owns_nothing_on_the_host_and_set_id_files_confer_nothing() {
    let _only = exclusive();
    for who in identities() {
        let code = "import os, shutil, time\nshutil.copy('/usr/bin/dash', '/work/sh')\nos.chmod('/work/sh', 0o4755)\nopen('/work/ready', 'w').close()\ntime.sleep(30)\n";
        let mut child = background(who, code, &["--timeout", "60"]);
        let broker = wait_for("the broker", || broker_pid(&child));
        let pid = wait_for("the guest", || guest_of(broker));
        // Ready: the file is planted (seen through the guest's root when the host can look).
        std::thread::sleep(Duration::from_millis(500));
        // The guest's host identity: not root, not anyone's.
        let uids = status_ids(pid, "Uid:");
        let gids = status_ids(pid, "Gid:");
        assert_eq!(uids.len(), 4, "{uids:?}");
        let expected_owner = match who {
            As::Me if is_root() => {
                assert!(
                    uids.iter().all(|u| *u >= 2_000_000_000 && *u == uids[0]),
                    "a root broker's guest runs as {uids:?}"
                );
                assert!(gids.iter().all(|g| *g == uids[0]), "{gids:?}");
                uids[0]
            }
            As::Me => uid_of(&std::env::var("USER").unwrap_or_default()),
            As::User => {
                let u = uid_of(TEST_USER);
                assert!(uids.iter().all(|x| *x == u), "{uids:?}");
                u
            }
        };
        // The set-id file, seen from the host through the guest's own root: owned by that
        // identity, on a nosuid mount, and nowhere on the host's disk.
        let planted = PathBuf::from(format!("/proc/{pid}/root/work/sh"));
        if is_root() {
            let m = std::fs::metadata(&planted).unwrap();
            assert_eq!(m.uid(), expected_owner, "set-id file owner");
            assert_ne!(m.uid(), 0);
            let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
            let work = mounts
                .lines()
                .find(|l| l.split_whitespace().nth(4) == Some("/work"))
                .unwrap();
            assert!(work.contains("nosuid"), "{work}");
            // Another local user cannot even reach it.
            let other = Command::new("runuser")
                .args(["-u", "nobody", "--"])
                .arg(&planted)
                .args(["-c", "id -u"])
                .output()
                .unwrap();
            assert!(!other.status.success(), "nobody ran the planted file");
        }
        let all = tree(broker);
        kill_broker(broker);
        let _ = child.wait();
        wait_for("every process of the run to die", || {
            all.iter().all(|p| !alive(*p)).then_some(())
        });
    }
}

/// SIGKILL the airlock process itself (for airlock-test the child is runuser, whose death
/// would not reach it).
fn kill_broker(broker: u32) {
    let st = Command::new("kill")
        .args(["-KILL", &broker.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn a_killed_broker_leaves_nothing_behind() {
    let _only = exclusive();
    for who in identities() {
        let base = meminfo("Shmem");
        // 64 MiB in /work, then a 0300 directory with a file, then sleep.
        let code = "import os, time\nwith open('/work/big', 'wb') as f:\n    f.write(b'x' * (64 << 20))\nos.makedirs('/work/locked/deep')\nopen('/work/locked/deep/f', 'w').write('x')\nos.chmod('/work/locked', 0o300)\nopen('/tmp/t', 'w').write('y')\ntime.sleep(60)\n";
        let mut child = background(who, code, &["--timeout", "120"]);
        wait_for("64 MiB in the sandbox", || {
            (meminfo("Shmem") > base + (48 << 20)).then_some(())
        });
        let broker = wait_for("the broker", || broker_pid(&child));
        let all = tree(broker);
        assert!(all.len() >= 2, "{all:?}");
        kill_broker(broker);
        let _ = child.wait();
        wait_for("every process of the run to die", || {
            all.iter().all(|p| !alive(*p)).then_some(())
        });
        wait_for("the sandbox's filesystem to be freed", || {
            (meminfo("Shmem") < base + (16 << 20)).then_some(())
        });
        let residue: Vec<String> = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("airlock-run-") || n.starts_with("airlock-local-"))
            .collect();
        assert!(residue.is_empty(), "{who:?}: left behind {residue:?}");
    }
}

#[test]
fn a_command_path_is_a_guest_path_never_resolved_on_the_host() {
    for who in identities() {
        for argv0 in ["../../../../etc/shadow", "/etc/shadow", "./x"] {
            let v = exec(who, &[argv0], &[]);
            assert_ne!(status(&v), "completed", "{who:?} {argv0}: {v}");
            let all = format!("{}{}", v["stdout"], v["stderr"]);
            assert!(!all.contains("root:"), "{who:?} {argv0}: {all}");
        }
    }
}

/// The host's device nodes the sandbox's /dev binds: mode, owner and times, as the host sees
/// them (their content is not a file's).
fn node_meta(p: &str) -> (u32, u32, u32, (i64, i64), (i64, i64)) {
    let m = std::fs::metadata(p).unwrap();
    (
        m.mode(),
        m.uid(),
        m.gid(),
        (m.mtime(), m.mtime_nsec()),
        (m.ctime(), m.ctime_nsec()),
    )
}

const DEV_NODES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

#[test]
fn host_device_nodes_cannot_change() {
    for who in identities() {
        let before: Vec<_> = DEV_NODES.iter().map(|p| node_meta(p)).collect();
        let code = format!(
            "import os\nfor p in {DEV_NODES:?}:\n    for name, f in [('utime', lambda p: os.utime(p, None)), ('chmod', lambda p: os.chmod(p, 0o600))]:\n        try:\n            f(p); print('CHANGED', name, p)\n        except OSError as e:\n            print('denied', name, e.errno)\nopen('/dev/null', 'w').write('still a sink')\nprint('wrote')"
        );
        let v = run_py(who, &code, &[]);
        assert_completed(&v);
        let out = v["stdout"].as_str().unwrap();
        assert!(!out.contains("CHANGED"), "{who:?}: {out}");
        assert!(
            out.ends_with("wrote\n"),
            "{who:?}: /dev/null must still take writes: {out}"
        );
        let v = exec(who, &["/usr/bin/touch", "/dev/null", "/dev/urandom"], &[]);
        assert_eq!(v["exit_code"], 1, "{who:?}: touch succeeded: {v}");
        let after: Vec<_> = DEV_NODES.iter().map(|p| node_meta(p)).collect();
        assert_eq!(before, after, "{who:?}: a host device node changed");
    }
}
