
# --- Rich output: the Jupyter MIME model (appended to bootstrap.py) ---------------------------
# An object shown by `display()` or left as a cell's trailing value becomes a bundle {media type:
# bytes} as IPython's formatter makes it: `_repr_mimebundle_`, then each `_repr_*_` method, then
# a matplotlib figure's PNG; `text/plain` (its repr) is always there. Only the types below leave
# the guest, richest first; the broker checks each against its bytes (kernel/display.rs).
MIME_ORDER = ("image/png", "image/jpeg", "image/svg+xml", "text/html", "text/markdown",
              "text/latex", "application/json", "text/plain")
_REPR_METHODS = (("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"),
                 ("image/svg+xml", "_repr_svg_"), ("text/html", "_repr_html_"),
                 ("text/markdown", "_repr_markdown_"), ("text/latex", "_repr_latex_"),
                 ("application/json", "_repr_json_"))
MAX_REPR = 64 * 1024


def _mime_bytes(mime, data):
    """One representation as bytes, or None when it is none (IPython's conventions: text as
    str, images as bytes or base64 text, JSON as data; a (data, metadata) pair)."""
    if isinstance(data, tuple) and len(data) == 2:
        data = data[0]
    if data is None:
        return None
    if mime == "application/json":
        try:
            return (data if isinstance(data, str) else _dumps(data)).encode()
        except (TypeError, ValueError, RecursionError):
            return None
    if mime in ("image/png", "image/jpeg"):
        if isinstance(data, str):
            import binascii

            try:
                return binascii.a2b_base64(data)
            except (binascii.Error, ValueError):
                return None
        return bytes(data) if isinstance(data, (bytes, bytearray)) else None
    if isinstance(data, (bytes, bytearray)):
        return bytes(data).decode("utf-8", "replace").encode()
    return data.encode("utf-8", "replace") if isinstance(data, str) else None


def _call_repr(obj, name, *args):
    method = getattr(obj, name, None)
    if not callable(method) or isinstance(obj, type):
        return None
    try:
        return method(*args)
    except BaseException as exc:
        if not isinstance(exc, Exception):
            raise
        print("airlock: %s.%s failed: %s: %s" % (type(obj).__name__, name, type(exc).__name__,
                                                  exc), file=sys.stderr)
        return None


def _bundle_of(obj, include=None, exclude=None):
    """{media type: bytes} for `obj`, text/plain always present."""
    bundle = {}
    raw = _call_repr(obj, "_repr_mimebundle_", include, exclude)
    if isinstance(raw, tuple) and len(raw) == 2:
        raw = raw[0]
    if isinstance(raw, dict):
        for mime, data in raw.items():
            if mime in MIME_ORDER:
                value = _mime_bytes(mime, data)
                if value is not None:
                    bundle[mime] = value
    for mime, name in _REPR_METHODS:
        if mime not in bundle:
            value = _mime_bytes(mime, _call_repr(obj, name))
            if value is not None:
                bundle[mime] = value
    if "image/png" not in bundle and callable(getattr(obj, "savefig", None)):
        import io

        buf = io.BytesIO()
        obj.savefig(buf, format="png")  # a matplotlib figure
        bundle["image/png"] = buf.getvalue()
    if "text/plain" not in bundle:
        try:
            text = repr(obj)
        except Exception as exc:
            text = "<repr failed: %s>" % type(exc).__name__
        bundle["text/plain"] = text.encode("utf-8", "replace")
    bundle["text/plain"] = bundle["text/plain"][:MAX_REPR]
    return _only(bundle, include, exclude)


def _only(bundle, include, exclude):
    if include:
        bundle = {m: d for m, d in bundle.items() if m in include or m == "text/plain"}
    if exclude:
        bundle = {m: d for m, d in bundle.items() if m not in exclude or m == "text/plain"}
    return bundle


def _fit(bundle, budget):
    """The bundle's representations, richest first, as base64 text, within `budget` decoded
    bytes (text/plain first: it always stays); what does not fit is named in text/plain."""
    import binascii

    out, left, skipped = [], budget - len(bundle.get("text/plain", b"")), []
    for mime in MIME_ORDER[:-1]:
        data = bundle.get(mime)
        if data is None:
            continue
        if len(data) > left:
            skipped.append("%s output of %d bytes" % (mime, len(data)))
            continue
        left -= len(data)
        out.append((mime, data))
    text = bundle.get("text/plain", b"")
    if skipped:
        text += ("\n(%s: too large to return; write it to a file)" % ", ".join(skipped)).encode()
    out.append(("text/plain", text))
    return [(m, binascii.b2a_base64(d, newline=False).decode()) for m, d in out]
