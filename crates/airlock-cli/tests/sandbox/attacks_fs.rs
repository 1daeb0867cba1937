//! Host files: private ones unreadable, everything outside the work dir unwritable, the broker's
//! environment invisible.
use super::support::*;

fn try_read(path: &str) -> String {
    format!(
        "try:\n    print('READ', open({path:?}, 'rb').read(100))\nexcept OSError as e:\n    print('denied', e.errno)"
    )
}

#[test]
fn sandbox_cannot_read_private_host_files() {
    for who in identities() {
        let secret = private_file(who, "the-host-secret");
        let secret = secret.to_str().unwrap();
        for path in [
            secret,
            "/etc/shadow",
            "/etc/passwd",
            "/root/.bashrc",
            "/home",
        ] {
            let v = run_py(who, &try_read(path), &[]);
            assert_completed(&v);
            let out = v["stdout"].as_str().unwrap();
            assert!(out.starts_with("denied"), "{who:?} read {path}: {out}");
        }
        let v = run_py(who, "import os\nfor d in ['/root', '/home', '/tmp', '/var', '/etc']:\n    try:\n        print(d, os.listdir(d))\n    except OSError as e:\n        print(d, 'denied')", &[]);
        assert_completed(&v);
        let out = v["stdout"].as_str().unwrap();
        assert_eq!(out.matches("denied").count(), 5, "{who:?}: {out}");
        std::fs::remove_file(secret).unwrap();
    }
}

#[test]
fn sandbox_cannot_write_outside_the_work_dir() {
    for who in identities() {
        let victim = private_file(who, "original");
        let victim_s = victim.to_str().unwrap();
        let code = format!(
            "import os\nfor p in [{victim_s:?}, '/tmp/airlock-escape', '/var/tmp/airlock-escape', '/dev/shm/airlock-escape', '/usr/lib/airlock-escape']:\n    try:\n        open(p, 'w').write('pwned'); print('WROTE', p)\n    except OSError as e:\n        print('denied', e.errno)\ntry:\n    os.truncate({victim_s:?}, 0); print('TRUNCATED')\nexcept OSError as e:\n    print('denied', e.errno)\ntry:\n    os.symlink({victim_s:?}, 'link'); open('link','w').write('pwned'); print('WROTE via link')\nexcept OSError as e:\n    print('denied', e.errno)\ntry:\n    os.link({victim_s:?}, 'hard'); print('LINKED')\nexcept OSError as e:\n    print('denied', e.errno)"
        );
        let v = run_py(who, &code, &[]);
        assert_completed(&v);
        let out = v["stdout"].as_str().unwrap();
        assert!(
            !out.contains("WROTE") && !out.contains("TRUNCATED") && !out.contains("LINKED"),
            "{who:?}: {out}"
        );
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "original",
            "host file changed"
        );
        for p in [
            "/tmp/airlock-escape",
            "/var/tmp/airlock-escape",
            "/dev/shm/airlock-escape",
        ] {
            assert!(!std::path::Path::new(p).exists(), "{p} was created");
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
