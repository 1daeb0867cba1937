//! The CLI keeps interpreter discovery on disk, per user: a second run with nothing changed
//! reuses it (the cache file is not rewritten), and a change to the interpreter's path set (a
//! new `.pth` file) is rediscovered — the new directory is on `sys.path`, bound in the root and
//! readable under Landlock — never served stale.
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::support::*;

/// `airlock run --json --python PY -` with its cache under `xdg`, as `who`.
fn run_with_cache(who: As, xdg: &Path, python: &Path, code: &str) -> serde_json::Value {
    let mut cmd = match who {
        As::Me => {
            let mut c = Command::new(binary());
            c.env("XDG_CACHE_HOME", xdg);
            c
        }
        As::User => {
            let mut c = Command::new("runuser");
            c.args(["-u", TEST_USER, "--", "env", "-i"])
                .arg("PATH=/usr/local/bin:/usr/bin:/bin")
                .arg(format!("HOME=/home/{TEST_USER}"))
                .arg(format!("XDG_CACHE_HOME={}", xdg.display()))
                .arg(binary());
            c
        }
    };
    let out = cmd
        .args(["run", "--json", "--python"])
        .arg(python)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(code.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "{who:?}: {e}: {text}; stderr {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A venv (no pip) of the system python under `/var/tmp` (the sandbox's `/tmp` is its own).
fn venv(dir: &Path) -> (PathBuf, PathBuf) {
    let ok = Command::new("/usr/bin/python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(dir.join("venv"))
        .status()
        .unwrap();
    assert!(ok.success(), "python3 -m venv");
    let site = std::fs::read_dir(dir.join("venv/lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .expect("a site-packages dir");
    (dir.join("venv/bin/python"), site)
}

fn cache_file(xdg: &Path) -> std::fs::Metadata {
    std::fs::metadata(xdg.join("airlock/interpreters-v1.json")).expect("the cache file")
}

#[test]
fn discovery_is_cached_and_a_changed_path_set_is_rediscovered() {
    for who in identities() {
        let dir = PathBuf::from("/var/tmp").join(marker("discovery"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (python, site) = venv(&dir);
        let xdg = dir.join("xdg");
        std::fs::create_dir(&xdg).unwrap();
        if who == As::User {
            let ok = Command::new("chown")
                .arg(format!("{TEST_USER}:"))
                .arg(&xdg)
                .status()
                .unwrap();
            assert!(ok.success());
        }
        let probe = "import sys\ntry:\n    import mod_x\nexcept ImportError:\n    print('absent')";
        let v = run_with_cache(who, &xdg, &python, probe);
        assert_eq!(v["stdout"], "absent\n", "{who:?}: {v}");
        let first = cache_file(&xdg);
        assert_eq!(
            first.mode() & 0o077,
            0,
            "{who:?}: the cache file is private"
        );
        // Nothing changed: served from the file, which is not written again.
        let v = run_with_cache(who, &xdg, &python, probe);
        assert_eq!(v["stdout"], "absent\n", "{who:?}: {v}");
        assert_eq!(cache_file(&xdg).ino(), first.ino(), "{who:?}: rewritten");
        // A new .pth file puts a new directory on the path: rediscovered, bound, readable.
        let extra = dir.join("extra");
        std::fs::create_dir(&extra).unwrap();
        std::fs::write(extra.join("mod_x.py"), "print('x imported')\n").unwrap();
        std::fs::set_permissions(&extra, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(site.join("extra.pth"), format!("{}\n", extra.display())).unwrap();
        let v = run_with_cache(who, &xdg, &python, probe);
        assert_eq!(v["stdout"], "x imported\n", "{who:?}: {v}");
        assert_ne!(
            cache_file(&xdg).ino(),
            first.ino(),
            "{who:?}: not rediscovered"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
