//! A sandbox that refuses everything fails these: ordinary programs must work.
use std::process::Command;

use super::support::*;

#[test]
fn prints_computes_and_exits_zero() {
    for who in identities() {
        let v = run_py(
            who,
            "import json, math\nprint(json.dumps({'x': math.factorial(10)}))",
            &[],
        );
        assert_completed(&v);
        assert_eq!(v["stdout"], "{\"x\": 3628800}\n");
        assert_eq!(v["exit_code"], 0);
        assert!(v["peak_rss_bytes"].as_u64().unwrap() > 1_000_000, "{v}");
        assert!(v["wall_time_ms"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn threads_work() {
    let code = "import threading\nout=[]\nts=[threading.Thread(target=out.append, args=(i,)) for i in range(8)]\n[t.start() for t in ts]\n[t.join() for t in ts]\nprint(sorted(out))";
    for who in identities() {
        let v = run_py(who, code, &[]);
        assert_completed(&v);
        assert_eq!(v["stdout"], "[0, 1, 2, 3, 4, 5, 6, 7]\n");
    }
}

#[test]
fn files_in_the_work_dir_are_read_write() {
    let code = "import os, tempfile\nopen('a.txt','w').write('hello')\nos.mkdir('d')\nopen('d/b','wb').write(b'x'*1000)\nwith tempfile.TemporaryFile() as f: f.write(b'ok')\nprint(open('a.txt').read(), os.path.getsize('d/b'), sorted(os.listdir('.')))";
    for who in identities() {
        let v = run_py(who, code, &[]);
        assert_completed(&v);
        assert_eq!(v["stdout"], "hello 1000 ['a.txt', 'd']\n");
    }
}

#[test]
fn files_move_in_and_out_with_put_and_get() {
    for who in identities() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("input.txt");
        let output = dir.path().join("out.txt");
        std::fs::write(&input, "41").unwrap();
        if who == As::User {
            let st = Command::new("chown")
                .args(["-R", &format!("{TEST_USER}:")])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(st.success());
        }
        let put = format!("{}=in/input.txt", input.display());
        let get = format!("out.txt={}", output.display());
        let v = run_py(
            who,
            "import os\nprint(os.getcwd())\nn=int(open('in/input.txt').read())\nopen('out.txt','w').write(str(n+1))",
            &["--put", &put, "--get", &get],
        );
        assert_completed(&v);
        assert_eq!(v["stdout"], "/work\n", "{v}");
        assert_eq!(std::fs::read_to_string(&output).unwrap(), "42");
        assert_eq!(std::fs::read_to_string(&input).unwrap(), "41");
    }
}

#[test]
fn exceptions_are_errors_with_a_traceback() {
    for who in identities() {
        let v = run_py(who, "def f():\n    raise ValueError('bad input')\nf()", &[]);
        assert_eq!(status(&v), "error", "{v}");
        assert_eq!(v["exit_code"], 1);
        let stderr = v["stderr"].as_str().unwrap();
        assert!(stderr.contains("ValueError: bad input"), "{v}");
        // The program's own frames with their source lines, none of the bootstrap's.
        assert!(
            stderr.contains("File \"main.py\", line 2, in f\n    raise ValueError('bad input')"),
            "{v}"
        );
        assert!(!stderr.contains("airlock-bootstrap"), "{v}");
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bad input"));
        let v = run_py(who, "import sys; sys.exit(3)", &[]);
        assert_eq!(status(&v), "error");
        assert_eq!(v["exit_code"], 3);
    }
}

#[test]
fn file_help_exit_and_input_behave_as_in_a_script() {
    for who in identities() {
        let v = run_py(
            who,
            "print(__file__)
help(len)
exit(4)",
            &[],
        );
        assert_eq!(v["exit_code"], 4, "{v}");
        let out = v["stdout"].as_str().unwrap();
        assert!(
            out.starts_with("main.py\nHelp on built-in function len"),
            "{v}"
        );
        let v = run_py(who, "input('name? ')", &[]);
        assert_eq!(status(&v), "error");
        let err = v["stderr"].as_str().unwrap();
        assert!(
            err.starts_with("Traceback (most recent call last):\n  File \"main.py\", line 1, in <module>\n")
                && err.ends_with("EOFError: stdin is closed: a sandboxed program gets no input (pass data in a file, an environment variable or a tool call)\n"),
            "{err}"
        );
    }
}

#[test]
fn a_tool_round_trip_returns_the_tool_json() {
    let code = "r = call_tool('add', {'a': 2, 'b': 40})\nprint(r['sum'])\ntry:\n    call_tool('nope', {})\nexcept ToolError as e:\n    print('refused', e.code)";
    let tool = "add=python3 -c 'import json,sys; a=json.load(sys.stdin); print(json.dumps({\"sum\": a[\"a\"]+a[\"b\"]}))'";
    for who in identities() {
        let v = run_py(who, code, &["--tool", tool]);
        assert_completed(&v);
        assert_eq!(v["stdout"], "42\nrefused -32013\n", "{v}");
        assert_eq!(v["tool_calls"], 2);
    }
}

#[test]
fn the_tool_call_cap_is_enforced() {
    let code = "n=0\nfor i in range(10):\n    try:\n        call_tool('echo', {'i': i}); n+=1\n    except ToolError as e:\n        last=e.code\nprint(n, last)";
    let v = run_py(
        As::Me,
        code,
        &["--tool", "echo=cat", "--max-tool-calls", "3"],
    );
    assert_completed(&v);
    assert_eq!(v["stdout"], "3 -32009\n", "{v}");
    assert_eq!(v["tool_calls"], 10);
}

#[test]
fn numpy_works_when_installed() {
    for who in identities() {
        let probe = run_py(
            who,
            "import importlib.util as u; print(u.find_spec('numpy') is not None)",
            &[],
        );
        assert_completed(&probe);
        if probe["stdout"] != "True\n" {
            assert!(
                std::env::var_os("AIRLOCK_REQUIRE_NUMPY").is_none(),
                "numpy is required by this run (AIRLOCK_REQUIRE_NUMPY) but not importable"
            );
            eprintln!("numpy not installed for {who:?}: skipped");
            continue;
        }
        let v = run_py(
            who,
            "import numpy as np\na=np.arange(12).reshape(3,4)\nprint(int((a@a.T).trace()))",
            &[],
        );
        assert_completed(&v);
        assert_eq!(v["stdout"], "506\n");
    }
}

#[test]
fn programs_from_stdin_and_files_both_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.py");
    std::fs::write(&file, "print('from file')").unwrap();
    let out = airlock(As::Me, &["run", file.to_str().unwrap()], "");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from file\n");
}

#[test]
fn each_run_gets_a_fresh_executor_and_work_dir() {
    // Every run sees an empty /work, /tmp and /dev/shm: nothing the previous run left is there.
    let code = "import os\nprint(os.getcwd(), os.getpid())\nprint([sorted(os.listdir(d)) for d in ('/work', '/tmp', '/dev/shm')])\nfor d in ('/work', '/tmp', '/dev/shm'):\n    open(d + '/left-behind', 'w').write('x')";
    for who in identities() {
        let a = run_py(who, code, &[]);
        let b = run_py(who, code, &[]);
        assert_completed(&a);
        assert_completed(&b);
        for v in [&a, &b] {
            assert_eq!(v["stdout"], "/work 1\n[[], [], []]\n", "{who:?}: {v}");
        }
    }
}

#[test]
fn tool_calls_from_many_threads_each_get_their_own_answer() {
    // call_tool is serialised in the guest (review #17): no thread swallows another's reply.
    let code = "import threading\nout = {}\ndef work(i):\n    out[i] = call_tool('echo', {'i': i})['i']\nts = [threading.Thread(target=work, args=(i,)) for i in range(20)]\n[t.start() for t in ts]\n[t.join() for t in ts]\nprint(all(out[i] == i for i in range(20)), len(out))";
    let v = run_py(As::Me, code, &["--tool", "echo=cat", "--timeout", "20"]);
    assert_completed(&v);
    assert_eq!(v["stdout"], "True 20\n", "{v}");
}
