//! Stateful sandboxes (`"stateful": true`): one kernel serves every `run_code`, held to
//! docs/server.md ("Stateful sandboxes") and docs/threat-model.md. State, interrupts, kills,
//! memory, fork, asyncio, rich output, the shared filesystem, the stop between cells, disposal;
//! every test runs the server as root and as `airlock-test`, and asserts by external evidence
//! (the results, the host's /proc, the host's files).
use std::time::Duration;

use serde_json::{json, Value};

use super::support::*;

/// The identities the tests run the server as.
const IDENTITIES: [Option<&str>; 2] = [None, Some("airlock-test")];

async fn stateful(c: &mut WsClient, extra: Value) -> String {
    let mut spec = json!({"stateful": true, "limits": {"timeout_s": 20}});
    if let (Value::Object(s), Value::Object(e)) = (&mut spec, extra) {
        s.extend(e);
    }
    let r = c.call("sandbox.create", json!({ "spec": spec })).await;
    result_of(&r)["sandbox_id"].as_str().unwrap().to_string()
}

/// A server run as `who`, a connection, and a stateful sandbox with `extra` spec members.
async fn open(who: Option<&str>, extra: Value) -> (WsServer, WsClient, String) {
    let server = WsServer::start_as(who, &[]);
    let mut c = server.connect().await;
    let sid = stateful(&mut c, extra).await;
    (server, c, sid)
}

async fn cell(c: &mut WsClient, sid: &str, code: &str) -> Value {
    cell_with(c, sid, code, json!({})).await
}

async fn cell_with(c: &mut WsClient, sid: &str, code: &str, extra: Value) -> Value {
    let mut p = json!({"sandbox_id": sid, "code": code});
    if let (Value::Object(m), Value::Object(e)) = (&mut p, extra) {
        m.extend(e);
    }
    let r = c.call("sandbox.run_code", p).await;
    result_of(&r).clone()
}

/// The host pids of the server's kernel processes (not the stage that supervises each) and
/// their states (`R`, `S`, `T`, ...).
fn kernel_states(server_pid: i32) -> Vec<(i32, char)> {
    descendants(server_pid)
        .into_iter()
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            !cmdline.windows(10).any(|w| w == b"__executor")
        })
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let state = stat.rsplit_once(") ")?.1.chars().next()?;
            Some((pid, state))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn state_survives_a_hundred_calls_and_each_call_has_its_own_output() {
    for who in IDENTITIES {
        let (server, mut c, sid) = open(who, json!({})).await;
        let r = cell(&mut c, &sid, "import math\nn = 0\nclass Box:\n    items = []\ndef bump():\n    n_ = globals()['n'] + 1\n    globals()['n'] = n_\n    Box.items.append(n_)\n    return n_").await;
        assert_eq!(r["status"], "completed", "{r}");
        let first = kernel_states(server.pid());
        for i in 1..=100 {
            let r = cell(&mut c, &sid, "print('call', bump())\nlen(Box.items)").await;
            assert_eq!(r["status"], "completed", "{who:?} {r}");
            assert_eq!(r["stdout"], format!("call {i}\n"), "{who:?} {r}");
            assert_eq!(r["value"], json!({"repr": i.to_string(), "json": i}), "{r}");
            assert!(r.get("kernel_restarted").is_none(), "{r}");
        }
        // One kernel served every call: the same processes as after the first.
        let pids = |v: &[(i32, char)]| v.iter().map(|p| p.0).collect::<Vec<_>>();
        assert_eq!(pids(&kernel_states(server.pid())), pids(&first));
        let r = cell(&mut c, &sid, "math.isqrt(1000), Box.items[-1]").await;
        assert_eq!(
            r["value"],
            json!({"repr": "(31, 100)", "json": [31, 100]}),
            "{r}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timeout_interrupts_the_cell_and_keeps_the_state() {
    for who in IDENTITIES {
        let (_server, mut c, sid) = open(who, json!({})).await;
        cell(&mut c, &sid, "x = 42").await;
        let code = "import time\nprint('looping', flush=True)\nwhile True:\n    time.sleep(0.05)";
        let r = cell_with(&mut c, &sid, code, json!({"timeout_s": 1})).await;
        assert_eq!(r["status"], "timeout", "{r}");
        assert_eq!(r["stdout"], "looping\n");
        let err = r["stderr"].as_str().unwrap();
        assert!(
            err.contains("File \"<cell 2>\", line 4, in <module>")
                && err.ends_with("KeyboardInterrupt\n"),
            "{err}"
        );
        assert!(r.get("kernel_restarted").is_none(), "{r}");
        let r = cell(&mut c, &sid, "x").await;
        assert_eq!(r["value"]["json"], 42, "{who:?} {r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ignored_interrupt_is_killed_past_the_grace_and_the_result_says_the_state_is_lost() {
    for who in IDENTITIES {
        let (server, mut c, sid) = open(who, json!({})).await;
        cell(
            &mut c,
            &sid,
            "x = 42\nopen('kept.txt', 'w').write('files stay')",
        )
        .await;
        let old = kernel_states(server.pid());
        assert!(!old.is_empty());
        let code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.05)";
        let r = cell_with(&mut c, &sid, code, json!({"timeout_s": 1})).await;
        assert_eq!(r["status"], "timeout", "{r}");
        assert_eq!(r["kernel_restarted"], true, "{r}");
        // Every process of the old kernel is gone before the answer.
        // (Dead: gone, or a zombie its new parent has yet to reap.)
        for (pid, _) in &old {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
            assert!(
                matches!(state, None | Some('Z')),
                "kernel process {pid} survived: {stat}"
            );
        }
        assert!(
            descendants(server.pid()).is_empty(),
            "{:?}",
            kernel_states(server.pid())
        );
        let r = cell(&mut c, &sid, "print(open('kept.txt').read())\nx").await;
        assert_eq!(r["stdout"], "files stay\n", "{r}");
        assert!(
            r["stderr"]
                .as_str()
                .unwrap()
                .ends_with("NameError: name 'x' is not defined\n"),
            "{r}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_interrupts_a_cell_and_keeps_the_state() {
    for who in IDENTITIES {
        let (_server, mut c, sid) = open(who, json!({})).await;
        cell(&mut c, &sid, "x = 7").await;
        let code = "import time\nprint('started', flush=True)\ntime.sleep(60)";
        let id = c
            .request(
                "sandbox.run_code",
                json!({"sandbox_id": sid, "code": code, "stream": true}),
            )
            .await;
        loop {
            let m = c.recv().await.expect("connection open");
            if m["method"] == "output" {
                break;
            }
        }
        let r = c.call("run.cancel", json!({"sandbox_id": sid})).await;
        result_of(&r);
        let (resp, _) = c.wait_for(id, &no_tools).await;
        let res = result_of(&resp);
        assert_eq!(res["status"], "cancelled", "{res}");
        assert!(res.get("kernel_restarted").is_none(), "{res}");
        let r = cell(&mut c, &sid, "x * 6").await;
        assert_eq!(r["value"]["json"], 42, "{who:?} {r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_memory_bomb_ends_the_kernel_and_fork_stays_denied_inside_it() {
    for who in IDENTITIES {
        let server = WsServer::start_as(who, &[]);
        let mut c = server.connect().await;
        let sid = stateful(
            &mut c,
            json!({"limits": {"timeout_s": 20, "memory_mb": 256}}),
        )
        .await;
        cell(&mut c, &sid, "x = 1").await;
        let r = cell(&mut c, &sid, "import os\ntry:\n    os.fork()\n    print('FORKED')\nexcept OSError as e:\n    print('fork denied', e.errno)\nx").await;
        assert_eq!(r["stdout"], "fork denied 1\n", "{r}");
        assert_eq!(
            r["value"]["json"], 1,
            "the kernel survived a denied fork: {r}"
        );
        let r = cell(
            &mut c,
            &sid,
            "hog = []\nwhile True:\n    hog.append(bytearray(8 << 20))",
        )
        .await;
        assert_eq!(r["status"], "memory_limit", "{who:?} {r}");
        assert_eq!(r["kernel_restarted"], true, "{r}");
        assert!(
            descendants(server.pid()).is_empty(),
            "{:?}",
            kernel_states(server.pid())
        );
        let r = cell(&mut c, &sid, "'x' in globals()").await;
        assert_eq!(r["value"]["json"], false, "{r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn between_cells_the_kernel_is_stopped_and_uses_no_cpu() {
    for who in IDENTITIES {
        let (server, mut c, sid) = open(who, json!({})).await;
        let code = "import threading, time\nticks = [0]\ndef spin():\n    while True:\n        ticks[0] += 1\n        time.sleep(0.01)\nthreading.Thread(target=spin, daemon=True).start()\ntime.sleep(0.2)\nticks[0] > 0";
        let r = cell(&mut c, &sid, code).await;
        assert_eq!(r["value"]["json"], true, "{r}");
        let states = kernel_states(server.pid());
        assert!(
            !states.is_empty() && states.iter().all(|(_, s)| *s == 'T'),
            "{states:?}"
        );
        let before = cell(&mut c, &sid, "ticks[0]").await["value"]["json"]
            .as_i64()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(600)).await;
        let after = cell(&mut c, &sid, "ticks[0]").await["value"]["json"]
            .as_i64()
            .unwrap();
        // 600 ms at 100 ticks/s would be ~60 ticks; stopped, only the cell's own few ms count.
        assert!(
            after - before < 10,
            "{who:?}: the thread ran between cells ({before} -> {after})"
        );
    }
}

/// A cell that arranges for its own kernel to be resumed while it is stopped: a POSIX timer
/// whose signal is `SIGCONT` (handled, so the timer keeps firing), and a spinning thread.
const SELF_RESUME: &str = r#"
import ctypes, threading, signal
signal.signal(signal.SIGCONT, lambda *a: None)
libc = ctypes.CDLL(None, use_errno=True)
class sigevent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int), ("pad", ctypes.c_byte * 48)]
class timespec(ctypes.Structure):
    _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
class itimerspec(ctypes.Structure):
    _fields_ = [("interval", timespec), ("value", timespec)]
tid = ctypes.c_void_p()
assert libc.timer_create(1, ctypes.byref(sigevent(None, 18, 0)), ctypes.byref(tid)) == 0
its = itimerspec(timespec(0, 20_000_000), timespec(0, 20_000_000))
assert libc.timer_settime(tid, 0, ctypes.byref(its), None) == 0
ticks = [0]
def spin():
    while True:
        ticks[0] += 1
threading.Thread(target=spin, daemon=True).start()
'armed'
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_kernel_that_resumes_itself_between_cells_is_ended_and_the_next_cell_says_so() {
    for who in IDENTITIES {
        let (server, mut c, sid) = open(who, json!({})).await;
        let r = cell(&mut c, &sid, SELF_RESUME).await;
        // Two ends, both the kernel's: it answers and the guard finds it running between cells
        // (the next cell says so); or, on a loaded host where its 20 ms timer resumes it before
        // the broker sees every thread stopped, this very cell says it could not be stopped.
        let stopped = r["value"]["json"] == "armed";
        if !stopped {
            assert_eq!(r["kernel_restarted"], true, "{who:?}: {r}");
            let why = r["error"]["message"].as_str().unwrap_or_default();
            assert!(why.contains("could not be stopped"), "{who:?}: {r}");
        }
        let old = kernel_states(server.pid());
        // The guard looks every 20 ms: within a moment the resumed kernel is gone.
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            old.iter().all(|(pid, _)| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                matches!(
                    stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next()),
                    None | Some('Z')
                )
            })
        });
        assert!(
            gone,
            "{who:?}: the self-resuming kernel kept running: {:?}",
            kernel_states(server.pid())
        );
        let r = cell(&mut c, &sid, "'ticks' in globals()").await;
        assert_eq!(r["value"]["json"], false, "{r}");
        if stopped {
            assert_eq!(r["kernel_restarted"], true, "{r}");
        }
        // The fresh kernel serves on.
        let r = cell(&mut c, &sid, "6 * 7").await;
        assert_eq!(r["value"]["json"], 42, "{r}");
        assert!(r.get("kernel_restarted").is_none(), "{r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_populated_as_the_answer_leaves_ends_the_kernel() {
    // A helper thread sends the cell's answer while the main thread is still inside a system
    // call that populates 400 MiB: the stop waits for the call, then the memory is checked.
    let code = r#"
import ctypes, sys, threading, time
f = sys._getframe()
while 'rid' not in f.f_locals:   # the kernel loop's frame holds this cell's request id
    f = f.f_back
RID = f.f_locals['rid']
send = call_tool.__globals__['_send']
def answer_early():
    time.sleep(0.05)
    send({'jsonrpc': '2.0', 'id': RID, 'result': {'status': 'completed', 'exit_code': 0}})
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
threading.Thread(target=answer_early, daemon=True).start()
p = libc.mmap(None, 400 << 20, 3, 0x22 | 0x8000, -1, 0)   # PROT_RW, PRIVATE|ANON|POPULATE
time.sleep(5)
"#;
    for who in IDENTITIES {
        let (server, mut c, sid) =
            open(who, json!({"limits": {"timeout_s": 20, "memory_mb": 128}})).await;
        // The cell's own request id, read from the frame the bootstrap is handling.
        let find_id = "import sys
f = sys._getframe()
while f and 'rid' not in f.f_locals:
    f = f.f_back
RID = f.f_locals['rid'] if f else None
RID is not None";
        let r = cell(&mut c, &sid, find_id).await;
        assert_eq!(r["value"]["json"], true, "{r}");
        let r = cell(
            &mut c,
            &sid,
            &format!(
                "RID = sys._getframe().f_back.f_locals.get('rid', RID)
{code}"
            ),
        )
        .await;
        assert_eq!(r["status"], "memory_limit", "{who:?} {r}");
        assert_eq!(r["kernel_restarted"], true, "{r}");
        assert!(settle(server.pid(), Duration::from_secs(5)).is_empty());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cell_cannot_forge_the_answer_of_the_next() {
    // After its own answer, a cell's thread writes answers for the ids the next cell might
    // have; cell ids carry 64 random bits, so none matches and the forged frame is a protocol
    // violation of the next cell, never its result.
    let forge = r#"
import threading, time
send = call_tool.__globals__['_send']
def later():
    time.sleep(0.2)
    for rid in (2, '2', 'cell-2', 'cell-2-0000000000000000'):
        send({'jsonrpc': '2.0', 'id': rid, 'result': {'status': 'completed', 'exit_code': 0, 'value': {'repr': 'FORGED', 'json': 'FORGED'}}})
threading.Thread(target=later, daemon=True).start()
"#;
    for who in IDENTITIES {
        let (_server, mut c, sid) = open(who, json!({})).await;
        cell(&mut c, &sid, forge).await;
        // The thread runs only while a cell does (the kernel is stopped between cells).
        let mut statuses = Vec::new();
        for _ in 0..3 {
            let r = cell(&mut c, &sid, "import time\ntime.sleep(0.3)\n'real'").await;
            assert_ne!(r["value"]["json"], "FORGED", "{who:?} {r}");
            statuses.push(r["status"].as_str().unwrap().to_owned());
        }
        // The forged frames landed in one of those cells and ended its kernel.
        assert!(
            statuses.iter().any(|s| s == "protocol_error"),
            "{statuses:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn exec_and_files_share_the_kernels_filesystem_not_its_interpreter() {
    for who in IDENTITIES {
        let (_server, mut c, sid) = open(who, json!({})).await;
        cell(
            &mut c,
            &sid,
            "secret = 'in-memory'\nopen('from_cell.txt', 'w').write('cell wrote')",
        )
        .await;
        let argv = json!([
            "/usr/bin/python3",
            "-c",
            "print(open('from_cell.txt').read(), 'secret' in globals())"
        ]);
        let r = c
            .call("sandbox.exec", json!({"sandbox_id": sid, "argv": argv}))
            .await;
        assert_eq!(result_of(&r)["stdout"], "cell wrote False\n", "{r}");
        let data = b64(b"host wrote");
        result_of(
            &c.call(
                "files.write",
                json!({"sandbox_id": sid, "path": "in.txt", "data": data}),
            )
            .await,
        );
        let r = cell(&mut c, &sid, "open('in.txt').read() + ' / ' + secret").await;
        assert_eq!(r["value"]["json"], "host wrote / in-memory", "{who:?} {r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn asyncio_and_top_level_await_work_in_a_kernel() {
    for who in IDENTITIES {
        let (_server, mut c, sid) = open(who, json!({})).await;
        let code = "import asyncio\nq = asyncio.Queue()\nasync def put(n):\n    await asyncio.sleep(0.01)\n    await q.put(n)\nawait asyncio.gather(*(put(n) for n in range(4)))\nsorted([q.get_nowait() for _ in range(4)])";
        let r = cell(&mut c, &sid, code).await;
        assert_eq!(r["value"]["json"], json!([0, 1, 2, 3]), "{who:?} {r}");
        let r = cell(
            &mut c,
            &sid,
            "async def twice(n):\n    await asyncio.sleep(0)\n    return 2 * n\nawait twice(21)",
        )
        .await;
        assert_eq!(r["value"]["json"], 42, "{r}");
        let r = cell(
            &mut c,
            &sid,
            "p = await asyncio.create_subprocess_exec('/bin/true')",
        )
        .await;
        assert!(
            r["stderr"].as_str().unwrap().contains("PermissionError"),
            "{r}"
        );
        let r = cell(&mut c, &sid, "asyncio.run(twice(5))").await;
        assert_eq!(r["value"]["json"], 10, "{r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tracebacks_show_the_cells_source_and_no_airlock_frames() {
    for who in IDENTITIES {
        let (_server, mut c, sid) = open(who, json!({})).await;
        cell(&mut c, &sid, "def ratio(x):\n    return 10 / x\n").await;
        let r = cell(&mut c, &sid, "print('before')\nratio(0)").await;
        assert_eq!(r["status"], "error");
        assert_eq!(
            r["stderr"],
            "Traceback (most recent call last):\n  File \"<cell 2>\", line 2, in <module>\n    ratio(0)\n  File \"<cell 1>\", line 2, in ratio\n    return 10 / x\n           ~~~^~~\nZeroDivisionError: division by zero\n",
            "{who:?} {r}"
        );
        let r = cell(&mut c, &sid, "print(__file__)\nhelp(len)\nexit(3)").await;
        assert_eq!(r["exit_code"], 3, "{r}");
        assert!(
            r["stdout"]
                .as_str()
                .unwrap()
                .starts_with("main.py\nHelp on built-in function len"),
            "{r}"
        );
        let r = cell(&mut c, &sid, "input('? ')").await;
        assert!(r["stderr"].as_str().unwrap().ends_with("EOFError: stdin is closed: a sandboxed program gets no input (pass data in a file, an environment variable or a tool call)\n"), "{r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_matplotlib_figure_comes_back_as_a_png() {
    for who in IDENTITIES {
        let (_server, mut c, sid) = open(who, json!({})).await;
        let code =
            "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')\ndisplay('note')";
        let r = cell(&mut c, &sid, code).await;
        assert_eq!(r["status"], "completed", "{who:?} {r}");
        let items = r["display"].as_array().unwrap();
        assert_eq!(items.len(), 2, "{r}");
        assert_eq!(
            items[0],
            json!({"mime": "text/plain", "data": b64(b"'note'")})
        );
        assert_eq!(items[1]["mime"], "image/png");
        let png = unb64(&items[1]["data"]);
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 1000,
            "{}",
            png.len()
        );
        // Shown once: the figure was closed.
        let r = cell(&mut c, &sid, "len(plt.get_fignums())").await;
        assert_eq!(r["value"]["json"], 0, "{r}");
        assert!(r.get("display").is_none(), "{r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_program_cannot_pass_off_an_unserved_type_or_garbage_as_rich_output() {
    // (A served type whose bytes are not what it says is left out: tests/serve/rich.rs.)
    let forge = |mime: &str, data: &str| {
        format!("import binascii\nsend = call_tool.__globals__['_send']\nsend({{'jsonrpc': '2.0', 'method': 'display', 'params': {{'mime': '{mime}', 'data': {data}}}}})")
    };
    for who in IDENTITIES {
        let (_server, mut c, sid) = open(who, json!({})).await;
        for code in [
            forge(
                "text/x-script",
                "binascii.b2a_base64(b'<script>', newline=False).decode()",
            ),
            forge("image/png", "'not base64!'"),
        ] {
            cell(&mut c, &sid, "x = 5").await;
            let r = cell(&mut c, &sid, &code).await;
            assert_eq!(r["status"], "protocol_error", "{who:?} {r}");
            assert_eq!(r["kernel_restarted"], true, "{r}");
            assert!(r.get("display").is_none(), "{r}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn disposal_ends_the_kernel_and_call_scope_cannot_be_stateful() {
    for who in IDENTITIES {
        let (server, mut c, sid) = open(who, json!({})).await;
        cell(&mut c, &sid, "x = 1").await;
        assert!(!descendants(server.pid()).is_empty());
        result_of(&c.call("sandbox.dispose", json!({"sandbox_id": sid})).await);
        assert!(
            settle(server.pid(), Duration::from_secs(5)).is_empty(),
            "the kernel outlived its sandbox"
        );
        let r = c
            .call(
                "sandbox.create",
                json!({"spec": {"stateful": true, "isolation_scope": "call"}}),
            )
            .await;
        assert_eq!(error_code(&r), -32602, "{r}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains("stateful"),
            "{r}"
        );
    }
}

/// Each of `pids` (known by its start time) still in /proc, zombies included: a zombie is a
/// process nobody reaped yet, wherever it was reparented.
fn still_there(pids: &[(i32, u64)]) -> Vec<String> {
    pids.iter()
        .filter_map(|(pid, start)| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            let same = fields.get(19)?.parse::<u64>().ok()? == *start;
            same.then(|| format!("{pid} state {} ppid {}", fields[0], fields[1]))
        })
        .collect()
}

fn with_start_times(pids: Vec<i32>) -> Vec<(i32, u64)> {
    pids.into_iter()
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let start = stat.rsplit_once(')')?.1.split_whitespace().nth(19)?;
            Some((p, start.parse().ok()?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_disposed_kernel_is_reaped_before_disposal_answers() {
    for who in IDENTITIES {
        let (server, mut c, sid) = open(who, json!({})).await;
        cell(&mut c, &sid, "x = 1").await;
        // The kernel's stage and its interpreter (stopped between cells).
        let kernel = with_start_times(descendants(server.pid()));
        assert!(kernel.len() >= 2, "{who:?}: no kernel: {kernel:?}");
        result_of(&c.call("sandbox.dispose", json!({"sandbox_id": sid})).await);
        // Not even a zombie under the host's init: every process of the kernel was reaped by
        // the time the disposal was answered (found: the interpreter stayed a zombie ~1.5 s).
        let left = still_there(&kernel);
        assert!(
            left.is_empty(),
            "{who:?}: left after disposal answered: {left:?}"
        );
    }
}
