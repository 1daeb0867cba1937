"""Transport-independent JSON-RPC logic of one connection to the broker.

The broker sends `call_tool` requests mid-run; a reader feeds every incoming message to
`on_message`, which answers them from the tool callbacks of the run in flight (without
blocking the reader: each answer is its own task) and resolves `execute` futures by id.
"""
from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any, Awaitable, Callable, Dict, Mapping, Optional, Sequence

from .errors import (AirlockError, ConnectionClosedError, ErrorCode, ProgramTooLargeError, ToolDenied,
                     error_from_wire)
from .result import RunResult

#: The broker's one message cap (both hops, both transports).
MAX_MESSAGE_BYTES = 1024 * 1024

Tool = Callable[..., Any]


def _call(fn: Tool, args: Any) -> Any:
    return fn(**args) if isinstance(args, dict) else fn(args)


class Session:
    def __init__(self, send: Callable[[str], Awaitable[None]]):
        self._send = send
        self._waiting: Dict[int, asyncio.Future] = {}
        self._next_id = 0
        self._tools: Optional[Mapping[str, Tool]] = None
        self._closed: Optional[AirlockError] = None
        self._edge_error: Optional[AirlockError] = None
        self._tasks: set = set()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def execute(
        self,
        code: Optional[str] = None,
        *,
        argv: Optional[Sequence[str]] = None,
        tools: Optional[Mapping[str, Tool]] = None,
        timeout: Optional[float] = None,
        memory_mb: Optional[int] = None,
        max_tool_calls: Optional[int] = None,
        max_output_bytes: Optional[int] = None,
        env: Optional[Mapping[str, str]] = None,
    ) -> RunResult:
        if (code is None) == (argv is None):
            raise ValueError("give exactly one of code= or argv=")
        params: Dict[str, Any] = {"code": code} if code is not None else {"argv": list(argv or [])}
        limits = {k: v for k, v in (("timeout_s", timeout), ("memory_mb", memory_mb),
                                    ("max_tool_calls", max_tool_calls),
                                    ("max_output_bytes", max_output_bytes)) if v is not None}
        if limits:
            params["limits"] = limits
        if env:
            params["env"] = dict(env)
        tools = dict(tools or {})
        params["tools"] = sorted(tools)
        self._next_id += 1
        rid = self._next_id
        text = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "execute", "params": params})
        if len(text.encode()) > MAX_MESSAGE_BYTES:
            raise ProgramTooLargeError(
                f"the execute request is {len(text.encode())} bytes, over the {MAX_MESSAGE_BYTES} byte cap")
        if self._closed is not None:
            raise self._closed
        fut = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        active = self._tools is None
        if active:
            self._tools = tools
        try:
            await self._send(text)
            resp = await fut
        finally:
            self._waiting.pop(rid, None)
            if active:
                self._tools = None
        if "error" in resp:
            raise error_from_wire(resp["error"])
        return RunResult.from_wire(resp.get("result"))

    def on_message(self, text: str) -> None:
        try:
            m = json.loads(text)
        except ValueError:
            return
        if not isinstance(m, dict):
            return
        if "method" in m and "id" in m:
            if m["method"] == "call_tool":
                self._spawn(self._answer(m["id"], m.get("params") or {}))
            else:
                self._spawn(self._reply_error(m["id"], ErrorCode.METHOD_NOT_FOUND, "no such method"))
        elif "result" in m or "error" in m:
            rid = m.get("id")
            if rid is None:
                # The broker could not tie an error to a request (e.g. an over-cap message).
                self._edge_error = error_from_wire(m.get("error"))
                return
            fut = self._waiting.get(rid)
            if fut is not None and not fut.done():
                fut.set_result(m)

    def on_close(self, why: Optional[str] = None) -> None:
        err = self._edge_error or ConnectionClosedError(why or "the connection to the broker closed")
        self._closed = err
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(err)

    async def _reply(self, payload: Dict[str, Any]) -> None:
        try:
            await self._send(json.dumps(payload))
        except Exception:  # the connection is gone; the run is being cancelled anyway
            pass

    async def _reply_error(self, rid: Any, code: int, message: str) -> None:
        await self._reply({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})

    async def _answer(self, rid: Any, params: Dict[str, Any]) -> None:
        name = params.get("tool")
        args = params.get("args")
        fn = (self._tools or {}).get(name) if isinstance(name, str) else None
        if fn is None:
            return await self._reply_error(rid, ErrorCode.UNKNOWN_TOOL, f"no tool named {name!r} is available")
        try:
            if inspect.iscoroutinefunction(fn):
                value = await _call(fn, args)
            else:
                value = await asyncio.to_thread(_call, fn, args)
                if inspect.isawaitable(value):
                    value = await value
            text = json.dumps({"jsonrpc": "2.0", "id": rid, "result": value})
        except ToolDenied as e:
            return await self._reply_error(rid, ErrorCode.TOOL_DENIED, str(e) or "denied")
        except Exception as e:
            return await self._reply_error(rid, ErrorCode.TOOL_ERROR, f"{type(e).__name__}: {e}")
        if len(text.encode()) > MAX_MESSAGE_BYTES:
            return await self._reply_error(rid, ErrorCode.TOOL_ERROR, "the tool's result is over the message cap")
        try:
            await self._send(text)
        except Exception:
            pass
