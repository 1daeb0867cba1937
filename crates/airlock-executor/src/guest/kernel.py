
# --- The stateful kernel (appended to bootstrap.py; `main` enters it) -------------------------
# A stateful sandbox keeps this one interpreter across `run_code` calls: each `execute` with a
# `cell` number runs in the same globals, and its answer carries the trailing expression's value.
# Rich output (`display()`, matplotlib figures) goes to the broker as `display` notifications
# before the answer. Between cells the broker stops the process (SIGSTOP); a timeout or a
# cancel is a SIGINT (KeyboardInterrupt in the program, see `_on_sigint`), then a kill.
MAX_JSON = 256 * 1024
# A display item must fit one frame with its base64 and envelope.
MAX_DISPLAY = (MAX_FRAME - 4096) // 4 * 3
# The value's rich representations share its answer's frame with its repr and JSON copy.
MAX_VALUE_BUNDLE = 256 * 1024
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
            _send_body(_answer_body(rid, result))
            msg = _read_frame()
        while msg.get("method") in ("save", "fork", "image_facts"):  # between cells
            if msg.get("method") == "save":
                msg = _answer_save(msg.get("id"), scope)
            elif msg.get("method") == "image_facts":  # before the broker images this process
                msg = _answer_save(msg.get("id"), scope, _image_facts)
            else:  # in a branch this is its first request after the fork
                msg = _answer_fork(msg.get("id"), msg.get("params") or {})
        if msg.get("method") != "execute" or not isinstance((msg.get("params") or {}).get("cell"), int):
            os._exit(71)
        rid, params = msg.get("id"), msg.get("params") or {}
        _interrupted[0] = False  # an interrupt meant for the previous cell
        _enter(params)


def _answer_body(rid, result):
    """The cell's answer within one frame: a value whose repr escapes to more than its share
    loses its rich representations, then its JSON copy."""
    body = _dumps({"jsonrpc": "2.0", "id": rid, "result": result})
    value = result.get("value") or {}
    for extra in ("bundle", "json"):
        if len(body) <= MAX_FRAME - 64:
            break
        value.pop(extra, None)
        body = _dumps({"jsonrpc": "2.0", "id": rid, "result": result})
    return body


def _answer_save(rid, scope, how=None):
    """Stream the scope to the broker (or say what imaging this process needs), answer, and
    read the next request."""
    try:
        answer = {"result": (how or _save)(scope)}
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
        _set_environ(env)
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
    """The trailing expression's value as `repr` text, its rich representations (`bundle`:
    {media type: base64}, text/plain left out: it is the repr) and, where it serialises, JSON."""
    if not _value:
        return result
    value = _value[0]
    _value.clear()
    bundle = dict(_fit(_bundle_of(value), MAX_VALUE_BUNDLE))
    out = {"repr": binascii_text(bundle.pop("text/plain"))}
    if bundle:
        out["bundle"] = bundle
    if isinstance(value, (bool, int, float, str, list, tuple, dict)):
        try:
            encoded = _dumps(value)
            if len(encoded) <= MAX_JSON:
                out["json"] = value
        except (TypeError, ValueError, RecursionError):
            pass
    result["value"] = out
    return result


def binascii_text(b64):
    import binascii

    return binascii.a2b_base64(b64).decode("utf-8", "replace")


def _display(*objs, raw=False, include=None, exclude=None, **ignored):
    """Show objects as rich output, as IPython's `display` does: each becomes one item with
    every representation it has (see `_bundle_of`); `raw=True` shows ready bundles
    ({media type: data})."""
    for obj in objs:
        if raw and isinstance(obj, dict):
            bundle = {m: _mime_bytes(m, d) for m, d in obj.items() if m in MIME_ORDER}
            bundle = {m: d for m, d in bundle.items() if d is not None}
            bundle.setdefault("text/plain", b"")
        else:
            bundle = _bundle_of(obj, include, exclude)
        reps = _fit(bundle, MAX_DISPLAY)
        mime, data = reps[0]
        params = {"mime": mime, "data": data}
        if len(reps) > 1:
            params["bundle"] = dict(reps[1:])
        with _Quiet():
            _send({"jsonrpc": "2.0", "method": "display", "params": params})


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
