//! Memory outside every bound and connections that skip `connect(2)`: memfd, SysV shared memory
//! and SysV message queues are `ENOSYS` (none lives on the sandbox's bounded tmpfs, and without
//! a memory cgroup nothing else would count them); TCP Fast Open is `EPERM` (it connects from
//! inside `sendto`, where the Landlock connect rule never looks). Run and exec mode, as root
//! and as `airlock-test`; the host's /proc/meminfo is sampled while each attack runs, and a
//! host listener shows that nothing connected.
use std::net::TcpListener;
use std::time::Duration;

use serde_json::Value;

use super::support::*;

/// Where the attack code runs: the Python run profile, or a command under the exec profile.
#[derive(Debug, Clone, Copy)]
enum Mode {
    Run,
    Exec,
}

const MODES: [Mode; 2] = [Mode::Run, Mode::Exec];

fn attempt(who: As, mode: Mode, code: &str, extra: &[&str]) -> Value {
    match mode {
        Mode::Run => run_py(who, code, extra),
        Mode::Exec => exec(who, &["/usr/bin/python3", "-c", code], extra),
    }
}

/// Each attack prints `FILLED <bytes>` if the kernel let it through, `REFUSED <errno>` if not,
/// then holds on for a moment so a fill is still there for the sampler.
///
/// memfd: 32 files of 32 MiB (each under the per-file size limit), 1 GiB in all.
const MEMFD: &str = "import os, time\nn, fds = 0, []\ntry:\n    for i in range(32):\n        fds.append(os.memfd_create('fill'))\n        os.posix_fallocate(fds[-1], 0, 32 << 20)\n        n += 32 << 20\n    print('FILLED', n)\nexcept OSError as e:\n    print('REFUSED', e.errno)\ntime.sleep(0.5)";

/// SysV shm: a 1 GiB segment, attached and touched 64 MiB at a time (detached in between, so
/// the pages are in no process's RSS).
const SHM: &str = "import ctypes, time\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]\nlibc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]\nlibc.shmat.restype = ctypes.c_void_p\nlibc.shmdt.argtypes = [ctypes.c_void_p]\nsid = libc.shmget(0, 1 << 30, 0o1600)\nif sid < 0:\n    print('REFUSED', ctypes.get_errno())\nelse:\n    for off in range(0, 1 << 30, 64 << 20):\n        p = libc.shmat(sid, None, 0)\n        ctypes.memset(p + off, 1, 64 << 20)\n        libc.shmdt(p)\n    print('FILLED', 1 << 30)\ntime.sleep(0.5)";

/// SysV message queues: 16384 queues, each filled to its 16 KiB default with 8 KiB messages
/// (256 MiB of unreclaimable kernel slab).
const MSG: &str = "import ctypes, time\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.msgsnd.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]\nbuf = ctypes.create_string_buffer(8 + 8192)\nctypes.c_long.from_buffer(buf).value = 1\nsent, err = 0, 0\nfor _ in range(16384):\n    q = libc.msgget(0, 0o1600)\n    if q < 0:\n        err = ctypes.get_errno(); break\n    while libc.msgsnd(q, buf, 8192, 0o4000) == 0:\n        sent += 8192\nprint(('REFUSED %d' % err) if sent == 0 else ('FILLED %d' % sent))\ntime.sleep(0.5)";

/// Runs `code` under `--memory 128` in every mode as every identity, sampling `field` of the
/// host's meminfo: the call is refused with ENOSYS, the run completes, and the host gained far
/// less than the attempt (`slack` covers the run itself and whatever else the machine does).
fn refused_and_nothing_allocated(what: &str, field: &'static str, code: &str, slack: u64) {
    let _only = exclusive();
    for who in identities() {
        for mode in MODES {
            let (v, peak) = peak_growth(field, || {
                attempt(who, mode, code, &["--memory", "128", "--timeout", "60"])
            });
            assert_completed(&v);
            assert_eq!(v["stdout"], "REFUSED 38\n", "{who:?} {mode:?} {what}: {v}");
            assert!(
                peak < slack,
                "{who:?} {mode:?} {what}: host {field} grew {peak} bytes"
            );
        }
    }
}

#[test]
fn memfd_is_refused_and_host_shmem_does_not_grow() {
    refused_and_nothing_allocated("32 memfds + fallocate 1 GiB", "Shmem", MEMFD, 128 << 20);
}

#[test]
fn sysv_shm_is_refused_and_host_shmem_does_not_grow() {
    refused_and_nothing_allocated("shmget 1 GiB + touch", "Shmem", SHM, 128 << 20);
}

#[test]
fn sysv_message_queues_are_refused_and_kernel_memory_does_not_grow() {
    refused_and_nothing_allocated("msgget 256 MiB", "SUnreclaim", MSG, 64 << 20);
}

/// Fast Open at `port` on the guest's loopback (nothing there) and at the proxy (3128, the one
/// listener in the namespace, so an unfiltered send would connect), by `sendto` and `sendmsg`;
/// the Fast Open socket options; then ordinary sends to the proxy, with and without flags.
fn fast_open_py(port: u16) -> String {
    format!(
        "import socket\n\
         FO = 0x20000000\n\
         req = b'GET / HTTP/1.0\\r\\n\\r\\n'\n\
         def tcp():\n    return socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n\
         for port in ({port}, 3128):\n\
         \x20   for name in ('sendto', 'sendmsg'):\n\
         \x20       s = tcp()\n\
         \x20       try:\n\
         \x20           if name == 'sendto': s.sendto(req, FO, ('127.0.0.1', port))\n\
         \x20           else: s.sendmsg([req], [], FO, ('127.0.0.1', port))\n\
         \x20           print(name, port, 'SENT')\n\
         \x20       except OSError as e:\n            print(name, 'refused', e.errno)\n\
         for opt in (23, 30):\n\
         \x20   try:\n        tcp().setsockopt(socket.IPPROTO_TCP, opt, 1); print('setsockopt', opt, 'SET')\n\
         \x20   except OSError as e:\n        print('setsockopt', opt, 'refused', e.errno)\n\
         s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n\
         s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)\n\
         c = b'CONNECT 127.0.0.3:9 HTTP/1.1\\r\\nHost: 127.0.0.3:9\\r\\n\\r\\n'\n\
         s.send(c[:8], socket.MSG_NOSIGNAL)\n\
         s.sendmsg([c[8:]], [], 0)\n\
         got = b''\n\
         while len(got) < 9:\n    chunk = s.recv(64)\n    if not chunk: break\n    got += chunk\n\
         print('proxy answered', got[:9].decode())\n"
    )
}

#[test]
fn tcp_fast_open_is_refused_and_reaches_no_one() {
    for who in identities() {
        for mode in MODES {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.set_nonblocking(true).unwrap();
            let port = l.local_addr().unwrap().port();
            // Allowlist egress: TCP client sockets exist (closed egress refuses `socket` itself).
            let flags = [
                "--allow-host",
                "127.0.0.2:9",
                "--allow-private",
                "127.0.0.2/32",
            ];
            let v = attempt(who, mode, &fast_open_py(port), &flags);
            assert_completed(&v);
            assert_eq!(
                v["stdout"],
                "sendto refused 1\nsendmsg refused 1\nsendto refused 1\nsendmsg refused 1\n\
                 setsockopt 23 refused 1\nsetsockopt 30 refused 1\nproxy answered HTTP/1.1 \n",
                "{who:?} {mode:?}: {v:#}"
            );
            // Only the ordinary connection reached the proxy, and it was denied.
            let allowed = v["egress"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["decision"] != "deny")
                .count();
            assert_eq!(allowed, 0, "{who:?} {mode:?}: {v:#}");
            std::thread::sleep(Duration::from_millis(50));
            match l.accept() {
                Ok((_, peer)) => panic!("{who:?} {mode:?}: the host listener got {peer}"),
                Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock),
            }
        }
    }
}

/// User xattrs on the sandbox's tmpfs: kernel memory outside the disk bound (and, without a
/// cgroup, outside the memory limit). 4096 files with a 32 KiB xattr each (128 MiB).
const XATTR: &str = "import os, time\nn = 0\ntry:\n    for i in range(4096):\n        p = '/work/x%d' % i\n        open(p, 'w').close()\n        os.setxattr(p, 'user.fill', b'x' * 32768)\n        n += 32768\n    print('FILLED', n)\nexcept OSError as e:\n    print('REFUSED', e.errno) if n == 0 else print('FILLED', n)\ntime.sleep(0.5)";

/// Native AIO contexts come from the host-wide `fs.aio-max-nr`: a guest holding them all would
/// make every host process's `io_setup` fail.
const AIO: &str = "import ctypes, time\nlibc = ctypes.CDLL(None, use_errno=True)\nctx = ctypes.c_ulong(0)\nr = libc.syscall(206, 65536, ctypes.byref(ctx))\nprint(('REFUSED %d' % ctypes.get_errno()) if r < 0 else 'FILLED 65536')\ntime.sleep(0.5)";

/// inotify watches on the bound system dirs would report what the host opens there.
const INOTIFY: &str = "import ctypes, time\nlibc = ctypes.CDLL(None, use_errno=True)\nfd = libc.inotify_init1(0)\nprint(('REFUSED %d' % ctypes.get_errno()) if fd < 0 else 'FILLED 1')\ntime.sleep(0.5)";

#[test]
fn xattrs_are_refused_and_kernel_memory_does_not_grow() {
    refused_and_nothing_allocated("128 MiB of user xattrs", "SUnreclaim", XATTR, 64 << 20);
}

#[test]
fn host_wide_aio_and_inotify_are_refused() {
    let aio_before = std::fs::read_to_string("/proc/sys/fs/aio-nr").unwrap();
    refused_and_nothing_allocated("io_setup 65536", "SUnreclaim", AIO, 64 << 20);
    refused_and_nothing_allocated("inotify_init1", "SUnreclaim", INOTIFY, 64 << 20);
    // The host-wide AIO count is where it was.
    assert_eq!(
        std::fs::read_to_string("/proc/sys/fs/aio-nr").unwrap(),
        aio_before
    );
}
