//! `closed` (the default) stays exactly as it was: no sockets, no proxy, no proxy variables.
use crate::support::*;

#[test]
fn closed_mode_has_no_sockets_and_no_proxy() {
    let code = "import os, socket\nprint(os.environ.get('HTTP_PROXY'))\n\
                try:\n    socket.socket(socket.AF_INET, socket.SOCK_STREAM); print('opened')\n\
                except OSError as e:\n    print('denied', e.errno)\n";
    for who in identities() {
        let v = run_py(who, code, &[]);
        assert_completed(&v);
        assert_eq!(v["stdout"], "None\ndenied 1\n", "{v:#}");
        assert_eq!(v["egress"], serde_json::json!([]));
    }
}

#[test]
fn egress_flags_without_an_allowlist_are_refused() {
    let out = airlock(
        As::Me,
        &["run", "--json", "--deny-host", "evil.example", "-"],
        "print(1)",
    );
    assert!(!out.status.success());
    // With --json a usage error is one JSON object on stdout, an invalid_params error.
    let refusal = |out: &std::process::Output| -> serde_json::Value {
        serde_json::from_slice(&out.stdout).expect("one JSON object on stdout")
    };
    let v = refusal(&out);
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("only apply with --allow-host"));
    let out = airlock(
        As::Me,
        &["run", "--json", "--allow-host", "*", "-"],
        "print(1)",
    );
    assert!(!out.status.success());
    let v = refusal(&out);
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("bad host rule"));
}
