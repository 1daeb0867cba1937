"""Which run in flight an `output` notification or a `call_tool` request belongs to.

The broker names the run by `run_id`, which the client only learns from the run's own
messages (its first notification or tool call, or its response). Runs in different sandboxes
may share one connection, so a message for a run id not seen yet is matched to the one run in
flight that can have sent it. To keep that unambiguous, a run that streams or serves tools
starts only when no other such run that could be confused with it (both streaming, or one tool
name answered by different callables) is still waiting for its first message; see
`conflicts`. A broker that puts `sandbox_id` in those messages makes the wait unnecessary,
and once one such message is seen, it is skipped.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, List, Mapping, Optional

log = logging.getLogger("airlock_client")

#: A tool callback: a dict argument is passed as keyword arguments, anything else positionally.
ToolFn = Callable[..., Any]
#: A streaming callback: one chunk of text, in order.
OutputCallback = Callable[[str], object]


@dataclass(eq=False)
class RunCtx:
    """One run in flight on this connection."""

    sandbox_id: Optional[str]
    tools: Mapping[str, ToolFn] = field(default_factory=dict)
    allowed: Optional[FrozenSet[str]] = None
    on_stdout: Optional[OutputCallback] = None
    on_stderr: Optional[OutputCallback] = None
    run_id: Optional[str] = None

    @property
    def stream(self) -> bool:
        return self.on_stdout is not None or self.on_stderr is not None

    def tool(self, name: str) -> Optional[ToolFn]:
        if self.allowed is not None and name not in self.allowed:
            return None
        return self.tools.get(name)

    def confusable(self, other: "RunCtx") -> bool:
        """Whether a message of one could be taken for the other's."""
        if self.stream and other.stream:
            return True
        for name in self.tools:
            mine, theirs = self.tool(name), other.tool(name)
            if mine is not None and theirs is not None and mine is not theirs:
                return True
        return False

    def deliver(self, stream: str, data: str) -> None:
        cb = self.on_stderr if stream == "stderr" else self.on_stdout
        if cb is None:
            return
        try:
            cb(data)
        except Exception:  # a callback's bug must not break the connection's reader
            log.exception("airlock_client: the %s callback raised", stream)


class RunTable:
    def __init__(self) -> None:
        self._bound: Dict[str, RunCtx] = {}
        self._unbound: List[RunCtx] = []
        self._waiters: List["asyncio.Future[None]"] = []
        #: The broker names the sandbox in `output` and `call_tool` params.
        self.stamped = False

    def _changed(self) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def admit(self, ctx: RunCtx) -> None:
        """Wait until `ctx` cannot be confused with a run in flight, then register it."""
        while not self.stamped and any(u.confusable(ctx) for u in self._unbound):
            fut: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            await fut
        self._unbound.append(ctx)

    def _match(self, run_id: str, params: Mapping[str, Any], fits: Callable[[RunCtx], bool]) -> Optional[RunCtx]:
        ctx = self._bound.get(run_id)
        if ctx is not None:
            return ctx
        if "sandbox_id" in params:
            self.stamped = True
        sid = params.get("sandbox_id")
        cands = [c for c in self._unbound if fits(c) and (not self.stamped or c.sandbox_id == sid)]
        if len(cands) != 1:
            return None
        ctx = cands[0]
        self._unbound.remove(ctx)
        ctx.run_id = run_id
        self._bound[run_id] = ctx
        self._changed()
        return ctx

    def output(self, params: Mapping[str, Any]) -> None:
        run_id, stream, data = params.get("run_id"), params.get("stream"), params.get("data")
        if not (isinstance(run_id, str) and isinstance(stream, str) and isinstance(data, str)):
            return
        ctx = self._match(run_id, params, lambda c: c.stream)
        if ctx is not None:
            ctx.deliver(stream, data)

    def tool(self, params: Mapping[str, Any], name: str) -> Optional[ToolFn]:
        run_id = params.get("run_id")
        if not isinstance(run_id, str):
            return None
        ctx = self._match(run_id, params, lambda c: c.tool(name) is not None)
        if ctx is not None:
            return ctx.tool(name)
        # Several runs could have asked: fine when they would all answer with one callable.
        fns = {id(fn): fn for fn in (c.tool(name) for c in self._unbound) if fn is not None}
        return next(iter(fns.values())) if len(fns) == 1 else None

    def finish(self, ctx: RunCtx) -> None:
        """The run's response arrived, or it never started."""
        if ctx.run_id is not None:
            self._bound.pop(ctx.run_id, None)
        elif ctx in self._unbound:
            self._unbound.remove(ctx)
        self._changed()
