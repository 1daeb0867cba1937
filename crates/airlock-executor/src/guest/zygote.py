

# --- The zygote (appended to the bootstrap and kernel; see crates/airlock-executor/src/zygote.rs)
# A template interpreter: started once by the broker with `-I -B -S`, it imports what the
# bootstrap needs, loads libairlock_zygote.so and forks one child per run. It never runs
# untrusted code: the only code it ever executes is this file, and the only input it reads is
# the broker's requests, which the library parses. Each child isolates itself with the stage's
# own Rust code, comes back here as pid 1 of its run, and only then runs main() — seccomp,
# attestation, `execute` — exactly as a cold guest does after its own start-up.


def _zygote():
    class Long(_ctypes._SimpleCData):
        _type_ = "l"

    class CFunction(_ctypes.CFuncPtr):  # releases the GIL while it runs
        _flags_ = _ctypes.FUNCFLAG_CDECL
        _restype_ = Long

    class PyFunction(_ctypes.CFuncPtr):  # holds the GIL: the CPython API
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_PYTHONAPI
        _restype_ = None

    path, abi, build = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    lib = _ctypes.dlopen(path, os.RTLD_NOW)
    if CFunction(_ctypes.dlsym(lib, "airlock_zygote_abi"))() != abi:
        sys.stderr.write("airlock zygote: %s speaks another protocol than this airlock "
                         "binary\n" % path)
        os._exit(78)
    if CFunction(_ctypes.dlsym(lib, "airlock_zygote_build"))() != build:
        sys.stderr.write("airlock zygote: %s was built from other sources than this airlock "
                         "binary (a stale build? rebuild or reinstall both)\n" % path)
        os._exit(78)
    wait = CFunction(_ctypes.dlsym(lib, "airlock_zygote_wait"))
    fork = PyFunction(_ctypes.dlsym(lib, "airlock_zygote_fork"))
    fork.restype = Long
    python = _ctypes.dlopen(None, os.RTLD_NOW)
    before = PyFunction(_ctypes.dlsym(python, "PyOS_BeforeFork"))
    parent = PyFunction(_ctypes.dlsym(python, "PyOS_AfterFork_Parent"))
    child = PyFunction(_ctypes.dlsym(python, "PyOS_AfterFork_Child"))
    # Every object the template made is moved out of the collector's reach: a run's garbage
    # collections then never write to (and so never copy) the zygote's pages.
    import gc
    gc.collect()
    gc.freeze()
    os.write(1, b"R")  # ready: the broker waits for this byte
    while True:
        request = wait()  # blocks without the GIL
        if request == -1:  # the broker closed the control socket
            os._exit(0)
        if request != 1:  # a malformed request, already answered
            continue
        # As os.fork() does: the fork happens with the GIL held, between these two calls.
        before()
        pid = fork()
        if pid == 0:  # pid 1 of a run, isolated up to seccomp
            child()
            return
        parent()


_zygote()
del _zygote
main()
