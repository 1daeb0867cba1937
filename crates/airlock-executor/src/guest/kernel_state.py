
# --- A stateful kernel's state, carried across pause/resume (appended after kernel.py) --------
# `save`: the cell scope's names are pickled (protocol 5) and streamed to the broker as `state`
# notifications of base64 chunks, then the request is answered with what was kept and what was
# not. Functions and classes defined in cells travel by value (their code objects, marshalled);
# modules by name (imported again on load); the scope itself by reference. What cannot be
# pickled (an open file, a generator, a thread) is left out and named in the answer. A restored
# kernel gets the same bytes back as `load` notifications right after its first `execute` and
# unpickles them into the new scope before the cell runs. The broker never unpickles anything:
# the bytes are the sandbox's own, loaded only inside a sandbox of the same spec.
STATE_CHUNK = (MAX_FRAME - 4096) // 4 * 3
_FIXED = ("__builtins__", "__name__", "__file__", "call_tool", "ToolError")


def _save(scope):
    modules, values = _split_scope(scope)
    dropped = {}
    pickler = _picklers()[0]
    out = _ChunkWriter()
    try:
        pickler(out, scope).dump((sys.version_info[:2], modules, values))
    except BaseException:
        out.reset()  # the broker drops what came so far; find the culprits one by one
        for name in list(values):
            try:
                pickler(_NullWriter(), scope).dump(values[name])
            except BaseException as exc:
                dropped[name] = ("%s: %s" % (type(exc).__name__, exc))[:200]
                del values[name]
        pickler(out, scope).dump((sys.version_info[:2], modules, values))
    out.close()
    kept = sorted(list(values) + list(modules))
    return {"bytes": out.total, "saved": kept[:1000], "not_saved": dropped}


def _image_facts(scope):
    """What the broker cannot read from outside before it images this (stopped) process: the
    kernel's signal actions and mask, glibc's restartable-sequence area, the working directory
    and the names the image keeps. The broker reads registers, maps and memory itself."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    call = libc.syscall
    call.restype = ctypes.c_long
    act = (ctypes.c_uint64 * 4)()
    actions = []
    for sig in range(1, 65):
        if sig not in (9, 19) and call(ctypes.c_long(13), ctypes.c_long(sig), None, act,
                                       ctypes.c_long(8)) == 0:
            actions.append([sig, act[0], act[1], act[2], act[3]])
    mask = ctypes.c_uint64()
    call(ctypes.c_long(14), ctypes.c_long(0), None, ctypes.byref(mask), ctypes.c_long(8))
    try:
        rseq = [ctypes.c_long.in_dll(libc, "__rseq_offset").value,
                ctypes.c_uint.in_dll(libc, "__rseq_size").value]
    except ValueError:  # a glibc before 2.35 registers none
        rseq = None
    files = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            path = fields[5].strip() if len(fields) == 6 else ""
            if path.startswith("/") and path not in files:
                try:
                    st = os.stat(path)
                except OSError:
                    continue  # the broker finds it unreported and pickles instead
                files[path] = [st.st_size, int(st.st_mtime_ns // 10**9), int(st.st_mtime_ns % 10**9)]
    modules, values = _split_scope(scope)
    return {"sigactions": actions, "sigmask": mask.value, "rseq": rseq, "cwd": os.getcwd(),
            "files": files, "saved": sorted(list(values) + list(modules))[:1000]}


def _split_scope(scope):
    """The scope's own names: modules (by the name to import them again) and the rest."""
    import types

    modules, values = {}, {}
    for name, value in list(scope.items()):
        if name in _FIXED or (name.startswith("__") and name.endswith("__")):
            continue
        if isinstance(value, types.ModuleType):
            modules[name] = value.__name__
        else:
            values[name] = value
    return modules, values


class _ChunkWriter:
    def __init__(self):
        self.buf = bytearray()
        self.total = 0

    def write(self, data):
        self.buf += data
        self.total += len(data)
        while len(self.buf) >= STATE_CHUNK:
            self._send(bytes(self.buf[:STATE_CHUNK]))
            del self.buf[:STATE_CHUNK]
        return len(data)

    def _send(self, data):
        import binascii

        # base64 needs no JSON escaping: the frame is formatted, not encoded (4x faster).
        b64 = binascii.b2a_base64(data, newline=False)
        with _Quiet():
            _send_frame(b'{"jsonrpc":"2.0","method":"state","params":{"data":"%b"}}' % b64)

    def reset(self):
        self.buf.clear()
        self.total = 0
        with _Quiet():
            _send({"jsonrpc": "2.0", "method": "state", "params": {"reset": True}})

    def close(self):
        if self.buf:
            self._send(bytes(self.buf))
            self.buf.clear()


class _NullWriter:
    def write(self, data):
        return len(data)


_picklers_made = []


def _picklers():
    """The state's pickler and unpickler classes, made on first use (importing `pickle` at
    start-up would cost every run)."""
    if _picklers_made:
        return _picklers_made[0]
    import pickle, types

    # The reconstructors live in a module of their own, which pickle names them by and a
    # restored kernel registers the same way (`__main__` here is no module pickle can use).
    home = types.ModuleType("_airlock_state")
    for fn in (_make_function, _fill_function, _make_class, _fill_class):
        fn.__module__ = home.__name__
        setattr(home, fn.__name__, fn)
    sys.modules[home.__name__] = home

    class Pickler(pickle.Pickler):
        def __init__(self, file, scope):
            super().__init__(file, protocol=5)
            self._scope = scope

        def persistent_id(self, obj):
            return "scope" if obj is self._scope else None

        def reducer_override(self, obj):
            if isinstance(obj, types.FunctionType) and obj.__globals__ is self._scope:
                return _function_reduce(obj, self._scope)
            if isinstance(obj, type) and obj.__module__ == "__main__":  # defined in a cell
                return _class_reduce(obj)
            if isinstance(obj, types.ModuleType):
                import importlib

                return importlib.import_module, (obj.__name__,)
            return NotImplemented

    class Unpickler(pickle.Unpickler):
        def __init__(self, file, scope):
            super().__init__(file)
            self._scope = scope

        def persistent_load(self, pid):
            if pid == "scope":
                return self._scope
            raise ValueError("unknown persistent id")

    _picklers_made.append((Pickler, Unpickler))
    return Pickler, Unpickler


def _function_reduce(fn, scope):
    import marshal

    cells = len(fn.__closure__ or ())
    state = {"defaults": fn.__defaults__, "kwdefaults": fn.__kwdefaults__,
             "qualname": fn.__qualname__, "dict": dict(fn.__dict__),
             "annotations": getattr(fn, "__annotations__", None),
             "closure": [_cell_contents(c) for c in fn.__closure__ or ()]}
    return (_make_function, (marshal.dumps(fn.__code__), fn.__name__, scope, cells), state,
            None, None, _fill_function)


_EMPTY_CELL = ("airlock", "empty cell")


def _cell_contents(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY_CELL


def _make_function(code, name, scope, cells):
    import marshal, types

    closure = tuple(types.CellType() for _ in range(cells)) or None
    return types.FunctionType(marshal.loads(code), scope, name, None, closure)


def _fill_function(fn, state):
    fn.__defaults__ = state["defaults"]
    fn.__kwdefaults__ = state["kwdefaults"]
    fn.__qualname__ = state["qualname"]
    fn.__dict__.update(state["dict"])
    if state["annotations"] is not None:
        fn.__annotations__ = state["annotations"]
    for cell, value in zip(fn.__closure__ or (), state["closure"]):
        if value != _EMPTY_CELL:
            cell.cell_contents = value
    return fn


def _class_reduce(cls):
    skip = ("__dict__", "__weakref__")
    attrs = {k: v for k, v in cls.__dict__.items() if k not in skip}
    slots = attrs.pop("__slots__", None)
    for name in (slots,) if isinstance(slots, str) else slots or ():
        attrs.pop(name, None)  # slot descriptors are remade by the class statement
    meta = type(cls)
    return (_make_class, (meta, cls.__name__, cls.__bases__, slots), attrs, None, None,
            _fill_class)


def _make_class(meta, name, bases, slots):
    namespace = {} if slots is None else {"__slots__": slots}
    return meta(name, bases, namespace)


def _fill_class(cls, attrs):
    for k, v in attrs.items():
        try:
            setattr(cls, k, v)
        except (AttributeError, TypeError):  # a read-only attribute the class statement set
            pass
    return cls


def _load(scope):
    """Read the `load` notifications that follow a resumed kernel's first `execute` and
    unpickle them into `scope`; what could not be restored is said on stderr."""
    reader = _ChunkReader()
    failed = {}
    try:
        version, modules, values = _picklers()[1](reader, scope).load()
        if tuple(version) != tuple(sys.version_info[:2]):
            raise ValueError("the state was saved by Python %d.%d" % tuple(version))
        scope.update(values)
        for name, module in modules.items():
            try:
                import importlib

                scope[name] = importlib.import_module(module)
            except BaseException as exc:
                failed[name] = "%s: %s" % (type(exc).__name__, exc)
    except BaseException as exc:
        failed["*"] = "%s: %s" % (type(exc).__name__, exc)
    reader.drain()
    for name, why in sorted(failed.items()):
        print("airlock: %s was not restored: %s" % ("the kernel's state" if name == "*" else
                                                    repr(name), why[:200]), file=sys.stderr)


class _ChunkReader:
    """A file over the `load` notifications: read, readinto and readline, as pickle needs."""

    def __init__(self):
        self.buf = bytearray()
        self.done = False

    def _more(self):
        import binascii

        with _Quiet():
            msg = _read_frame()
        params = msg.get("params") or {}
        if msg.get("method") != "load" or not isinstance(params.get("data"), str):
            os._exit(71)
        self.buf += binascii.a2b_base64(params["data"])
        self.done = bool(params.get("last"))

    # Bytes are copied once out of the buffer (a slice of a bytearray would be a second copy:
    # a state of hundreds of MB read in one `read` would hold it three times over).
    def read(self, n=-1):
        while not self.done and (n < 0 or len(self.buf) < n):
            self._more()
        n = len(self.buf) if n < 0 else min(n, len(self.buf))
        with memoryview(self.buf) as view:
            out = view[:n].tobytes()
        del self.buf[:n]
        return out

    def readinto(self, b):
        want = len(b)
        while not self.done and len(self.buf) < want:
            self._more()
        n = min(want, len(self.buf))
        with memoryview(self.buf) as view:
            b[:n] = view[:n]
        del self.buf[:n]
        return n

    def readline(self):
        while not self.done and b"\n" not in self.buf:
            self._more()
        at = self.buf.find(b"\n")
        return self.read(len(self.buf) if at < 0 else at + 1)

    def drain(self):
        """Read what the unpickler left and drop it a chunk at a time, never holding it."""
        self.buf.clear()
        while not self.done:
            self._more()
            self.buf.clear()
