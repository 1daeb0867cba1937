"""Which background process an `output` or `process.exited` notification belongs to.

Unlike a run's, a process's notifications name it (`process_id`), so routing is a lookup. The
broker starts forwarding a process's output before `process.start` answers, and
`sandbox.connect` attaches the connection to every live process of the sandbox, so a
notification can arrive for a process no handle holds yet: it waits here (bounded, oldest
dropped first) until a handle registers, which replays it in order.
"""
from __future__ import annotations

import base64
import binascii
import logging
from collections import OrderedDict
from typing import Any, Dict, List, Mapping, Optional, Protocol, Tuple, Union

log = logging.getLogger("airlock_client")

#: Bytes of output kept for processes no handle holds yet (a process started by this
#: connection is claimed as soon as its `process.start` answers; the rest is what
#: `sandbox.connect` attached the connection to).
MAX_PENDING_BYTES = 1024 * 1024
#: Processes whose unclaimed notifications are kept.
MAX_PENDING_PROCESSES = 64

#: ("output", stream, data) or ("exited", exit_code, signal).
Event = Union[Tuple[str, str, bytes], Tuple[str, Optional[int], Optional[int]]]


class ProcessSink(Protocol):
    """What a process handle offers the router."""

    def on_output(self, stream: str, data: bytes) -> None: ...

    def on_exit(self, exit_code: Optional[int], signal: Optional[int]) -> None: ...

    def on_closed(self, err: BaseException) -> None: ...


def _int(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


class ProcessTable:
    """The process handles of one connection, by process id."""

    def __init__(self) -> None:
        self._sinks: Dict[str, ProcessSink] = {}
        self._pending: "OrderedDict[str, List[Event]]" = OrderedDict()
        self._pending_bytes = 0

    def register(self, process_id: str, sink: ProcessSink) -> None:
        """Route `process_id`'s notifications to `sink`, first those that waited for it."""
        self._sinks[process_id] = sink
        for event in self._take(process_id):
            self._deliver(sink, event)

    def unregister(self, process_id: str, sink: ProcessSink) -> None:
        if self._sinks.get(process_id) is sink:
            del self._sinks[process_id]

    def _take(self, process_id: str) -> List[Event]:
        events = self._pending.pop(process_id, [])
        self._pending_bytes -= sum(len(e[2]) for e in events if isinstance(e[2], bytes))
        return events

    def _keep(self, process_id: str, event: Event) -> None:
        self._pending.setdefault(process_id, []).append(event)
        self._pending.move_to_end(process_id)
        if isinstance(event[2], bytes):
            self._pending_bytes += len(event[2])
        while self._pending and (self._pending_bytes > MAX_PENDING_BYTES
                                 or len(self._pending) > MAX_PENDING_PROCESSES):
            oldest = next(iter(self._pending))
            if oldest == process_id and len(self._pending) == 1:
                # One process alone over the cap: drop its oldest chunks.
                events = self._pending[oldest]
                dropped = events.pop(0)
                if isinstance(dropped[2], bytes):
                    self._pending_bytes -= len(dropped[2])
                if not events:
                    del self._pending[oldest]
                continue
            self._take(oldest)

    @staticmethod
    def _deliver(sink: ProcessSink, event: Event) -> None:
        try:
            if event[0] == "output":
                stream, data = event[1], event[2]
                assert isinstance(stream, str) and isinstance(data, bytes)
                sink.on_output(stream, data)
            else:
                code, sig = event[1], event[2]
                assert not isinstance(code, str) and not isinstance(sig, bytes)
                sink.on_exit(code, sig)
        except Exception:  # a handle's bug (or a user callback's) must not break the reader
            log.exception("airlock_client: delivering a process notification raised")

    def _route(self, process_id: str, event: Event) -> None:
        sink = self._sinks.get(process_id)
        if sink is None:
            self._keep(process_id, event)
        else:
            self._deliver(sink, event)

    def output(self, params: Mapping[str, Any]) -> None:
        """An `output` notification that names a `process_id`."""
        pid, stream, data = params.get("process_id"), params.get("stream"), params.get("data")
        if not (isinstance(pid, str) and isinstance(stream, str) and isinstance(data, str)):
            return
        try:
            raw = base64.b64decode(data, validate=True) if params.get("encoding") == "base64" else data.encode()
        except (binascii.Error, ValueError):
            return
        self._route(pid, ("output", stream, raw))

    def exited(self, params: Mapping[str, Any]) -> None:
        """A `process.exited` notification."""
        pid = params.get("process_id")
        if isinstance(pid, str):
            self._route(pid, ("exited", _int(params.get("exit_code")), _int(params.get("signal"))))

    def on_close(self, err: BaseException) -> None:
        """The connection ended: every handle's waiters learn it."""
        for sink in list(self._sinks.values()):
            try:
                sink.on_closed(err)
            except Exception:
                log.exception("airlock_client: closing a process handle raised")
        self._pending.clear()
        self._pending_bytes = 0
