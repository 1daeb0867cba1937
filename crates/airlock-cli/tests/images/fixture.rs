//! The images the tests import: the cached mmdebstrap root (scripts/image-fixture.sh) and
//! hostile ones (hostile.py); per-identity stores; host files an image tries to reach.
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

use crate::support::{self, is_root, As, TEST_USER};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The fixture cache dir: `root.tar` (a Debian root with python3, numpy and pandas), and the
/// same root as `oci.tar` and `docker.tar`. Built once per machine, as root.
pub fn fixture() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        assert!(
            is_root(),
            "the image tests build their Debian image with mmdebstrap and must run as root \
             (scripts/test.sh does)"
        );
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/image-fixture.sh"))
            .env("FORMATS", "oci")
            .output()
            .expect("running scripts/image-fixture.sh");
        assert!(
            out.status.success(),
            "building the image fixture failed (apt-get install -y mmdebstrap podman):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        PathBuf::from(stdout.lines().last().unwrap_or_default().trim())
    })
}

/// A directory everyone can read, removed with the test (hostile archives go here).
pub fn scratch() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("airlock-images-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// Writes the hostile image `kind` to `out` (hostile.py).
pub fn hostile(kind: &str, out: &Path, victim: &Path) {
    let mut c = Command::new("python3");
    c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/images/hostile.py"))
        .arg(kind)
        .arg(out)
        .arg("--victim")
        .arg(victim);
    if matches!(kind, "setuid" | "interp") {
        c.arg("--base").arg(fixture().join("root.tar"));
    }
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "hostile.py {kind}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The other identity must be able to read it.
    Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(out)
        .status()
        .unwrap();
}

/// A directory (or file) made to belong to `who`.
fn give(who: As, p: &Path) {
    if who == As::User {
        let st = Command::new("chown")
            .args(["-R", &format!("{TEST_USER}:")])
            .arg(p)
            .status()
            .unwrap();
        assert!(st.success());
    }
}

/// An image store of one identity, removed on drop.
pub struct Store {
    pub who: As,
    pub dir: tempfile::TempDir,
}

impl Store {
    pub fn new(who: As) -> Store {
        let dir = scratch();
        give(who, dir.path());
        Store { who, dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `airlock image --image-dir <store> <args>` as the store's identity.
    pub fn image(&self, args: &[&str]) -> Output {
        let mut all = vec!["image", "--image-dir", self.path().to_str().unwrap()];
        all.extend_from_slice(args);
        support::airlock(self.who, &all, "")
    }

    /// Imports `src` as `name`; the output, whatever happened.
    pub fn import(&self, src: &Path, name: &str, extra: &[&str]) -> Output {
        let mut args = vec!["import", src.to_str().unwrap(), "--name", name, "--json"];
        args.extend_from_slice(extra);
        self.image(&args)
    }

    /// Imports `src` as `name` and returns the record, failing the test otherwise.
    pub fn imported(&self, src: &Path, name: &str) -> Value {
        let out = self.import(src, name, &[]);
        assert!(
            out.status.success(),
            "import {} as {name} ({:?}) failed: {}",
            src.display(),
            self.who,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The root directory an image name points at.
    pub fn root_of(&self, name: &str) -> PathBuf {
        let rec: Value = serde_json::from_slice(
            &std::fs::read(self.path().join(format!("images/{name}.json"))).unwrap(),
        )
        .unwrap();
        self.path().join("roots").join(rec["id"].as_str().unwrap())
    }

    /// The roots in the store.
    pub fn roots(&self) -> Vec<String> {
        let Ok(d) = std::fs::read_dir(self.path().join("roots")) else {
            return Vec::new();
        };
        let mut v: Vec<String> = d
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// Asserts a refused import left nothing: no root, no record, an empty tmp.
    pub fn assert_left_nothing(&self, roots_before: &[String], name: &str) {
        assert_eq!(
            self.roots(),
            roots_before,
            "a refused import published a root"
        );
        assert!(!self.path().join(format!("images/{name}.json")).exists());
        let tmp: Vec<_> = std::fs::read_dir(self.path().join("tmp"))
            .unwrap()
            .collect();
        assert!(
            tmp.is_empty(),
            "a refused import left staging behind: {tmp:?}"
        );
    }

    /// `airlock <verb> --json --image-dir <store> --image <name> [extra] ...`.
    pub fn on_image(&self, verb: &str, name: &str, extra: &[&str], stdin: &str) -> Value {
        let mut args = vec![
            verb,
            "--json",
            "--image-dir",
            self.path().to_str().unwrap(),
            "--image",
            name,
        ];
        args.extend_from_slice(extra);
        let out = support::airlock(self.who, &args, stdin);
        let stdout = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "{e}: {stdout:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }
}

/// What a host file is: content digest, mode, owner, group, mtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    content: Vec<u8>,
    mode: u32,
    uid: u32,
    gid: u32,
    mtime_ns: i128,
}

pub fn snapshot(p: &Path) -> Snapshot {
    let m = std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    Snapshot {
        content: std::fs::read(p).unwrap(),
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
    }
}

/// A host file an image tries to reach, owned by the identity importing (so an escape would
/// have the rights to change it), and the host's /etc/shadow; both checked after.
pub struct Victims {
    pub dir: tempfile::TempDir,
    pub file: PathBuf,
    before: Vec<(PathBuf, Snapshot)>,
}

impl Victims {
    pub fn new(who: As) -> Victims {
        // Not under /tmp: a sandbox has its own /tmp, and a victim there would be hidden.
        let dir = tempfile::Builder::new()
            .prefix("airlock-images-victim-")
            .tempdir_in("/var/tmp")
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let file = dir.path().join("victim");
        std::fs::write(&file, "the host's own file\n").unwrap();
        give(who, dir.path());
        let before = [file.clone(), PathBuf::from("/etc/shadow")]
            .into_iter()
            .map(|p| {
                let s = snapshot(&p);
                (p, s)
            })
            .collect();
        Victims { dir, file, before }
    }

    /// Content, mode, owner and mtime of every victim are what they were.
    pub fn assert_untouched(&self) {
        for (p, s) in &self.before {
            assert_eq!(&snapshot(p), s, "{} changed", p.display());
        }
        let names: Vec<_> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("victim")],
            "something appeared next to the victim"
        );
    }
}

/// The text of an `airlock image import` failure.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
