//! The restricted language profile (`"restricted": true`, configured by policy.toml's
//! `[restricted_profile]`): its refusals, and the known escape of it (the `__subclasses__`
//! walk) contained by the OS layers. Run as root and as `airlock-test`; containment is asserted
//! by external evidence (a host file's content, mode and times; a host listener).
use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

use serde_json::{json, Value};

use super::support::*;

const IDENTITIES: [Option<&str>; 2] = [None, Some("airlock-test")];

async fn restricted(c: &mut WsClient, stateful: bool) -> String {
    let spec = json!({"restricted": true, "stateful": stateful, "limits": {"timeout_s": 20}});
    let r = c.call("sandbox.create", json!({ "spec": spec })).await;
    result_of(&r)["sandbox_id"].as_str().unwrap().to_string()
}

async fn run(c: &mut WsClient, sid: &str, code: &str) -> Value {
    let r = c
        .call("sandbox.run_code", json!({"sandbox_id": sid, "code": code}))
        .await;
    result_of(&r).clone()
}

const REFUSALS: &str = r#"
for mod in ("os", "os.path", "subprocess", "ctypes", "socket", "importlib"):
    try:
        __import__(mod)
        print('ALLOWED', mod)
    except ImportError as e:
        print(e)
for f in (lambda: open('x'), lambda: eval('1'), lambda: exec('1'), lambda: getattr(1, 'real'),
          lambda: globals()):
    try:
        f()
        print('ALLOWED')
    except NameError as e:
        print(e)
import json, math
print(json.dumps([math.floor(2.5), sorted({3, 1})]), isinstance(ValueError(), Exception))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_restricted_profile_refuses_with_clear_errors_and_keeps_the_safe_core() {
    for who in IDENTITIES {
        let server = WsServer::start_as(who, &[]);
        let mut c = server.connect().await;
        for stateful in [false, true] {
            let sid = restricted(&mut c, stateful).await;
            let r = run(&mut c, &sid, REFUSALS).await;
            assert_eq!(r["status"], "completed", "{who:?} {r}");
            assert_eq!(
                r["stdout"],
                "import of 'os' is blocked by the restricted profile\n\
                 import of 'os.path' is blocked by the restricted profile\n\
                 import of 'subprocess' is blocked by the restricted profile\n\
                 import of 'ctypes' is blocked by the restricted profile\n\
                 import of 'socket' is blocked by the restricted profile\n\
                 import of 'importlib' is blocked by the restricted profile\n\
                 'open' is not available in the restricted profile\n\
                 'eval' is not available in the restricted profile\n\
                 'exec' is not available in the restricted profile\n\
                 'getattr' is not available in the restricted profile\n\
                 'globals' is not available in the restricted profile\n\
                 [2, [1, 3]] True\n",
                "{who:?} stateful={stateful} {r}"
            );
            // The statement forms give the same refusal.
            let r = run(&mut c, &sid, "from os import path").await;
            assert!(
                r["stderr"].as_str().unwrap().ends_with(
                    "ImportError: import of 'os' is blocked by the restricted profile\n"
                ),
                "{r}"
            );
        }
        // A sandbox that did not opt in is unrestricted.
        let r = c.call("sandbox.create", json!({"spec": {}})).await;
        let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_string();
        let r = run(&mut c, &sid, "import os\nprint(os.getcwd())").await;
        assert_eq!(r["stdout"], "/work\n", "{r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_known_escape_of_the_profile_is_contained_by_the_os_layers() {
    for who in IDENTITIES {
        // A host file the sandbox must not read or change, readable by the server's user.
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let secret = dir.path().join("secret.txt");
        std::fs::write(&secret, "host secret\n").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
        let before = std::fs::metadata(&secret).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let path = secret.display();
        let code = format!(
            r#"
walk = ().__class__.__base__.__subclasses__()
wrap = [c for c in walk if c.__name__ == '_wrap_close'][0]
osg = wrap.__init__.__globals__
print('escaped the profile:', osg['__name__'])
def attempt(what, f):
    try:
        print(what, 'SUCCEEDED', f())
    except BaseException as e:
        print(what, 'failed', type(e).__name__)
attempt('read', lambda: osg['read'](osg['open']('{path}', osg['O_RDONLY']), 100))
attempt('write', lambda: osg['open']('{path}', osg['O_WRONLY'] | osg['O_TRUNC']))
attempt('chmod', lambda: osg['chmod']('{path}', 0o777))
attempt('shadow', lambda: osg['open']('/etc/shadow', osg['O_RDONLY']))
attempt('spawn', lambda: osg['posix_spawn']('/bin/sh', ['sh', '-c', 'echo x > {path}'], {{}}))
imp = osg['sys'].modules['builtins'].__import__
attempt('connect', lambda: imp('socket').create_connection(('127.0.0.1', {port}), timeout=2))
"#
        );
        let server = WsServer::start_as(who, &[]);
        let mut c = server.connect().await;
        let sid = restricted(&mut c, false).await;
        let r = run(&mut c, &sid, &code).await;
        assert_eq!(r["status"], "completed", "{who:?} {r}");
        assert_eq!(
            r["stdout"],
            "escaped the profile: os\nread failed FileNotFoundError\nwrite failed FileNotFoundError\n\
             chmod failed FileNotFoundError\nshadow failed FileNotFoundError\n\
             spawn failed PermissionError\nconnect failed PermissionError\n",
            "{who:?} {r}"
        );
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            listener.accept().is_err(),
            "the host listener got a connection"
        );
        let after = std::fs::metadata(&secret).unwrap();
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "host secret\n");
        assert_eq!(
            (
                after.mode(),
                after.uid(),
                after.gid(),
                after.mtime(),
                after.mtime_nsec(),
                after.ctime_nsec()
            ),
            (
                before.mode(),
                before.uid(),
                before.gid(),
                before.mtime(),
                before.mtime_nsec(),
                before.ctime_nsec()
            )
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn policy_toml_configures_the_profile() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "floor = \"container\"\n[restricted_profile]\nbuiltins = [\"print\", \"len\"]\nblocked_imports = [\"json\"]\n",
    )
    .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&policy, std::fs::Permissions::from_mode(0o644)).unwrap();
    let server = WsServer::start(&["--policy", policy.to_str().unwrap()]);
    let mut c = server.connect().await;
    let sid = restricted(&mut c, false).await;
    let code = "print(len('abc'))\nimport os\nprint(os.sep)\ntry:\n    import json\nexcept ImportError as e:\n    print(e)\ntry:\n    sorted([2, 1])\nexcept NameError as e:\n    print(e)";
    let r = run(&mut c, &sid, code).await;
    assert_eq!(
        r["stdout"],
        "3\n/\nimport of 'json' is blocked by the restricted profile\n'sorted' is not available in the restricted profile\n",
        "{r}"
    );
}
