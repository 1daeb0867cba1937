//! A user imports an image they built (mmdebstrap, podman) and runs model-written pandas code
//! in it from the CLI, as root and rootless.
use super::fixture::{fixture, stderr, Store};
use crate::support::{identities, status, As};

/// A model's data-analysis program: pandas and numpy from the image, not the host.
pub const PANDAS: &str = "import os, sys, pandas as pd, numpy as np\n\
df = pd.DataFrame({'city': ['a', 'b', 'a', 'c'], 'sales': [3, 4, 5, np.nan]})\n\
print(df.groupby('city').sales.sum().to_dict())\n\
print(pd.__version__, sys.executable, os.getcwd(), os.getuid(), os.environ.get('LANG'))\n";

#[test]
fn pandas_runs_in_an_imported_image_from_the_cli() {
    for who in identities() {
        let store = Store::new(who);
        let oci = store.imported(&fixture().join("oci.tar"), "pandas");
        assert_eq!(oci["format"], "oci");
        // The same root through the other formats: content-addressed, unpacked once.
        for (file, format) in [("docker.tar", "docker"), ("root.tar", "root-tar")] {
            let rec = store.imported(&fixture().join(file), format);
            assert_eq!(rec["id"], oci["id"], "{who:?} {file}");
            assert_eq!(rec["format"], format);
        }
        assert_eq!(store.roots().len(), 1);
        let r = store.on_image("run", "pandas", &["-"], PANDAS);
        assert_eq!(status(&r), "completed", "{who:?}: {r}");
        let out = r["stdout"].as_str().unwrap();
        assert!(
            out.starts_with("{'a': 8.0, 'b': 4.0, 'c': 0.0}\n"),
            "{who:?}: {out}"
        );
        // The image's interpreter, its working dir and env; the sandbox's own identity.
        assert!(out.contains(" /usr/bin/python3"), "{out}");
        assert!(
            out.trim_end().ends_with("/srv 1000 C.UTF-8"),
            "{who:?}: {out}"
        );
        // The caller's env wins over the image's; --python names a guest interpreter.
        let r = store.on_image(
            "run",
            "pandas",
            &["--env", "LANG=C", "--python", "/usr/bin/python3", "-"],
            "import os; print(os.environ['LANG'], os.environ['AIRLOCK_FIXTURE'])",
        );
        assert_eq!(r["stdout"], "C 1\n", "{who:?}: {r}");
        // A root without a config: /work, and nothing of the host's system directories.
        let r = store.on_image(
            "exec",
            "root-tar",
            &[
                "--",
                "/bin/sh",
                "-c",
                "pwd; cat /etc/debian_version >/dev/null && echo debian",
            ],
            "",
        );
        assert_eq!(r["stdout"], "/work\ndebian\n", "{who:?}: {r}");
    }
}

#[test]
fn the_host_interpreter_and_its_packages_are_not_in_an_image_sandbox() {
    for who in identities() {
        let store = Store::new(who);
        store.imported(&fixture().join("root.tar"), "base");
        // A host path that exists on this machine but not in the image is no interpreter
        // there; nor is a name not on the image's PATH. Missing, as on the host: `not_found`
        // and exit 127, not a refusal (docs/images.md).
        for python in ["/root/.pyenv/shims/python3", "python9"] {
            let dir = store.path().to_str().unwrap();
            let args = [
                "run",
                "--json",
                "--image-dir",
                dir,
                "--image",
                "base",
                "--python",
                python,
                "-",
            ];
            let out = crate::support::airlock(who, &args, "print('ran')");
            let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(status(&r), "error", "{who:?} {python}: {r}");
            assert_eq!(r["error"]["code"], -32016, "{who:?} {python}: {r}");
            let msg = r["error"]["message"].as_str().unwrap();
            assert!(
                msg.contains(&format!("{python:?} not found in image base")),
                "{msg}"
            );
            assert_eq!(out.status.code(), Some(127), "{who:?} {python}: {r}");
        }
    }
    // A package of the host's python3 that the image does not ship (PyYAML: the suite installs
    // it on the host) is not importable in an image sandbox, for either identity.
    let host = std::process::Command::new("python3")
        .args(["-c", "import yaml"])
        .output()
        .unwrap();
    assert!(
        host.status.success(),
        "this host's python3 has no yaml: the check below proves nothing here"
    );
    for who in identities() {
        let store = Store::new(who);
        store.imported(&fixture().join("root.tar"), "base");
        let r = store.on_image("run", "base", &["-"], "import yaml");
        assert_eq!(status(&r), "error", "{who:?}: {r}");
        assert!(
            r["stderr"]
                .as_str()
                .unwrap_or_default()
                .contains("No module named 'yaml'"),
            "{who:?}: {r}"
        );
    }
}

#[test]
fn ls_and_rm_keep_a_shared_root_until_its_last_name_goes() {
    let store = Store::new(identities().pop().unwrap());
    store.imported(&fixture().join("root.tar"), "one");
    store.imported(&fixture().join("root.tar"), "two");
    let ls = store.image(&["ls", "--json"]);
    let all: serde_json::Value = serde_json::from_slice(&ls.stdout).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 2, "{all}");
    let out = store.image(&["rm", "one"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("shared"),
        "{out:?}"
    );
    assert_eq!(store.roots().len(), 1);
    assert!(store.image(&["rm", "two"]).status.success());
    assert!(store.roots().is_empty());
    let out = store.image(&["rm", "two"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no image named"), "{}", stderr(&out));
    let dir = store.path().to_str().unwrap();
    let out = crate::support::airlock(
        store.who,
        &["run", "--image-dir", dir, "--image", "two", "-"],
        "1",
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no image named"), "{}", stderr(&out));
}

#[test]
fn a_plain_root_directory_imports_and_runs() {
    for who in identities() {
        let store = Store::new(who);
        // What `mmdebstrap … DIR` leaves, as the importing user would have it: extracted by
        // them (device nodes left out: a user cannot make them, and /dev is the sandbox's).
        let dir = super::fixture::scratch();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        if who == As::User {
            std::process::Command::new("chown")
                .args([crate::support::TEST_USER, root.to_str().unwrap()])
                .status()
                .unwrap();
        }
        let tar = fixture().join("root.tar");
        let mut c = match who {
            As::Me => std::process::Command::new("tar"),
            As::User => {
                let mut c = std::process::Command::new("runuser");
                c.args(["-u", crate::support::TEST_USER, "--", "tar"]);
                c
            }
        };
        let st = c
            .args([
                "--exclude=./dev/*",
                "-C",
                root.to_str().unwrap(),
                "-xf",
                tar.to_str().unwrap(),
            ])
            .status()
            .unwrap();
        assert!(st.success());
        let rec = store.imported(&root, "dir");
        assert_eq!(rec["format"], "directory", "{rec}");
        // Imported again, the same tree is the same root.
        let again = store.imported(&root, "dir2");
        assert_eq!(again["id"], rec["id"]);
        assert_eq!(store.roots().len(), 1);
        let r = store.on_image("run", "dir", &["-"], PANDAS);
        assert_eq!(status(&r), "completed", "{who:?}: {r}");
        assert!(
            r["stdout"].as_str().unwrap().starts_with("{'a': 8.0"),
            "{r}"
        );
    }
}
