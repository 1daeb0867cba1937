"""Rich results in the Jupyter MIME model: one object's representations by media type, with an
accessor per type (None when the object has none). The broker checked each against its type
(a PNG or JPEG walks as one, text is UTF-8, JSON parses); docs/protocol.md, "Rich output"."""
from __future__ import annotations

import base64
import inspect
import json as _json
from typing import Any, Awaitable, Callable, Dict, Mapping, Optional, Union

#: Every media type the broker returns, the richest first.
MIME_TYPES = ("image/png", "image/jpeg", "image/svg+xml", "text/html", "text/markdown", "text/latex",
              "application/json", "text/plain")


def decode_bundle(v: Any) -> Dict[str, bytes]:
    """A wire bundle ({media type: base64}) as bytes; anything malformed is left out."""
    out: Dict[str, bytes] = {}
    if isinstance(v, dict):
        for mime, data in v.items():
            if isinstance(mime, str) and isinstance(data, str):
                out[mime] = base64.b64decode(data)
    return out


class Rich:
    """Accessors over `formats()` (media type → bytes)."""

    def formats(self) -> Mapping[str, bytes]:
        """Every representation, by media type."""
        raise NotImplementedError

    def _text(self, mime: str) -> Optional[str]:
        data = self.formats().get(mime)
        return data.decode("utf-8", "replace") if data is not None else None

    @property
    def text(self) -> Optional[str]:
        """text/plain: the object's repr."""
        return self._text("text/plain")

    @property
    def html(self) -> Optional[str]:
        return self._text("text/html")

    @property
    def markdown(self) -> Optional[str]:
        return self._text("text/markdown")

    @property
    def svg(self) -> Optional[str]:
        return self._text("image/svg+xml")

    @property
    def latex(self) -> Optional[str]:
        return self._text("text/latex")

    @property
    def json(self) -> Any:
        """application/json, parsed (None when absent)."""
        data = self.formats().get("application/json")
        return _json.loads(data) if data is not None else None

    @property
    def png(self) -> Optional[bytes]:
        return self.formats().get("image/png")

    @property
    def jpeg(self) -> Optional[bytes]:
        return self.formats().get("image/jpeg")


#: A callback for each rich result (`on_result`: a `DisplayItem` or the `CellValue`); on the
#: async API it may be a coroutine function.
ResultCallback = Callable[[Any], Union[None, Awaitable[None]]]
#: A callback for the exception a run's code raised (`on_error`: its `RunError`).
ErrorCallback = Callable[[Any], Union[None, Awaitable[None]]]


async def call_back(cb: Optional[Callable[[Any], Any]], arg: Any) -> None:
    """Call `cb(arg)`, awaiting what it returns when that is awaitable."""
    if cb is None:
        return
    out = cb(arg)
    if inspect.isawaitable(out):
        await out
