//! A paused kernel carried as its process image (`airlock_jail::image`): the restored kernel
//! is inside every layer of a fresh sandbox (checked from the host's `/proc`, and by attacks
//! from inside it), holds nothing of the restore, and what an image cannot carry is pickled
//! instead and said so. Each as root and as the unprivileged `airlock-test`.
use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::json;

use super::snapshots::{cell, kernel_pid, ns_of, ok, stateful, StateDir, IDENTITIES};
use super::support::session_probes::rss_kib;
use super::support::*;

/// Variables pickling cannot carry and an image does: a generator part-way, a lambda, a frame.
const STATE: &str = "import sys\n\
gen = (i * 3 for i in range(4))\n\
first = next(gen)\n\
twice = lambda v: 2 * v\n\
frame = sys._getframe()\n\
x = 41";

fn status_field(pid: i32, name: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

fn fds(pid: i32) -> BTreeSet<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect()
}

async fn pause(c: &mut WsClient, sid: &str) -> serde_json::Value {
    let p = ok(c, "sandbox.pause", json!({ "sandbox_id": sid })).await;
    assert_eq!(p["state"], "paused", "{p}");
    p
}

async fn resumed_inside_every_layer(user: Option<&str>) {
    let state = StateDir::new(user);
    let server = state.serve_cow(user, false);
    let mut c = server.connect().await;
    let sid = stateful(&mut c).await;
    cell(&mut c, &sid, STATE).await;
    let p = pause(&mut c, &sid).await;
    assert_eq!(p["kernel"]["carried"], "image", "{user:?}: {p}");
    // The host listens on loopback; the restored kernel will try to reach it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();

    // Any call resumes it: the generator goes on, the lambda and the frame are there.
    let out = cell(
        &mut c,
        &sid,
        "print(first, list(gen), twice(x), frame.f_code.co_name)",
    )
    .await;
    assert_eq!(out, "0 [3, 6, 9] 82 <module>\n", "{user:?}");

    let pid = kernel_pid(&mut c, server.pid(), &sid).await;
    assert_eq!(status_field(pid, "Seccomp:"), "2", "{user:?}: seccomp");
    assert_eq!(status_field(pid, "NoNewPrivs:"), "1", "{user:?}");
    assert_eq!(status_field(pid, "CapEff:"), "0000000000000000", "{user:?}");
    assert_eq!(status_field(pid, "CapPrm:"), "0000000000000000", "{user:?}");
    assert_eq!(status_field(pid, "Threads:"), "1", "{user:?}");
    for which in ["user", "mnt", "pid", "net", "ipc", "uts", "cgroup"] {
        assert_ne!(
            ns_of(pid, which),
            ns_of(server.pid(), which),
            "{user:?}: the restored kernel shares the server's {which} namespace"
        );
    }
    // Nothing of the restore is left open: its stdin, stdout, stderr and socket only.
    let want: BTreeSet<String> = ["0", "1", "2", "3"].map(String::from).into();
    assert_eq!(fds(pid), want, "{user:?}: fds");

    // From inside: the layers hold. No write outside its own files, no host file, no network.
    let attack = format!(
        "import os, socket\n\
         out = []\n\
         for path in ('/usr/airlock-image-escape', '/etc/airlock-image-escape'):\n\
         \x20   try:\n\
         \x20       open(path, 'w').write('x'); out.append('wrote ' + path)\n\
         \x20   except OSError as e:\n\
         \x20       out.append(e.errno)\n\
         try:\n\
         \x20   s = socket.create_connection(('127.0.0.1', {port}), timeout=1); out.append('connected')\n\
         except OSError as e:\n\
         \x20   out.append('no network')\n\
         try:\n\
         \x20   os.unshare(os.CLONE_NEWUSER); out.append('unshared')\n\
         except (OSError, AttributeError) as e:\n\
         \x20   out.append('no unshare')\n\
         print(out)"
    );
    let out = cell(&mut c, &sid, &attack).await;
    assert!(
        !out.contains("wrote") && !out.contains("connected"),
        "{user:?}: {out}"
    );
    assert!(
        out.contains("no network") && !out.contains("'unshared'"),
        "{user:?}: {out}"
    );
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "{user:?}: the host listener got a connection"
    );
    for path in ["/usr/airlock-image-escape", "/etc/airlock-image-escape"] {
        assert!(!std::path::Path::new(path).exists(), "{user:?}: {path}");
    }
    // It is a kernel like any other: a second pause carries it again, and it resumes again.
    let p = pause(&mut c, &sid).await;
    assert_eq!(p["kernel"]["carried"], "image", "{user:?}: {p}");
    assert_eq!(
        cell(&mut c, &sid, "print(twice(x))").await,
        "82\n",
        "{user:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resumed_image_is_a_kernel_inside_every_layer_of_a_fresh_sandbox() {
    for user in IDENTITIES {
        resumed_inside_every_layer(user).await;
    }
}

/// What each kernel holds, and how its state must be carried.
const NOT_IMAGEABLE: [(&str, &str); 4] = [
    // An open file: a restored kernel would have none at that number.
    ("held = open('/work/f', 'w')", "held"),
    // A thread: an image carries one.
    (
        "import threading, time\nt = threading.Thread(target=time.sleep, args=(60,), daemon=True)\nt.start()",
        "t",
    ),
    // A writable shared mapping.
    ("import mmap\nshared = mmap.mmap(-1, 4096)", "shared"),
    // Memory it wrote and then made unreadable: an image would read nothing back from it.
    (HIDDEN, "libc"),
];

/// A page written and then made `PROT_NONE` (its address kept).
const HIDDEN: &str = "import ctypes, mmap\n\
libc = ctypes.CDLL(None)\n\
libc.mmap.restype = ctypes.c_void_p\n\
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]\n\
hidden = libc.mmap(None, 4096, 3, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)\n\
ctypes.memmove(hidden, b'secret', 6)\n\
assert libc.mprotect(ctypes.c_void_p(hidden), 4096, 0) == 0";

async fn pickled_instead(user: Option<&str>) {
    let state = StateDir::new(user);
    let server = state.serve_cow(user, false);
    let mut c = server.connect().await;
    for (setup, name) in NOT_IMAGEABLE {
        let sid = stateful(&mut c).await;
        cell(&mut c, &sid, &format!("{setup}\nx = 41")).await;
        let p = pause(&mut c, &sid).await;
        assert_eq!(p["kernel"]["carried"], "pickle", "{user:?}: {setup}: {p}");
        assert!(
            p["kernel"]["not_saved"][name].is_string(),
            "{user:?}: {setup}: {p}"
        );
        assert_eq!(cell(&mut c, &sid, "print(x + 1)").await, "42\n", "{user:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kernel_an_image_cannot_carry_is_pickled_and_says_so() {
    for user in IDENTITIES {
        pickled_instead(user).await;
    }
}

/// The kernel lies about itself before it is imaged: its `image_facts` answer names signal
/// actions for signals that do not exist or cannot be caught, a handler at a wild address, a
/// restartable-sequence area at address 0 and a working directory outside its root. The lies
/// reach only a sandbox of its own: the pause answers, the resumed kernel either serves or is
/// restarted (saying so), the server serves a sibling sandbox throughout, and no process of
/// either the paused or the resumed kernel is left once they are disposed of.
const LIES: &str = r#"
import gc
facts = next(f for f in gc.get_objects() if getattr(f, '__name__', '') == '_image_facts' and callable(f))
def lying(scope):
    real = facts(scope)
    real['sigactions'] = [[9, 1, 0, 0, 0], [19, 1, 0, 0, 0], [999, 1, 0, 0, 0],
                          [15, 0xdeadbeef, 0x04000000, 0, 0]] + real['sigactions'][:80]
    real['rseq'] = [-(1 << 40), 32]
    real['cwd'] = '/proc/self/root/../../../' + 'x' * 5000
    return real
facts.__globals__['_image_facts'] = lying
x = 41
"#;

async fn lies_stay_inside(user: Option<&str>) {
    let state = StateDir::new(user);
    let server = state.serve_cow(user, false);
    let mut c = server.connect().await;
    let sibling = stateful(&mut c).await;
    cell(&mut c, &sibling, "y = 7").await;
    let sid = stateful(&mut c).await;
    cell(&mut c, &sid, LIES).await;
    let p = pause(&mut c, &sid).await;
    let r = c
        .call(
            "sandbox.run_code",
            json!({ "sandbox_id": sid, "code": "print(x)" }),
        )
        .await;
    let result = &r["result"];
    let served = result["status"] == "completed" && result["stdout"] == "41\n";
    let refused = r["error"].is_object() || result["status"] == "refused";
    assert!(served || refused, "{user:?}: {p}: {r}");
    assert_eq!(cell(&mut c, &sibling, "print(y)").await, "7\n", "{user:?}");
    ok(&mut c, "sandbox.dispose", json!({ "sandbox_id": sid })).await;
    ok(&mut c, "sandbox.dispose", json!({ "sandbox_id": sibling })).await;
    let left = settle(server.pid(), Duration::from_secs(5));
    assert!(left.is_empty(), "{user:?}: left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kernel_lying_about_itself_before_its_image_reaches_only_its_own_sandbox() {
    let _shmem = SHMEM.lock().await;
    for user in IDENTITIES {
        lies_stay_inside(user).await;
    }
}

/// Memory the kernel only read: 400 MiB of anonymous memory that holds the kernel's zero page
/// (its RSS counts none of it) with one page written, its stack grown 100 MiB down by a read,
/// and a 64 MiB file of its own mapped privately, read through (its pages stay the file's)
/// but for one page it wrote.
const READ_ONLY_MEMORY: &str = r#"
import ctypes, mmap, os, resource
resource.setrlimit(resource.RLIMIT_STACK, (256 << 20, resource.getrlimit(resource.RLIMIT_STACK)[1]))
low = next(int(l.split('-')[0], 16) for l in open('/proc/self/maps') if l.rstrip().endswith('[stack]'))
deep = ctypes.string_at(low - (100 << 20), 1)[0]
zeros = mmap.mmap(-1, 400 << 20, flags=mmap.MAP_PRIVATE)
assert zeros.find(b'\x01') == -1
zeros[100 << 20] = 7
with open('blob', 'wb') as f:
    f.write(os.urandom(1 << 20) * 64)
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
fd = os.open('blob', os.O_RDONLY)
blob = libc.mmap(None, 64 << 20, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, 0)
os.close(fd)
first = sum(ctypes.string_at(blob + at, 1)[0] for at in range(0, 64 << 20, 4096))
assert libc.mprotect(ctypes.c_void_p(blob), 4096, 3) == 0
ctypes.memset(blob, 9, 1)
first += 9 - int.from_bytes(open('blob', 'rb').read(1), 'little')
"#;

async fn restored_no_larger(user: Option<&str>) {
    let state = StateDir::new(user);
    let server = state.serve_cow(user, false);
    let mut c = server.connect().await;
    let spec = json!({ "stateful": true, "limits": { "memory_mb": 256 } });
    let sid = super::snapshots::sandbox(&mut c, spec).await;
    cell(&mut c, &sid, READ_ONLY_MEMORY).await;
    let paused = rss_kib(kernel_pid(&mut c, server.pid(), &sid).await);
    let forked = ok(
        &mut c,
        "sandbox.fork",
        json!({ "sandbox_id": sid, "count": 1 }),
    )
    .await;
    let branch = forked["sandbox_ids"][0].as_str().unwrap().to_owned();
    // The branch's first cell restores the image (a memory limit would end it here).
    let restored = rss_kib(kernel_pid(&mut c, server.pid(), &branch).await);
    assert!(
        paused > 0 && restored > 0,
        "{user:?}: a kernel's VmRSS unread"
    );
    assert!(
        restored < paused + (16 << 10),
        "{user:?}: the restored kernel holds {restored} KiB, the paused one {paused} KiB"
    );
    let probe = "print(zeros[100 << 20], zeros.find(b'\\x07'), \
                 sum(ctypes.string_at(blob + at, 1)[0] for at in range(0, 64 << 20, 4096)) == first, \
                 ctypes.string_at(low - (100 << 20), 1)[0], \
                 sum(l.rstrip().endswith('[stack]') for l in open('/proc/self/maps')))";
    let want = format!("7 {} True 0 1\n", 100 << 20);
    assert_eq!(cell(&mut c, &branch, probe).await, want, "{user:?}");
    let snap = ok(&mut c, "sandbox.snapshot", json!({ "sandbox_id": sid })).await;
    assert_eq!(snap["kernel"]["carried"], "image", "{user:?}: {snap}");
    assert!(
        snap["kernel"]["bytes"].as_u64().unwrap() < 64 << 20,
        "{user:?}: an image of memory only read carries its bytes: {snap}"
    );
}

/// Memory a kernel only read is carried as what it is, not as bytes: the image stays small
/// and a restored branch holds no more memory than its parent (before, the zero page became
/// 400 MiB of the branch's own and its 256 MiB limit ended it at its first cell).
#[tokio::test(flavor = "multi_thread")]
async fn a_restored_kernel_holds_no_more_memory_than_the_paused_one() {
    for user in IDENTITIES {
        restored_no_larger(user).await;
    }
}
