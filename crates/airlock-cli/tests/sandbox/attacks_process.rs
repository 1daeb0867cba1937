//! Process creation, exec, ptrace and friends are denied to the program; nothing survives a run.
use super::support::*;

#[test]
fn sandbox_denies_fork_exec_and_subprocess() {
    let code = "import os, subprocess\nfor name, f in [('fork', os.fork), ('exec', lambda: os.execv('/bin/true', ['true'])), ('subprocess', lambda: subprocess.run(['/bin/true'])), ('posix_spawn', lambda: os.posix_spawn('/bin/true', ['true'], {}))]:\n    try:\n        f(); print(name, 'ALLOWED')\n    except OSError as e:\n        print(name, 'denied', e.errno)";
    for who in identities() {
        let v = run_py(who, code, &[]);
        assert_completed(&v);
        let out = v["stdout"].as_str().unwrap();
        assert!(!out.contains("ALLOWED"), "{v}");
        assert_eq!(out.lines().count(), 4, "{v}");
    }
}

#[test]
fn a_forbidden_syscall_kills_the_run() {
    // ptrace(PTRACE_TRACEME) through ctypes: the filter kills the process (SIGSYS).
    let code = "import ctypes\nlibc = ctypes.CDLL(None)\nprint('before', flush=True)\nlibc.ptrace(0, 0, 0, 0)\nprint('AFTER')";
    for who in identities() {
        let v = run_py(who, code, &[]);
        assert_eq!(status(&v), "killed", "{v}");
        assert_eq!(v["signal"], 31, "{v}");
        assert_eq!(v["stdout"], "before\n");
    }
}

#[test]
fn the_32_bit_syscall_abi_is_killed() {
    // int 0x80 (the i386 ABI) via a tiny machine-code stub: getpid (20) on the 32-bit table.
    let code = "import ctypes, mmap\nbuf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ|mmap.PROT_WRITE|mmap.PROT_EXEC)\nbuf.write(bytes([0xb8,20,0,0,0,0xcd,0x80,0xc3]))\nf = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))\nprint('before', flush=True)\nprint('pid', f())";
    for who in identities() {
        let v = run_py(who, code, &[]);
        assert_eq!(status(&v), "killed", "{v}");
        assert_eq!(v["stdout"], "before\n", "{v}");
    }
}

#[test]
fn namespaces_cannot_be_created_or_joined() {
    let code = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nprint('before', flush=True)\nlibc.unshare(0x10000000)\nprint('AFTER')";
    for who in identities() {
        let v = run_py(who, code, &[]);
        assert_eq!(status(&v), "killed", "{who:?}: {v}");
        assert_eq!(v["signal"], 31, "{who:?}: {v}");
        assert_eq!(v["stdout"], "before\n", "{who:?}: {v}");
    }
}

#[test]
fn the_guest_is_unprivileged_in_fresh_namespaces() {
    let code = "import os\nst=open('/proc/self/status').read()\nprint([l for l in st.splitlines() if l.startswith(('CapEff','NoNewPrivs','Seccomp:'))])\nprint(os.getuid(), os.getpid(), sorted(os.listdir('/proc')).count('1'))\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))";
    for who in identities() {
        let v = run_py(who, code, &[]);
        assert_completed(&v);
        let out = v["stdout"].as_str().unwrap();
        assert!(out.contains("CapEff:\\t0000000000000000"), "{out}");
        assert!(out.contains("NoNewPrivs:\\t1"), "{out}");
        assert!(out.contains("Seccomp:\\t2"), "{out}");
        // uid 1000 inside, pid 1 of its namespace, and it sees only its own process.
        assert!(out.contains("\n1000 1 1\n1\n"), "{out}");
    }
}

#[test]
fn only_the_socket_and_stdio_are_inherited() {
    let code = "import os, socket\nfds = sorted(int(f) for f in os.listdir('/proc/self/fd'))\nprint(fds[:4], socket.gethostname())";
    for who in identities() {
        let v = run_py(who, code, &[]);
        assert_completed(&v);
        // 0-2 stdio, 3 the socket; one more is the directory listdir itself has open.
        assert_eq!(v["stdout"], "[0, 1, 2, 3] airlock\n", "{v}");
    }
}

#[test]
fn no_process_survives_a_run_that_ends_while_threads_spin() {
    for who in identities() {
        let _only = exclusive();
        let code = "import threading, sys\nfor _ in range(4):\n    threading.Thread(target=lambda: [0 for _ in iter(int, 1)]).start()\nprint('started', flush=True)\nsys.exit(0)";
        let v = run_py(who, code, &["--timeout", "3"]);
        assert_eq!(v["stdout"], "started\n", "{v}");
        let left = run_survivors(&marker("none"));
        assert!(left.is_empty(), "processes survived the run: {left:?}");
    }
}
