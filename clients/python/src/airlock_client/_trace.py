"""The caller's trace context on every request: when `opentelemetry` is importable, each request
carries the current span's W3C context (`opentelemetry.propagate.inject`) in its params member
`_meta` (`traceparent`, `tracestate`), so the server's span for it is a child of the caller's
(docs/server.md "Traces"). Without `opentelemetry`, or with no span current, params are sent as
they are. The sync client runs requests on a loop thread of its own: it carries the caller's
context there (`capture` in the caller's thread, `attached` around the request)."""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, Mapping, Optional

try:
    from opentelemetry import context as _context  # type: ignore[import-not-found,unused-ignore]
    from opentelemetry import propagate as _propagate  # type: ignore[import-not-found,unused-ignore]
    HAVE_OTEL = True
except ImportError:  # the SDK works the same without it
    HAVE_OTEL = False

#: The params member that carries the context (the MCP convention).
META = "_meta"
_FIELDS = ("traceparent", "tracestate")


def with_meta(params: Mapping[str, Any]) -> Mapping[str, Any]:
    """`params`, plus `_meta` with the current trace context when there is one to send."""
    if not HAVE_OTEL:
        return params
    carrier: Dict[str, str] = {}
    _propagate.inject(carrier)
    meta = {k: carrier[k] for k in _FIELDS if carrier.get(k)}
    if "traceparent" not in meta:
        return params
    return {**params, META: meta}


def capture() -> Optional[Any]:
    """The calling thread's current context (None without `opentelemetry`)."""
    return _context.get_current() if HAVE_OTEL else None


@contextlib.contextmanager
def attached(ctx: Optional[Any]) -> Iterator[None]:
    """Makes `ctx` (from `capture`) current for the block."""
    if ctx is None or not HAVE_OTEL:
        yield
        return
    token = _context.attach(ctx)
    try:
        yield
    finally:
        _context.detach(token)
