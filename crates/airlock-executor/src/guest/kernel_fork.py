
# --- A forkable kernel's copy-on-write fork (appended after kernel_state.py) -----------------
# Between cells the broker may ask for `fork {count}`: this process clones itself `count` times
# with exactly the branch flags (new user, mount, pid, net, ipc, uts and cgroup namespaces), a
# call its seccomp filter leaves to the broker, which lets each through only for a fork it
# asked for and places the branch's socket, stdout and stderr at fds 100-102 first. The parent
# answers the branches' pids and is never run again (the broker keeps it stopped: it holds the
# pages the branches share). Each branch takes its fds, closes every other, drops the
# capabilities its new user namespace gave it, waits in `/` while the broker finishes it from
# outside (its maps, its own /work, /tmp, /dev/shm and /proc, its cgroup), then attests as a
# fresh kernel does and goes on serving cells in the same scope.
BRANCH_FLAGS = 0x7E020011
BRANCH_FDS = (100, 101, 102)


def _answer_fork(rid, params):
    try:
        pids = _fork_branches(params.get("count"))
    except BaseException as exc:
        answer = {"error": {"code": -32603, "message": ("%s: %s" % (type(exc).__name__, exc))[:500]}}
    else:
        if pids is None:  # this is a branch: finished by the broker, or gone
            try:
                return _branch_start()
            except BaseException:
                os._exit(70)
        answer = {"result": {"pids": pids}}
    answer.update({"jsonrpc": "2.0", "id": rid})
    with _Quiet():
        _send(answer)
        return _read_frame()


def _threads():
    with open("/proc/self/status", "rb") as f:
        for line in f.read(65536).decode("ascii", "replace").splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def _fork_branches(count):
    """The branches' pids (as this kernel sees them); None in a branch."""
    if not isinstance(count, int) or not 1 <= count <= 64:
        raise ValueError("a fork makes 1 to 64 branches")
    threads = _threads()
    if threads != 1:  # a clone keeps only its caller: another thread may hold any lock
        raise RuntimeError("the kernel runs %d threads; a fork needs it to run one" % threads)

    class Long(_ctypes._SimpleCData):
        _type_ = "l"

    class PyFunction(_ctypes.CFuncPtr):  # holds the GIL, as os.fork() does
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_PYTHONAPI | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = None

    process = _ctypes.dlopen(None, os.RTLD_NOW)
    clone = PyFunction(_ctypes.dlsym(process, "syscall"))
    clone.restype = Long
    before = PyFunction(_ctypes.dlsym(process, "PyOS_BeforeFork"))
    parent = PyFunction(_ctypes.dlsym(process, "PyOS_AfterFork_Parent"))
    child = PyFunction(_ctypes.dlsym(process, "PyOS_AfterFork_Child"))
    pids = []
    for _ in range(count):
        before()
        pid = clone(Long(56), Long(BRANCH_FLAGS), Long(0), Long(0), Long(0), Long(0))
        if pid == 0:
            child()
            return None  # a branch: fds 100-102 are its own
        parent()
        if pid < 0:
            break
        pids.append(pid)
    for fd in BRANCH_FDS:  # the last branch's, placed here for its clone
        try:
            os.close(fd)
        except OSError:
            pass
    if len(pids) < count:
        raise OSError(_ctypes.get_errno(), "clone of branch %d" % (len(pids) + 1))
    return pids


def _branch_start():
    """A branch: its own fds, no capabilities, finished by the broker, then attested."""
    for fd, at in zip(BRANCH_FDS, (SOCK, 1, 2)):
        os.dup2(fd, at)
    os.closerange(SOCK + 1, 1 << 20)
    _buf.clear()
    _drop_capabilities()
    os.chdir("/")
    with _Quiet():
        _send({"jsonrpc": "2.0", "method": "branch", "params": {}})
        msg = _read_frame()
    if msg.get("method") != "go":
        os._exit(71)
    os.chdir((msg.get("params") or {}).get("cwd") or "/work")
    with _Quiet():
        _send({"jsonrpc": "2.0", "method": "ready", "params": _attest()})
        return _read_frame()


def _drop_capabilities():
    """Every capability the branch's new user namespace gave it: bounding, ambient, then the
    effective, permitted and inheritable sets."""
    class Long(_ctypes._SimpleCData):
        _type_ = "l"

    class Function(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = Long

    libc = _ctypes.dlopen(None, os.RTLD_NOW)
    prctl = Function(_ctypes.dlsym(libc, "prctl"))
    syscall = Function(_ctypes.dlsym(libc, "syscall"))
    for cap in range(64):
        prctl(Long(24), Long(cap), Long(0), Long(0), Long(0))  # PR_CAPBSET_DROP (EINVAL past the last)
    prctl(Long(47), Long(4), Long(0), Long(0), Long(0))  # PR_CAP_AMBIENT, CLEAR_ALL
    class U32(_ctypes._SimpleCData):
        _type_ = "I"

    caps = type("Caps", (_ctypes.Array,), {"_type_": U32, "_length_": 8})(0x20080522)
    # A header (version 3, this process), then two words of empty sets (already zero).
    if syscall(Long(126), Long(_ctypes.addressof(caps)), Long(_ctypes.addressof(caps) + 8)) != 0:
        raise OSError(_ctypes.get_errno(), "capset")
