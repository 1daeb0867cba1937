//! A compromised guest speaking garbage on its socket gets a protocol error, promptly, and
//! nothing survives; a forged "completed" does not end supervision early.
use super::support::*;

fn assert_protocol_error(who: As, code: &str) {
    let _only = exclusive();
    let v = run_py(who, code, &["--timeout", "20"]);
    assert_eq!(status(&v), "protocol_error", "{v}");
    assert_eq!(v["error"]["code"], -32005);
    assert!(
        v["wall_time_ms"].as_f64().unwrap() < 10_000.0,
        "not prompt: {v}"
    );
    let left = run_survivors(&marker("none"));
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_garbage_frame_is_a_protocol_error() {
    for who in identities() {
        assert_protocol_error(
            who,
            "import os, time\nos.write(3, b'hello there\\r\\n\\r\\n')\ntime.sleep(30)",
        );
    }
}

#[test]
fn an_oversized_frame_is_a_protocol_error() {
    for who in identities() {
        assert_protocol_error(who, "import os, time\nos.write(3, b'Content-Length: 99999999999\\r\\n\\r\\n')\ntime.sleep(30)");
    }
}

#[test]
fn an_endless_header_is_a_protocol_error() {
    for who in identities() {
        assert_protocol_error(
            who,
            "import os, time\nos.write(3, b'X-Pad: ' + b'a' * 100000)\ntime.sleep(30)",
        );
    }
}

#[test]
fn invalid_json_in_a_valid_frame_is_a_protocol_error() {
    for who in identities() {
        assert_protocol_error(
            who,
            "import os, time\nos.write(3, b'Content-Length: 5\\r\\n\\r\\n{nope')\ntime.sleep(30)",
        );
    }
}

#[test]
fn a_forged_completed_does_not_end_supervision_early() {
    for who in identities() {
        let _only = exclusive();
        // Report success for the execute request, then keep running (and writing output).
        let code = "import os, json\nbody=json.dumps({'jsonrpc':'2.0','id':1,'result':{'status':'completed','exit_code':0}}).encode()\nos.write(3, b'Content-Length: %d\\r\\n\\r\\n' % len(body) + body)\nwhile True:\n    pass";
        let v = run_py(who, code, &["--timeout", "20"]);
        assert_eq!(status(&v), "killed", "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("did not exit"),
            "{v}"
        );
        assert!(v["wall_time_ms"].as_f64().unwrap() < 10_000.0, "{v}");
        let left = run_survivors(&marker("none"));
        assert!(left.is_empty(), "{left:?}");
    }
}

#[test]
fn closing_the_socket_mid_run_still_yields_one_result() {
    for who in identities() {
        let v = run_py(who, "import os\nos.close(3)\nprint('closed')", &[]);
        // The guest can no longer report; the OS exit status decides.
        assert_eq!(status(&v), "error", "{v}");
        assert_eq!(v["stdout"], "closed\n");
    }
}

#[test]
fn a_program_cannot_forge_a_refusal() {
    // Once code runs, a `refused` notification on the socket is the program lying about the
    // sandbox (review #14): it must not surface as "the host lacks a layer".
    let code = "import os, json\nb=json.dumps({'jsonrpc':'2.0','method':'refused','params':{'layer':'landlock','message':'FORGED'}}).encode()\nos.write(3, b'Content-Length: %d\\r\\n\\r\\n' % len(b) + b)\nprint('still running')";
    for who in identities() {
        let v = run_py(who, code, &[]);
        assert_eq!(status(&v), "protocol_error", "{v}");
        assert!(
            !v["error"]["message"].as_str().unwrap().contains("FORGED"),
            "{v}"
        );
    }
}
