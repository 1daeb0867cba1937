//! `airlock image build --preset python-data`: a newcomer's data image in one command. Built
//! once per machine (mmdebstrap, as root; kept in [`CACHE`] by the command's own `--cache`,
//! keyed by the recipe), imported by every identity through the same command, and run on.
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use super::fixture::{scratch, stderr, Store};
use crate::support::{binary, identities, status, As, TEST_USER};

/// Where the suite keeps built presets (like the fixture under /var/cache/airlock-test/images).
pub const CACHE: &str = "/var/cache/airlock-test/presets";

/// A data-analysis program that needs the whole stack, each package doing real work.
const DATA_STACK: &str = "\
import numpy, pandas, matplotlib, scipy, sklearn, sys
matplotlib.use('Agg')
import matplotlib.pyplot as plt
from scipy import stats
from sklearn.linear_model import LinearRegression
df = pandas.DataFrame({'x': [1.0, 2.0, 3.0, 4.0], 'y': [3.0, 5.0, 7.0, 9.0]})
model = LinearRegression().fit(df[['x']], df.y)
print('fit', round(float(model.coef_[0]), 6), round(float(model.intercept_), 6))
print('pearson', round(float(stats.pearsonr(df.x, df.y)[0]), 6))
plt.plot(df.x, df.y); plt.savefig('/work/fit.png')
print('png', open('/work/fit.png', 'rb').read(8) == b'\\x89PNG\\r\\n\\x1a\\n')
for m in (numpy, pandas, matplotlib, scipy, sklearn):
    print(m.__name__, m.__version__)
print(sys.executable)
";

/// `airlock image build --preset python-data --cache CACHE --json` into `store`.
pub fn build_preset(store: &Store) -> Value {
    let out = store.image(&[
        "build",
        "--preset",
        "python-data",
        "--cache",
        CACHE,
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{:?}: image build --preset python-data failed: {}",
        store.who,
        stderr(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn the_python_data_preset_builds_once_and_runs_numpy_pandas_matplotlib_scipy_sklearn() {
    for who in identities() {
        let store = Store::new(who);
        let built = build_preset(&store);
        assert_eq!(built["record"]["name"], "python-data", "{built}");
        assert_eq!(built["builder"], "mmdebstrap", "{built}");
        // Root goes first and builds (or finds this machine's build); the user only imports.
        if who == As::User {
            assert_eq!(built["cached"], true, "{built}");
        }
        let kept = Path::new(CACHE).join(format!(
            "python-data-{}.tar",
            built["recipe"].as_str().unwrap()
        ));
        assert!(kept.is_file(), "{} is not kept", kept.display());
        let r = store.on_image("run", "python-data", &["-"], DATA_STACK);
        assert_eq!(status(&r), "completed", "{who:?}: {r}");
        let out = r["stdout"].as_str().unwrap();
        assert!(
            out.starts_with("fit 2.0 1.0\npearson 1.0\npng True\n"),
            "{who:?}: {out}"
        );
        for m in ["numpy", "pandas", "matplotlib", "scipy", "sklearn"] {
            let line = out
                .lines()
                .find(|l| l.starts_with(&format!("{m} ")))
                .unwrap_or("");
            let version = line.split(' ').nth(1).unwrap_or("");
            assert!(
                version.starts_with(|c: char| c.is_ascii_digit()),
                "{m}: {out}"
            );
        }
        let exe = out.lines().last().unwrap_or("");
        assert!(
            exe.starts_with("/usr/bin/python3"),
            "the image's python: {out}"
        );
        // pip is there and may install (no PEP 668 marker in a sandbox's read-only image).
        let r = store.on_image(
            "exec",
            "python-data",
            &[
                "--",
                "sh",
                "-c",
                "python3 -m pip --version && ls /usr/lib/python3*/EXTERNALLY-MANAGED",
            ],
            "",
        );
        let out = r["stdout"].as_str().unwrap_or("");
        assert!(out.starts_with("pip "), "{who:?}: {r}");
        assert_ne!(r["exit_code"], 0, "the marker is there: {r}");
    }
}

/// `airlock image --image-dir <store> build <args>` as `who` with `PATH` set to `path` alone.
fn build_with_path(store: &Store, path: &Path, args: &[&str]) -> Output {
    let mut c = match store.who {
        As::Me => {
            let mut c = Command::new(binary());
            c.env("PATH", path);
            c
        }
        As::User => {
            let mut c = Command::new("runuser");
            c.args(["-u", TEST_USER, "--", "env", "-i"])
                .arg(format!("PATH={}", path.display()))
                .arg(format!("HOME=/home/{TEST_USER}"))
                .arg(binary());
            c
        }
    };
    c.args([
        "image",
        "--image-dir",
        store.path().to_str().unwrap(),
        "build",
    ])
    .args(args)
    .output()
    .unwrap()
}

#[test]
fn without_mmdebstrap_podman_or_buildah_on_path_the_build_names_them_and_how_to_install() {
    for who in identities() {
        let store = Store::new(who);
        // A PATH with the usual tools but none of the builders.
        let bin = scratch();
        for tool in ["sh", "tar", "apt-get", "python3"] {
            if let Ok(p) = which(tool) {
                std::os::unix::fs::symlink(p, bin.path().join(tool)).unwrap();
            }
        }
        let out = build_with_path(&store, bin.path(), &["--preset", "python-data"]);
        assert_eq!(out.status.code(), Some(2), "{who:?}: {out:?}");
        let e = stderr(&out);
        for name in [
            "mmdebstrap",
            "podman",
            "buildah",
            "apt-get install mmdebstrap",
            "apt-get install podman",
        ] {
            assert!(e.contains(name), "{who:?}: {name} not in: {e}");
        }
        assert!(!store.path().join("images/python-data.json").exists());
        // A builder asked for by name must be there too; an unknown preset lists the presets.
        let out = build_with_path(
            &store,
            bin.path(),
            &["--preset", "python-data", "--builder", "podman"],
        );
        assert!(stderr(&out).contains("tried podman"), "{}", stderr(&out));
        let out = build_with_path(&store, bin.path(), &["--preset", "pyhton-data"]);
        assert!(
            stderr(&out).contains("the presets are: python-data"),
            "{}",
            stderr(&out)
        );
        // A suite lands in the builder's arguments and a FROM line: checked first.
        let args = ["--preset", "python-data", "--suite", "x\nRUN id"];
        let out = build_with_path(&store, bin.path(), &args);
        assert!(
            stderr(&out).contains("--suite \"x\\nRUN id\": a Debian"),
            "{}",
            stderr(&out)
        );
    }
}

fn which(tool: &str) -> Result<std::path::PathBuf, ()> {
    ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.exists())
        .ok_or(())
}

/// A stand-in mmdebstrap that writes a tiny root tarball (its `/etc/built-by` naming the uid
/// that ran it) to the argument ending in `.tar`: a build in milliseconds.
const FAKE_MMDEBSTRAP: &str = "#!/bin/sh\n\
for a; do case \"$a\" in *.tar) out=\"$a\";; esac; done\n\
d=$(mktemp -d) && mkdir -p \"$d/etc\" && id -u > \"$d/etc/built-by\" && tar -cf \"$out\" -C \"$d\" . && rm -rf \"$d\"\n";

/// The red team's plant: an archive under the recipe's own key in a cache another user could
/// write. Root never imports it (it is as good as absent: root builds, and is refused a place
/// in another user's cache), and a file another user owns in root's own cache is not taken
/// either.
#[test]
fn a_cached_archive_another_user_could_have_written_is_never_imported() {
    if identities().len() < 2 {
        println!("SKIP: needs root and {TEST_USER}");
        return;
    }
    let tools = scratch();
    let fake = tools.path().join("mmdebstrap");
    std::fs::write(&fake, FAKE_MMDEBSTRAP).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", tools.path().display());
    let (root, user) = (Store::new(As::Me), Store::new(As::User));
    let base = scratch();
    let theirs = base.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    let made = Command::new("chown")
        .arg(TEST_USER)
        .arg(&theirs)
        .status()
        .unwrap();
    assert!(made.success());
    let args = [
        "--preset",
        "python-data",
        "--json",
        "--cache",
        theirs.to_str().unwrap(),
    ];
    // The user builds into its own cache (the stand-in builder): a file under the real key.
    let out = build_with_path(&user, Path::new(&path), &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let planted: Vec<_> = std::fs::read_dir(&theirs)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    let planted = planted
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "tar"))
        .unwrap();
    // Root, pointed at that cache: no import of it; its own build may not go there either.
    let out = build_with_path(&root, Path::new(&path), &args);
    assert!(
        !out.status.success(),
        "root imported a cache another user wrote"
    );
    assert!(stderr(&out).contains("cache"), "{}", stderr(&out));
    assert!(!root.path().join("images/python-data.json").exists());
    // The user's file copied into root's own cache, still the user's: not taken either.
    let mine = base.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    let copy = mine.join(planted.file_name().unwrap());
    std::fs::copy(&planted, &copy).unwrap();
    let chowned = Command::new("chown")
        .arg(TEST_USER)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(chowned.success());
    let args = [
        "--preset",
        "python-data",
        "--json",
        "--cache",
        mine.to_str().unwrap(),
    ];
    let out = build_with_path(&root, Path::new(&path), &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let built: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(built["cached"], false, "{built}");
    let by = std::fs::read_to_string(root.root_of("python-data").join("etc/built-by")).unwrap();
    assert_eq!(by, "0\n", "root imported the user's build");
    // The build lock is a file only the cache's owner can open (another user cannot hold it).
    use std::os::unix::fs::MetadataExt;
    let lock = std::fs::metadata(mine.join(".lock")).unwrap();
    assert_eq!((lock.mode() & 0o777, lock.uid()), (0o600, 0));
}
