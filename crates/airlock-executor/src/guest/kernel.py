
# --- The stateful kernel (appended to bootstrap.py; `main` enters it) -------------------------
# A stateful sandbox keeps this one interpreter across `run_code` calls: each `execute` with a
# `cell` number runs in the same globals, and its answer carries the trailing expression's value.
# Rich output (`display()`, matplotlib figures) goes to the broker as `display` notifications
# before the answer. Between cells the broker stops the process (SIGSTOP); a timeout or a
# cancel is a SIGINT (KeyboardInterrupt in the program, see `_on_sigint`), then a kill.
MAX_REPR = 64 * 1024
MAX_JSON = 256 * 1024
# A display item must fit one frame with its base64 and envelope.
MAX_DISPLAY = (MAX_FRAME - 4096) // 4 * 3
CO_COROUTINE = 0x80
_loop = [None]


def _kernel(rid, params):
    import ast, linecache

    os.environ.setdefault("MPLBACKEND", "Agg")  # figures render to PNG, never to a display
    builtins.display = _display
    scope = _scope(params.get("restricted"))
    if params.get("restore") is True:
        _load(scope)  # a resumed kernel: the paused one's names, before its first cell
    while True:
        result = _outcome_value(_outcome(lambda code: _cell(ast, linecache, code, params, scope),
                                         params.get("code", ""), _cell_name(params)))
        _figures()
        _flush()
        with _Quiet():
            _send({"jsonrpc": "2.0", "id": rid, "result": result})
            msg = _read_frame()
        while msg.get("method") == "save":  # between cells: the broker snapshots the state
            msg = _answer_save(msg.get("id"), scope)
        if msg.get("method") != "execute" or not isinstance((msg.get("params") or {}).get("cell"), int):
            os._exit(71)
        rid, params = msg.get("id"), msg.get("params") or {}
        _interrupted[0] = False  # an interrupt meant for the previous cell
        _enter(params)


def _answer_save(rid, scope):
    """Stream the scope to the broker, answer, and read the next request."""
    try:
        answer = {"result": _save(scope)}
    except BaseException as exc:
        answer = {"error": {"code": -32603, "message": ("%s: %s" % (type(exc).__name__, exc))[:500]}}
    answer.update({"jsonrpc": "2.0", "id": rid})
    with _Quiet():
        _send(answer)
        return _read_frame()


def _cell_name(params):
    return "<cell %d>" % params.get("cell", 0)


def _enter(params):
    """A cell's own environment and working directory."""
    env = params.get("env")
    if isinstance(env, dict):
        keep = os.environ.get("MPLBACKEND")
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in env.items()})
        os.environ.setdefault("MPLBACKEND", keep or "Agg")
    cwd = params.get("cwd")
    if isinstance(cwd, str):
        os.chdir(cwd)


def _cell(ast, linecache, code, params, scope):
    """Run one cell in `scope`; remember the value of a trailing expression in `_value`."""
    _value.clear()
    name = _cell_name(params)
    # Kept for the kernel's life: functions defined here show their source in later tracebacks.
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    try:
        tree = ast.parse(code, name, "exec")
    except SyntaxError as exc:  # the parser's own frames are not the program's
        exc.__traceback__ = None
        raise exc
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    _finish(compile(tree, name, "exec", flags=flags), scope)
    if last is not None:
        value = _finish(compile(last, name, "eval", flags=flags), scope)
        if value is not None:
            scope["_"] = value
            _value.append(value)


def _finish(code, scope):
    """Evaluate compiled cell code; a cell that used top-level `await` is a coroutine, run to
    the end on the kernel's event loop."""
    result = eval(code, scope)
    if not code.co_flags & CO_COROUTINE:
        return result
    import asyncio

    if _loop[0] is None or _loop[0].is_closed():
        _loop[0] = asyncio.new_event_loop()
    try:
        return _loop[0].run_until_complete(result)
    except BaseException as exc:
        if not isinstance(exc, Exception):  # interrupted: the loop may be mid-step; a new one
            _loop[0] = None
        raise


_value = []


def _outcome_value(result):
    """The trailing expression's value as `repr` text and, where it serialises, JSON."""
    if not _value:
        return result
    value = _value[0]
    _value.clear()
    try:
        text = repr(value)
    except BaseException as exc:
        text = "<repr failed: %s>" % type(exc).__name__
    out = {"repr": text[:MAX_REPR]}
    if isinstance(value, (bool, int, float, str, list, tuple, dict)):
        try:
            encoded = _dumps(value)
            if len(encoded) <= MAX_JSON:
                out["json"] = value
        except (TypeError, ValueError, RecursionError):
            pass
    result["value"] = out
    return result


def _display(*objs):
    """Show objects as rich output: a PNG when they render to one (matplotlib figures,
    `_repr_png_`), else their text."""
    for obj in objs:
        png = _png_of(obj)
        if png is not None:
            _emit("image/png", png)
        else:
            _emit("text/plain", repr(obj).encode("utf-8", "replace")[:MAX_REPR])


def _png_of(obj):
    render = getattr(obj, "_repr_png_", None)
    if callable(render):
        data = render()
        return data if isinstance(data, bytes) else None
    savefig = getattr(obj, "savefig", None)
    if callable(savefig):
        import io

        buf = io.BytesIO()
        savefig(buf, format="png")
        return buf.getvalue()
    return None


def _emit(mime, data):
    import binascii

    if len(data) > MAX_DISPLAY:
        data = b"(%s output of %d bytes is too large to return; write it to a file)" % (
            mime.encode(), len(data))
        mime = "text/plain"
    with _Quiet():
        _send({"jsonrpc": "2.0", "method": "display",
               "params": {"mime": mime, "data": binascii.b2a_base64(data, newline=False).decode()}})


def _figures():
    """Every open matplotlib figure comes back as a PNG, then is closed (as a notebook does)."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        for num in plt.get_fignums():
            _display(plt.figure(num))
        plt.close("all")
    except BaseException as exc:
        print("airlock: a figure could not be rendered: %s: %s" % (type(exc).__name__, exc),
              file=sys.stderr)
