//! Host files: private ones unreadable, everything outside the work dir unwritable, the broker's
//! environment invisible.
use std::os::unix::fs::MetadataExt;

use super::support::*;

fn try_read(path: &str) -> String {
    format!(
        "try:\n    print('READ', open({path:?}, 'rb').read(100))\nexcept OSError as e:\n    print('denied', e.errno)"
    )
}

/// What the sandbox's root may show under /etc: its own passwd/group/hosts and the public
/// files libc and matplotlib read (bound read-only).
const GUEST_ETC: [&str; 9] = [
    "alternatives",
    "group",
    "hosts",
    "ld.so.cache",
    "localtime",
    "matplotlibrc",
    "nsswitch.conf",
    "passwd",
    "ssl",
];

#[test]
fn sandbox_cannot_read_private_host_files() {
    for who in identities() {
        let secret = private_file(who, "the-host-secret");
        let secret = secret.to_str().unwrap();
        // A world-readable host file in the host's /tmp: the sandbox's /tmp is its own.
        let public = std::path::PathBuf::from(format!("/tmp/{}", marker("public")));
        std::fs::write(&public, "host-tmp-content").unwrap();
        for path in [
            secret,
            "/etc/shadow",
            "/etc/ssl/private/ssl-cert-snakeoil.key",
            "/root/.bashrc",
            "/home",
            public.to_str().unwrap(),
        ] {
            let v = run_py(who, &try_read(path), &[]);
            assert_completed(&v);
            let out = v["stdout"].as_str().unwrap();
            assert!(out.starts_with("denied"), "{who:?} read {path}: {out}");
        }
        // /etc/passwd is the sandbox's own: no host account is named in it.
        let v = run_py(who, "print(open('/etc/passwd').read())", &[]);
        assert_completed(&v);
        let passwd = v["stdout"].as_str().unwrap();
        assert!(passwd.contains("sandbox:x:1000"), "{passwd}");
        assert!(
            !passwd.contains(TEST_USER),
            "host accounts leaked: {passwd}"
        );
        let v = run_py(who, "import os, json\nout = {}\nfor d in ['/root', '/home', '/var', '/tmp', '/dev/shm', '/etc']:\n    try:\n        out[d] = sorted(os.listdir(d))\n    except OSError as e:\n        out[d] = e.errno\nprint(json.dumps(out))", &[]);
        assert_completed(&v);
        let seen: serde_json::Value =
            serde_json::from_str(v["stdout"].as_str().unwrap().trim()).unwrap();
        for d in ["/root", "/home", "/var"] {
            assert!(seen[d].is_number(), "{who:?} listed {d}: {seen}");
        }
        for d in ["/tmp", "/dev/shm"] {
            assert_eq!(
                seen[d],
                serde_json::json!([]),
                "{who:?}: {d} is not the sandbox's own"
            );
        }
        let etc: Vec<&str> = seen["/etc"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        assert!(
            etc.iter().all(|e| GUEST_ETC.contains(e)),
            "{who:?}: /etc shows {etc:?}"
        );
        std::fs::remove_file(secret).unwrap();
        std::fs::remove_file(&public).unwrap();
    }
}

#[test]
fn sandbox_cannot_write_outside_the_work_dir() {
    for who in identities() {
        let victim = private_file(who, "original");
        let victim_s = victim.to_str().unwrap();
        let before = std::fs::metadata(&victim).unwrap();
        let tag = marker("escape");
        // /tmp and /dev/shm exist in the sandbox (its own bounded tmpfs); writing there must
        // land nowhere on the host. Every other path is read-only or absent.
        let code = format!(
            "import os\nfor p in ['/tmp/{tag}', '/dev/shm/{tag}']:\n    open(p, 'w').write('pwned')\nfor p in [{victim_s:?}, '/var/tmp/{tag}', '/usr/lib/{tag}', '/etc/{tag}', '/{tag}']:\n    try:\n        open(p, 'w').write('pwned'); print('WROTE', p)\n    except OSError as e:\n        print('denied', e.errno)\ntry:\n    os.truncate({victim_s:?}, 0); print('TRUNCATED')\nexcept OSError as e:\n    print('denied', e.errno)\ntry:\n    os.symlink({victim_s:?}, 'link'); open('link','w').write('pwned'); print('WROTE via link')\nexcept OSError as e:\n    print('denied', e.errno)\ntry:\n    os.link({victim_s:?}, 'hard'); print('LINKED')\nexcept OSError as e:\n    print('denied', e.errno)"
        );
        let v = run_py(who, &code, &[]);
        assert_completed(&v);
        let out = v["stdout"].as_str().unwrap();
        assert!(
            !out.contains("WROTE") && !out.contains("TRUNCATED") && !out.contains("LINKED"),
            "{who:?}: {out}"
        );
        assert_eq!(out.matches("denied").count(), 8, "{who:?}: {out}");
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "original",
            "host file changed"
        );
        let after = std::fs::metadata(&victim).unwrap();
        assert_eq!(
            (
                before.mode(),
                before.uid(),
                before.gid(),
                before.mtime(),
                before.nlink()
            ),
            (
                after.mode(),
                after.uid(),
                after.gid(),
                after.mtime(),
                after.nlink()
            ),
            "host file metadata changed"
        );
        for dir in ["/tmp", "/var/tmp", "/dev/shm", "/usr/lib", "/etc", ""] {
            let p = format!("{dir}/{tag}");
            assert!(
                !std::path::Path::new(&p).exists(),
                "{p} was created on the host"
            );
        }
        std::fs::remove_file(victim).unwrap();
    }
}

#[test]
fn the_broker_environment_is_invisible() {
    // The test harness gives the broker AIRLOCK_TEST_BROKER_SECRET; the program must find it
    // neither in its own environment nor in any /proc/*/environ it can open.
    // CPython itself sets LC_CTYPE=C.UTF-8 under the C locale (PEP 538); that one is not inherited.
    let code = "import os\nenv=dict(os.environ)\nif env.get('LC_CTYPE') == 'C.UTF-8': del env['LC_CTYPE']\nprint(env)\nhits=[]\nfor p in os.listdir('/proc'):\n    if p.isdigit():\n        try:\n            if b'broker-secret' in open(f'/proc/{p}/environ','rb').read(): hits.append(p)\n        except OSError:\n            pass\nprint(hits)";
    for who in identities() {
        let v = run_py(who, code, &["--env", "VISIBLE=yes"]);
        assert_completed(&v);
        assert_eq!(v["stdout"], "{'VISIBLE': 'yes'}\n[]\n", "{v}");
    }
}

#[test]
fn the_program_cannot_signal_or_see_host_processes() {
    let me = std::process::id();
    let code = format!("import os\ntry:\n    os.kill({me}, 0); print('SIGNALLED')\nexcept OSError as e:\n    print('denied', e.errno)\nprint(os.path.exists('/proc/{me}'))");
    for who in identities() {
        let v = run_py(who, &code, &[]);
        assert_completed(&v);
        assert_eq!(v["stdout"], "denied 3\nFalse\n", "{v}");
    }
}
