//! What the pool and zygote suites share: the spec of a plain Python run and the isolation
//! attacks a run must withstand however its process came to be.
#![expect(
    clippy::unwrap_used,
    reason = "test support: a failed set-up is a failed test"
)]
use std::future::Future;
use std::path::PathBuf;

use airlock_broker::{Limits, RunResult, RunSpec, RunStatus, Workload};

pub fn executor() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_airlock-bench"))
}

pub fn spec(code: &str) -> RunSpec {
    RunSpec {
        workload: Workload::Python {
            code: code.into(),
            interpreter: None,
        },
        limits: Limits::default(),
        sandbox: None,
        image: None,
        cwd: None,
        env: Vec::new(),
        executor: executor(),
        output: None,
        restricted: None,
    }
}

pub fn completed(r: &RunResult) -> &str {
    assert_eq!(r.status, RunStatus::Completed, "{r:#?}");
    &r.stdout
}

/// The attacks a cold run withstands, each a run through `run`: unprivileged, filtered, pid 1
/// of its own namespace; no process creation; a forbidden syscall kills; host files neither
/// readable nor writable (content checked from the host), the host network unreachable (the
/// listener checked). `tag` names the files the attack tries to leave on the host.
pub async fn isolation_attacks<F, Fut>(run: F, tag: &str)
where
    F: Fn(RunSpec) -> Fut,
    Fut: Future<Output = RunResult>,
{
    let code = "import os\nst=open('/proc/self/status').read()\nprint([l for l in st.splitlines() if l.startswith(('CapEff','CapPrm','CapBnd','NoNewPrivs','Seccomp:'))])\nprint(os.getuid(), os.getpid())";
    let out = completed(&run(spec(code)).await).to_string();
    for want in ["CapEff:\\t0000000000000000", "CapPrm:\\t0000000000000000"] {
        assert!(out.contains(want), "{want} missing: {out}");
    }
    assert!(
        out.contains("NoNewPrivs:\\t1") && out.contains("Seccomp:\\t2"),
        "{out}"
    );
    assert!(out.contains("\n1000 1\n"), "{out}");

    let code = "import os, subprocess\nfor name, f in [('fork', os.fork), ('subprocess', lambda: subprocess.run(['/bin/true']))]:\n    try:\n        f(); print(name, 'ALLOWED')\n    except OSError as e:\n        print(name, 'denied', e.errno)";
    let out = completed(&run(spec(code)).await).to_string();
    assert_eq!(out.matches("denied").count(), 2, "{out}");

    let code = "import ctypes\nprint('before', flush=True)\nctypes.CDLL(None).ptrace(0, 0, 0, 0)\nprint('AFTER')";
    let r = run(spec(code)).await;
    assert_eq!(
        (r.status, r.signal, r.stdout.as_str()),
        (RunStatus::Killed, Some(31), "before\n")
    );

    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), "host-secret").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tmp, usr) = (
        format!("/tmp/airlock-{tag}-escape"),
        format!("/usr/lib/airlock-{tag}-escape"),
    );
    let code = format!(
        "import socket\nfor p in [{path:?}, '/etc/shadow']:\n    try:\n        print('READ', open(p).read())\n    except OSError as e:\n        print('denied')\nopen({tmp:?}, 'w').write('own /tmp')\ntry:\n    open({usr:?}, 'w'); print('WROTE')\nexcept OSError:\n    print('denied')\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2); print('CONNECTED')\nexcept OSError:\n    print('denied')",
        path = secret.path().display().to_string()
    );
    let out = completed(&run(spec(&code)).await).to_string();
    assert_eq!(out, "denied\ndenied\ndenied\ndenied\n", "{out}");
    assert!(
        listener.accept().is_err(),
        "the host listener got a connection"
    );
    for p in [&tmp, &usr] {
        assert!(
            !std::path::Path::new(p).exists(),
            "{p} was created on the host"
        );
    }
    assert_eq!(
        std::fs::read_to_string(secret.path()).unwrap(),
        "host-secret"
    );
}
