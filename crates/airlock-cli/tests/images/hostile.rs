//! Hostile images: each is refused, or imported with the attack neutralised, and the host's
//! files (content, mode, owner, mtime) are untouched. Asserted from outside: the host files,
//! the store's directories, and what a sandbox on the image sees.
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::time::{Duration, Instant};

use super::fixture::{hostile, scratch, stderr, Store, Victims};
use crate::support::{identities, status};

#[test]
fn links_to_host_files_stay_inside_the_image() {
    for who in identities() {
        let (store, victims, dir) = (Store::new(who), Victims::new(who), scratch());
        let tar = dir.path().join("links.tar");
        hostile("links", &tar, &victims.file);
        store.imported(&tar, "links");
        victims.assert_untouched();
        let root = store.root_of("links");
        // Everything written "through" a link landed in the image's own tree.
        let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
        assert_eq!(read("etc/shadow"), "pwned-through-etcl\n");
        assert_eq!(read("shadow"), "pwned-replacing-link\n");
        let inside = victims.file.strip_prefix("/").unwrap();
        assert_eq!(read(inside.to_str().unwrap()), "pwned-through-up\n");
        assert!(std::fs::symlink_metadata(root.join("shadow"))
            .unwrap()
            .is_file());
        // /etc/passwd was a link to the host's /etc/shadow: replaced by a file of the image's.
        let passwd = std::fs::symlink_metadata(root.join("etc/passwd")).unwrap();
        assert!(passwd.is_file(), "{who:?}");
        assert!(read("etc/passwd").contains("sandbox:x:1000:1000"));
    }
}

#[test]
fn climbing_paths_are_refused_and_leave_nothing() {
    for who in identities() {
        let (store, victims, dir) = (Store::new(who), Victims::new(who), scratch());
        for kind in ["dotdot", "whiteout_dotdot"] {
            let tar = dir.path().join(format!("{kind}.tar"));
            hostile(kind, &tar, &victims.file);
            let before = store.roots();
            let out = store.import(&tar, kind, &[]);
            assert!(!out.status.success(), "{who:?} {kind} was imported");
            assert!(
                stderr(&out).contains("'..'"),
                "{who:?} {kind}: {}",
                stderr(&out)
            );
            store.assert_left_nothing(&before, kind);
        }
        victims.assert_untouched();
    }
}

#[test]
fn whiteouts_hide_lower_layers_and_nothing_of_the_host() {
    for who in identities() {
        let (store, victims, dir) = (Store::new(who), Victims::new(who), scratch());
        let layout = dir.path().join("whiteouts");
        hostile("whiteouts", &layout, &victims.file);
        let rec = store.imported(&layout, "wh");
        assert_eq!(rec["layers"], 2, "{rec}");
        victims.assert_untouched();
        let root = store.root_of("wh");
        assert!(root.join("keep/a").is_file());
        assert!(
            !root.join("gone/b").exists(),
            "a whiteout did not hide gone/b"
        );
        assert!(
            !root.join("opq/c").exists(),
            "an opaque dir kept a lower entry"
        );
        assert!(
            root.join("opq/d").is_file(),
            "an opaque dir lost its own layer's entry"
        );
    }
}

#[test]
fn set_id_bits_are_stripped_and_never_honoured() {
    for who in identities() {
        let (store, dir) = (Store::new(who), scratch());
        let layout = dir.path().join("setuid");
        hostile("setuid", &layout, &dir.path().join("none"));
        let rec = store.imported(&layout, "setuid");
        assert!(
            rec["report"]["setid_stripped"].as_u64().unwrap() >= 2,
            "{rec}"
        );
        let root = store.root_of("setuid");
        for f in ["usr/local/bin/suid-id", "usr/local/bin/sgid-id"] {
            let mode = std::fs::metadata(root.join(f)).unwrap().mode();
            assert_eq!(mode & 0o6000, 0, "{who:?} {f} kept a set-id bit: {mode:o}");
        }
        for flag in ["-u", "-g"] {
            let r = store.on_image(
                "exec",
                "setuid",
                &["--", "/usr/local/bin/suid-id", flag],
                "",
            );
            assert_eq!(r["stdout"], "1000\n", "{who:?} {flag}: {r}");
            let r = store.on_image(
                "exec",
                "setuid",
                &["--", "/usr/local/bin/sgid-id", flag],
                "",
            );
            assert_eq!(r["stdout"], "1000\n", "{who:?} {flag}: {r}");
        }
    }
}

#[test]
fn device_nodes_are_refused_outside_dev_and_dropped_under_it() {
    for who in identities() {
        let (store, dir) = (Store::new(who), scratch());
        let evil = dir.path().join("device.tar");
        hostile("device", &evil, &dir.path().join("none"));
        let before = store.roots();
        let out = store.import(&evil, "device", &[]);
        assert!(
            !out.status.success(),
            "{who:?}: a device node outside /dev was imported"
        );
        assert!(stderr(&out).contains("device node"), "{}", stderr(&out));
        store.assert_left_nothing(&before, "device");

        let ok = dir.path().join("dev_nodes.tar");
        hostile("dev_nodes", &ok, &dir.path().join("none"));
        let rec = store.imported(&ok, "devs");
        assert_eq!(rec["report"]["devices_dropped"], 2, "{rec}");
        let root = store.root_of("devs");
        for e in std::fs::read_dir(root.join("dev")).unwrap() {
            let t = e.unwrap().file_type().unwrap();
            assert!(
                !t.is_char_device() && !t.is_block_device(),
                "{who:?}: a device node was made"
            );
        }
    }
}

#[test]
fn a_hundred_thousand_files_are_bounded() {
    let dir = scratch();
    let tar = dir.path().join("many.tar");
    hostile("many", &tar, &dir.path().join("none"));
    for who in identities() {
        let store = Store::new(who);
        let before = store.roots();
        let out = store.import(&tar, "many", &["--max-entries", "20000"]);
        assert!(
            !out.status.success(),
            "{who:?}: over the entry bound, imported"
        );
        assert!(
            stderr(&out).contains("bound on entries (20000)"),
            "{}",
            stderr(&out)
        );
        store.assert_left_nothing(&before, "many");
    }
    // Under the default bound it is just a large image (rootless here; root writes the same
    // way), and removing it frees everything.
    let store = Store::new(identities().pop().unwrap());
    let rec = store.imported(&tar, "many");
    assert!(rec["entries"].as_u64().unwrap() >= 100_000, "{rec}");
    let out = store.image(&["rm", "many"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(store.roots().is_empty(), "rm left the root");
}

#[test]
fn a_tar_bomb_and_deep_or_long_paths_stop_at_their_bounds() {
    let dir = scratch();
    for kind in ["bomb", "deep", "long_name"] {
        hostile(kind, &dir.path().join(kind), &dir.path().join("none"));
    }
    for who in identities() {
        let store = Store::new(who);
        let before = store.roots();
        let t = Instant::now();
        let out = store.import(
            &dir.path().join("bomb"),
            "bomb",
            &["--max-bytes", "67108864"],
        );
        assert!(!out.status.success(), "{who:?}: the bomb was imported");
        assert!(stderr(&out).contains("bound on bytes"), "{}", stderr(&out));
        assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
        store.assert_left_nothing(&before, "bomb");
        for (kind, why) in [("deep", "nested deeper"), ("long_name", "longer than 255")] {
            let out = store.import(&dir.path().join(kind), kind, &[]);
            assert!(!out.status.success(), "{who:?}: {kind} was imported");
            assert!(stderr(&out).contains(why), "{kind}: {}", stderr(&out));
            store.assert_left_nothing(&before, kind);
        }
    }
}

#[test]
fn an_image_interpreter_starts_under_the_exec_filter() {
    for who in identities() {
        let (store, dir) = (Store::new(who), scratch());
        let layout = dir.path().join("interp");
        hostile("interp", &layout, &dir.path().join("none"));
        store.imported(&layout, "interp");
        let r = store.on_image(
            "run",
            "interp",
            &["-"],
            "import sys; print(sys.version_info[0])",
        );
        assert_eq!(status(&r), "completed", "{who:?}: {r}");
        assert_eq!(r["stdout"], "3\n");
        // What the image's python3 saw of itself before its first instruction.
        let seen = r["stderr"].as_str().unwrap();
        assert!(
            seen.contains("Seccomp:\t2"),
            "{who:?}: no filter before start-up: {seen}"
        );
        assert!(seen.contains("NoNewPrivs:\t1"), "{who:?}: {seen}");
        assert!(
            seen.contains("CapEff:\t0000000000000000"),
            "{who:?}: {seen}"
        );
    }
}
