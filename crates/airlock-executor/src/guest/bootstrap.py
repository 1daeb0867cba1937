# airlock guest bootstrap: runs inside the executor, after the interpreter started and before any
# untrusted code. fd 3 is the socket to the broker; fd 4 carries the seccomp filter (raw BPF).
# Order: read filter -> install seccomp (TSYNC) -> attest -> wait for `execute` -> run the program
# with `call_tool` injected -> report a result hint. Nothing here is a control the program cannot
# undo once it runs: every guarantee lives in the kernel layers and in the broker.
# Only C modules at start-up: `json` (it pulls in `re` and `enum`), `ctypes` (`struct`) and
# `signal` (`enum`) cost more than the interpreter itself; the program imports them if it wants.
import _ctypes, _json, _signal, _thread, builtins, os, sys  # traceback: imported when needed

SOCK = 3
FILTER_FD = 4
MAX_FRAME = 1 << 20
MAX_HEADER = 4096
_buf = bytearray()
# What this interpreter's own start-up put in its environment: PEP 538's locale coercion sets
# LC_CTYPE when none of LC_ALL, LC_CTYPE, LANG chose a locale. A cold guest gets it on top of
# the run's environment; a forked or pooled one started with another environment (see main).
_COERCED_LC_CTYPE = os.environ.get("LC_CTYPE")


def _set_environ(env):
    """The run's (or cell's) environment, as a cold interpreter started with it would have it:
    one that names no locale gets the LC_CTYPE start-up coerced (the template started with
    none and did), so that a forked run's, a pooled one's and every cell's environment is a
    cold run's."""
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in env.items()})
    ctype = os.environ.get("LC_CTYPE") or os.environ.get("LANG") or "C"
    if _COERCED_LC_CTYPE and not os.environ.get("LC_ALL") and ctype in ("C", "POSIX"):
        os.environ["LC_CTYPE"] = _COERCED_LC_CTYPE


class _JsonContext:
    """What the C scanner of `_json` reads: strict JSON, no hooks, no NaN or Infinity."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo = {}

    @staticmethod
    def parse_constant(name):
        raise ValueError("non-finite number in JSON: " + name)


_scan = _json.make_scanner(_JsonContext)


def _unencodable(obj):
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


# One encoder for every message (building one per call cost ~1 us). Its circular-reference
# markers are emptied after a failed encoding, which can leave entries behind.
_markers = {}
_encode = _json.make_encoder(
    _markers, _unencodable, _json.encode_basestring_ascii, None, ":", ",", False, False, False
)


def _dumps(obj):
    try:
        return "".join(_encode(obj, 0))
    except BaseException:
        _markers.clear()
        raise


def _loads(body):
    text = body.decode("utf-8")
    try:
        obj, end = _scan(text, 0)
    except StopIteration:
        raise ValueError("invalid JSON") from None
    if end != len(text):
        raise ValueError("trailing data after JSON")
    return obj


def _send(msg):
    _send_body(_dumps(msg))


def _send_body(text):
    _send_frame(text.encode())


def _send_frame(body):
    size = len(body)
    if size > MAX_FRAME:
        raise ValueError("message exceeds the frame cap")
    data = b"Content-Length: %d\r\n\r\n%b" % (size, body)
    n = os.write(SOCK, data)
    if n < len(data):
        view = memoryview(data)[n:]
        while view:
            view = view[os.write(SOCK, view):]


def _fill():
    chunk = os.read(SOCK, 65536)
    if not chunk:
        raise ConnectionError("broker closed the socket")
    _buf.extend(chunk)


def _read_frame():
    buf = _buf
    end = buf.find(b"\r\n\r\n")
    while end < 0:
        if len(buf) > MAX_HEADER:
            raise ValueError("header section too long")
        _fill()
        end = buf.find(b"\r\n\r\n")
    if buf.startswith(b"Content-Length: ") and buf.find(b"\r\n", 0, end) < 0:
        length = int(buf[16:end])  # the one header the broker writes
    else:
        length = _content_length(bytes(buf[:end]))
    if length is None or length < 0 or length > MAX_FRAME:
        raise ValueError("bad Content-Length")
    start = end + 4
    stop = start + length
    while len(buf) < stop:
        _fill()
    body = buf[start:stop]
    del buf[:stop]
    return _loads(body)


def _content_length(header):
    length = None
    for line in header.split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == b"content-length":
            length = int(value.strip())
    return length


_listener = [None]


def _install_seccomp():
    raw = b""
    while len(raw) <= 65536:
        chunk = os.read(FILTER_FD, 65536)
        if not chunk:
            break
        raw += chunk
    os.close(FILTER_FD)
    if not raw or len(raw) % 8 or len(raw) > 65536:
        raise RuntimeError("seccomp filter missing or malformed")

    class Long(_ctypes._SimpleCData):
        _type_ = "l"

    class Char(_ctypes._SimpleCData):
        _type_ = "c"

    class Function(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = Long

    def buffer(data):
        kind = type("Buffer", (_ctypes.Array,), {"_type_": Char, "_length_": len(data)})
        return kind.from_buffer_copy(data)

    libc = _ctypes.dlopen(None, os.RTLD_NOW)
    prctl = Function(_ctypes.dlsym(libc, "prctl"))
    syscall = Function(_ctypes.dlsym(libc, "syscall"))
    program = buffer(raw)
    # struct sock_fprog { unsigned short len; /* 6 bytes padding */ struct sock_filter *filter; }
    order = sys.byteorder
    fprog = buffer(
        (len(raw) // 8).to_bytes(2, order) + bytes(6) + _ctypes.addressof(program).to_bytes(8, order)
    )
    if prctl(Long(38), Long(1), Long(0), Long(0), Long(0)) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(_ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    # A forkable kernel's filter leaves one clone to the broker (a `ret` of
    # SECCOMP_RET_USER_NOTIF): it goes in with a listener (TSYNC_ESRCH | NEW_LISTENER beside
    # TSYNC), whose fd the attestation names; the broker takes it and this process closes its
    # own before any code runs (`main`).
    notify = (0x7FC00000).to_bytes(4, order)
    listens = any(raw[i:i + 2] == b"\x06\x00" and raw[i + 4:i + 8] == notify
                  for i in range(0, len(raw), 8))
    # seccomp(SECCOMP_SET_MODE_FILTER, flags, &prog): syscall 317 on x86_64
    r = syscall(Long(317), Long(1), Long(1 | 8 | 16 if listens else 1),
                Long(_ctypes.addressof(fprog)))
    if r < 0 or (r > 0) != listens:
        raise OSError(_ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER)")
    if listens:
        _listener[0] = r
    del program, fprog


def _attest():
    status = {}
    with open("/proc/self/status", "rb") as f:
        for line in f.read(65536).decode("ascii", "replace").splitlines():
            key, _, value = line.partition(":")
            status[key] = value.strip()
    with open("/proc/net/dev", "rb") as f:
        lines = f.read(65536).decode("ascii", "replace").splitlines()[2:]
    interfaces = sorted(l.split(":", 1)[0].strip() for l in lines if ":" in l)
    with open("/proc/self/uid_map", "rb") as f:
        uid_map = f.read(4096).decode("ascii", "replace").strip()
    namespaces = {}
    for ns in ("user", "net", "ipc", "uts", "mnt", "pid", "cgroup"):
        try:
            namespaces[ns] = os.readlink("/proc/self/ns/" + ns)
        except OSError:
            namespaces[ns] = ""
    return {
        "no_new_privs": status.get("NoNewPrivs") == "1",
        "seccomp_mode": int(status.get("Seccomp", "0")),
        "cap_eff": int(status.get("CapEff", "f" * 16), 16),
        "cap_prm": int(status.get("CapPrm", "f" * 16), 16),
        "uid_map": uid_map,
        "interfaces": interfaces,
        "namespaces": namespaces,
        "pid": os.getpid(),
        "listener": _listener[0],
    }


class ToolError(Exception):
    """A tool call the broker answered with an error: .code, .message, .data."""

    def __init__(self, code, message, data=None):
        super().__init__(f"{message} (code {code})")
        self.code, self.message, self.data = code, message, data


_next_id = [100]


_call_lock = _thread.allocate_lock()


def call_tool(name, args=None):
    """Call a host tool by name with JSON-serialisable args; returns its JSON result.

    Safe to call from several threads: calls are serialised (the broker serves one at a time)."""
    if not isinstance(name, str):
        raise TypeError("tool name must be a string")
    with _call_lock:
        _next_id[0] += 1
        rid = _next_id[0]
        # The request object, encoded around its two variable parts (the same JSON as
        # encoding the whole dict, without building it).
        request = _REQUEST % (rid, _dumps(name), _dumps({} if args is None else args))
        with _Quiet():
            _send_body(request)
            while True:
                msg = _read_frame()
                if msg.get("id") == rid and "method" not in msg:
                    break
        if "error" in msg:
            err = msg["error"] or {}
            raise ToolError(err.get("code"), err.get("message", ""), err.get("data"))
        return msg.get("result")


_REQUEST = '{"jsonrpc":"2.0","id":%d,"method":"call_tool","params":{"tool":%s,"args":%s}}'


# An interrupt (SIGINT: a stateful sandbox's timeout or cancel) must not land inside the
# socket protocol, where it would leave a frame half read or half written. While the main
# thread is in the protocol it is only remembered, and raised when the main thread leaves it.
_MAIN = _thread.get_ident()
_quiet = [0]
_interrupted = [False]


class _Quiet:
    def __enter__(self):
        if _thread.get_ident() == _MAIN:
            _quiet[0] += 1

    def __exit__(self, *exc):
        if _thread.get_ident() == _MAIN:
            _quiet[0] -= 1
            if not _quiet[0] and _interrupted[0]:
                _interrupted[0] = False
                raise KeyboardInterrupt
        return False


def _on_sigint(signum, frame):
    if _quiet[0]:
        _interrupted[0] = True
    else:
        raise KeyboardInterrupt


PROGRAM = "main.py"


def _help(*args, **kwargs):
    """Show the documentation of an object (pydoc, imported on first use)."""
    import pydoc

    return pydoc.help(*args, **kwargs)


def _input(prompt=""):
    raise EOFError("stdin is closed: a sandboxed program gets no input (pass data in a file, "
                   "an environment variable or a tool call)")


def _exit(code=None):
    raise SystemExit(code)


def _scope(restricted=None):
    """The program's globals, with the builtins `site` would add (skipped: -S); under the
    restricted profile, only its allowlisted builtins and a guarded `__import__`."""
    if not hasattr(builtins, "exit"):
        builtins.exit = builtins.quit = _exit
    if not hasattr(builtins, "help"):
        builtins.help = _help
    builtins.input = _input
    builtins.call_tool = call_tool
    builtins.ToolError = ToolError
    table = builtins if not isinstance(restricted, dict) else _restricted_builtins(restricted)
    return {"__name__": "__main__", "__builtins__": table, "__file__": PROGRAM,
            "call_tool": call_tool, "ToolError": ToolError}


def _restricted_builtins(profile):
    """The restricted profile's builtins: a language-level guard, not a boundary (the OS
    layers are). Exception classes always stay; every other builtin not allowlisted is a stub
    that says why, and imports of blocked modules (and their submodules) are refused."""
    allowed = set(n for n in profile.get("builtins") or () if isinstance(n, str))
    blocked = tuple(n for n in profile.get("blocked_imports") or () if isinstance(n, str))
    real_import = builtins.__import__

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and any(name == b or name.startswith(b + ".") for b in blocked):
            raise ImportError("import of %r is blocked by the restricted profile" % name,
                              name=name)
        return real_import(name, globals, locals, fromlist, level)

    def unavailable(name):
        def stub(*args, **kwargs):
            raise NameError("%r is not available in the restricted profile" % name, name=name)
        stub.__name__ = name
        return stub

    table = {"__name__": "builtins", "__import__": guarded_import,
             "__build_class__": builtins.__build_class__,
             "call_tool": call_tool, "ToolError": ToolError}
    for name, value in vars(builtins).items():
        if name in allowed or (isinstance(value, type) and issubclass(value, BaseException)):
            table[name] = value
        elif not name.startswith("_") and name not in table:
            table[name] = unavailable(name)
    return table


def _run(code, restricted=None):
    program = compile(code, PROGRAM, "exec")
    exec(program, _scope(restricted))


def _print_traceback(exc, code, name=PROGRAM):
    """The traceback of `exc` on stderr as the program's author would expect it: the program's
    frames with their source lines, none of this bootstrap's frames. Only formatting happens
    here (after the program ended), so it changes nothing the program could rely on."""
    import linecache, traceback

    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    ours = _run.__code__.co_filename
    seen = set()

    def clean(te):
        if te is None or id(te) in seen:
            return
        seen.add(id(te))
        te.stack = traceback.StackSummary.from_list(
            [f for f in te.stack if f.filename != ours]
        )
        clean(te.__cause__)
        clean(te.__context__)
        for sub in getattr(te, "exceptions", None) or ():
            clean(sub)

    te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    clean(te)
    lines = list(te.format())
    sys.stderr.write("".join(lines))
    return lines


# The traceback a result carries (its lines as `traceback.format` makes them), at most this
# many characters: the first line and as many of the last (the raising frames) as fit.
MAX_TRACEBACK = 64 * 1024


def _report(exc, code, name=PROGRAM):
    """Print the traceback; the exception as a result reports it: name, value, traceback."""
    try:
        lines = _print_traceback(exc, code, name)
    except BaseException:
        import traceback

        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        sys.stderr.write("".join(lines))
    try:
        value = str(exc)
    except BaseException:
        value = "<str failed>"
    return {"type": type(exc).__name__, "message": value[:4096], "traceback": _tail(lines)}


def _tail(lines):
    if sum(map(len, lines)) <= MAX_TRACEBACK:
        return lines
    kept, left = [], MAX_TRACEBACK - len(lines[0]) - 64
    for line in reversed(lines[1:]):
        if len(line) > left:
            break
        kept.append(line)
        left -= len(line)
    skipped = len(lines) - 1 - len(kept)
    return [lines[0][:MAX_TRACEBACK // 2], "  ... (%d lines left out)\n" % skipped] + kept[::-1]


def _on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def main():
    try:
        _install_seccomp()
        attestation = _attest()
    except BaseException as exc:  # refuse: the broker never sends code to an unfiltered guest
        _send({"jsonrpc": "2.0", "method": "refused",
               "params": {"layer": "seccomp", "message": f"{type(exc).__name__}: {exc}"}})
        os._exit(70)
    _send({"jsonrpc": "2.0", "method": "ready", "params": attestation})
    _signal.signal(_signal.SIGINT, _on_sigint)
    with _Quiet():
        msg = _read_frame()
    if _listener[0] is not None:  # the broker took it before it sent anything
        os.close(_listener[0])
        _listener[0] = None
    if msg.get("method") != "execute":
        os._exit(71)
    rid = msg.get("id")
    params = msg.get("params") or {}
    code = params.get("code", "")
    env = params.get("env")
    if isinstance(env, dict):  # a pooled (warm) executor gets the run's environment here
        _set_environ(env)
    for entry in params.get("sys_path") or ():  # site-packages, as discovered with `site`
        if isinstance(entry, str) and entry not in sys.path:
            sys.path.append(entry)
    sys.stdout.reconfigure(line_buffering=True)
    sys.argv = [PROGRAM]
    sys.path.append(os.getcwd())
    _install_finder()
    _signal.signal(_signal.SIGTERM, _on_sigterm)
    if isinstance(params.get("cell"), int):
        _kernel(rid, params)  # a stateful sandbox: serve cells until the broker ends it
    result = _outcome(lambda c: _run(c, params.get("restricted")), code)
    _flush()
    try:
        _send({"jsonrpc": "2.0", "id": rid, "result": result})
    except BaseException:
        pass
    os._exit(result.get("exit_code", 1) & 0xFF)


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


def _outcome(run, code, name=PROGRAM):
    """Run `run(code)`; the guest's report of how it went (a hint: the broker decides)."""
    try:
        run(code)
    except SystemExit as exc:
        c = exc.code
        exit_code = 0 if c is None else (c if isinstance(c, int) else 1)
        if not isinstance(c, int) and c is not None:
            print(c, file=sys.stderr)
        result = {"status": "completed" if exit_code == 0 else "error", "exit_code": exit_code}
        if exit_code:
            result["error"] = {"type": "SystemExit", "message": f"exit status {exit_code}"}
        return result
    except MemoryError as exc:
        error = _report(exc, code, name)
        error["message"] = "MemoryError"
        return {"status": "error", "exit_code": 1, "error": error}
    except BaseException as exc:
        return {"status": "error", "exit_code": 1, "error": _report(exc, code, name)}
    return {"status": "completed", "exit_code": 0}
