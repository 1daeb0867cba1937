"""Transport-independent JSON-RPC logic of one connection to the broker.

A reader feeds every incoming message to `on_message`, which resolves request futures by id,
routes `output` notifications to the run's callbacks and answers the broker's `call_tool`
requests from the run's tool callbacks (each answer its own task, so the reader never blocks).

A run whose awaiting task is cancelled is cancelled on the broker too (`run.cancel`), and its
response is still awaited in the background, so the sandbox's next run does not meet `busy`.
"""
from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any, Awaitable, Callable, Dict, Mapping, Optional, Set

from . import _trace
from ._proc_route import ProcessTable
from ._runs import RunCtx, RunTable, ToolFn
from .errors import (AirlockError, ConnectionClosedError, ErrorCode, NotFoundError, ProgramTooLargeError,
                     ToolDenied, error_from_wire)
from .result import RunResult

#: The broker's one message cap (both hops, both transports).
MAX_MESSAGE_BYTES = 1024 * 1024
#: Session methods the broker serves at once per connection; past that it stops reading the
#: connection (so call_tool answers and run.cancel would wait). The client keeps one below, and
#: never counts `run.cancel` (it must always get through) or `execute` (not a session method).
MAX_IN_FLIGHT = 15
UNCOUNTED = ("run.cancel", "execute")
#: How long a run waits for its sandbox's previous, cancelled run to end before it is sent anyway.
DRAIN_WAIT_S = 60.0

Response = Dict[str, Any]


def _retrieve(fut: "asyncio.Future[Response]") -> None:
    """Mark a failure as seen: a response nobody awaits any more (its task was cancelled) must
    not be reported as an unretrieved exception when the connection closes."""
    if not fut.cancelled():
        fut.exception()


def _call(fn: ToolFn, args: Any) -> Any:
    return fn(**args) if isinstance(args, dict) else fn(args)


class Session:
    def __init__(self, send: Callable[[str], Awaitable[None]]) -> None:
        self._send_raw = send
        self._waiting: Dict[int, "asyncio.Future[Response]"] = {}
        self._next_id = 0
        self._runs = RunTable()
        #: Background processes' notifications, by process id (`_process`).
        self.processes = ProcessTable()
        self._closed: Optional[AirlockError] = None
        self._edge_error: Optional[AirlockError] = None
        self._tasks: Set["asyncio.Future[None]"] = set()
        self._draining: Dict[str, "asyncio.Future[None]"] = {}
        self._slots: Optional[asyncio.Semaphore] = None

    async def _acquire(self, method: str) -> bool:
        """Take one of the broker's in-flight slots for `method`; whether one was taken."""
        if method in UNCOUNTED:
            return False
        if self._slots is None:
            self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        await self._slots.acquire()
        return True

    def _release(self, taken: bool) -> None:
        if taken and self._slots is not None:
            self._slots.release()

    # -- requests -------------------------------------------------------------------------

    def _spawn(self, coro: Awaitable[None]) -> "asyncio.Future[None]":
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _send(self, text: str) -> None:
        if self._closed is not None:
            raise self._closed
        try:
            await self._send_raw(text)
        except AirlockError:
            raise
        except Exception as e:  # the transport's own "closed" error
            raise ConnectionClosedError(f"the connection to the broker is gone: {e}") from e

    def _encode(self, method: str, params: Mapping[str, Any]) -> "tuple[int, str]":
        self._next_id += 1
        rid = self._next_id
        params = _trace.with_meta(params)
        text = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        size = len(text.encode())
        if size > MAX_MESSAGE_BYTES:
            raise ProgramTooLargeError(
                f"the {method} request is {size} bytes, over the {MAX_MESSAGE_BYTES} byte message cap")
        return rid, text

    def _expect(self, rid: int) -> "asyncio.Future[Response]":
        if self._closed is not None:
            raise self._closed
        fut: "asyncio.Future[Response]" = asyncio.get_running_loop().create_future()
        fut.add_done_callback(_retrieve)
        self._waiting[rid] = fut
        return fut

    async def request(self, method: str, params: Mapping[str, Any]) -> Any:
        """Send one request; its result, or its error raised as the typed `AirlockError`."""
        rid, text = self._encode(method, params)
        taken = await self._acquire(method)
        try:
            fut = self._expect(rid)
            await self._send(text)
            resp = await fut
        finally:
            self._waiting.pop(rid, None)
            self._release(taken)
        if "error" in resp:
            raise error_from_wire(resp["error"])
        return resp.get("result")

    async def run(self, method: str, params: Mapping[str, Any], ctx: RunCtx) -> RunResult:
        """A request whose response is a RunResult, with its notifications and tool calls routed
        to `ctx`."""
        key = ctx.sandbox_id or ""
        prev = self._draining.get(key)
        if prev is not None:
            await asyncio.wait({prev}, timeout=DRAIN_WAIT_S)
        rid, text = self._encode(method, params)
        taken = await self._acquire(method)
        try:
            await self._runs.admit(ctx)
        except BaseException:
            self._release(taken)
            raise
        try:
            fut = self._expect(rid)
        except BaseException:
            self._runs.finish(ctx)
            self._release(taken)
            raise
        try:
            await self._send(text)
            resp = await asyncio.shield(fut)  # cancelling this task must leave `fut` to the drain
        except asyncio.CancelledError:
            self._draining[key] = self._spawn(self._abandon(key, rid, fut, ctx, taken))
            raise
        except BaseException:
            self._waiting.pop(rid, None)
            self._runs.finish(ctx)
            self._release(taken)
            raise
        self._waiting.pop(rid, None)
        self._runs.finish(ctx)
        self._release(taken)
        if "error" in resp:
            raise error_from_wire(resp["error"])
        return RunResult.from_wire(resp.get("result"))

    async def _abandon(self, key: str, rid: int, fut: "asyncio.Future[Response]", ctx: RunCtx,
                       taken: bool) -> None:
        """The task awaiting run `rid` was cancelled: cancel the run on the broker, then wait for
        its response so the table and the sandbox are clean for the next run."""
        try:
            if ctx.run_id is not None:
                await self.request("run.cancel", {"run_id": ctx.run_id})
            elif ctx.sandbox_id is not None:
                await self.request("run.cancel", {"sandbox_id": ctx.sandbox_id})
            # An `execute` run cannot be named by run.cancel: it runs to its own end.
        except AirlockError:
            pass  # not_found: it ended meanwhile; closed: the broker cancels it itself
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout=DRAIN_WAIT_S * 5)
        except BaseException:
            pass
        finally:
            self._waiting.pop(rid, None)
            self._runs.finish(ctx)
            self._release(taken)
            if self._draining.get(key) is asyncio.current_task():
                del self._draining[key]

    async def cancel_sandbox_run(self, sandbox_id: str) -> str:
        """`run.cancel {sandbox_id}` -> the cancelled run's id (NotFoundError when none is in flight)."""
        result = await self.request("run.cancel", {"sandbox_id": sandbox_id})
        run_id = result.get("run_id") if isinstance(result, dict) else None
        if not isinstance(run_id, str):
            raise NotFoundError(f"sandbox {sandbox_id} has no run in flight")
        return run_id

    # -- incoming -------------------------------------------------------------------------

    def on_message(self, text: str) -> None:
        try:
            m = json.loads(text)
        except ValueError:
            return
        if not isinstance(m, dict):
            return
        if "method" in m and "id" in m:
            params = m.get("params")
            params = params if isinstance(params, dict) else {}
            if m["method"] == "call_tool":
                self._spawn(self._answer(m["id"], params))
            else:
                self._spawn(self._reply_error(m["id"], ErrorCode.METHOD_NOT_FOUND, "no such method"))
        elif "method" in m:
            params = m.get("params")
            if not isinstance(params, dict):
                return
            if m["method"] == "output" and "process_id" in params:
                self.processes.output(params)
            elif m["method"] == "output":
                self._runs.output(params)
            elif m["method"] == "process.exited":
                self.processes.exited(params)
        elif "result" in m or "error" in m:
            rid = m.get("id")
            if rid is None:
                # The broker could not tie an error to a request (e.g. an over-cap message).
                self._edge_error = error_from_wire(m.get("error"))
                return
            fut = self._waiting.get(rid) if isinstance(rid, int) else None
            if fut is not None and not fut.done():
                fut.set_result(m)

    def on_close(self, why: Optional[str] = None) -> None:
        err = self._edge_error or ConnectionClosedError(why or "the connection to the broker closed")
        self._closed = err
        self.processes.on_close(err)
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(err)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    # -- tool answers ---------------------------------------------------------------------

    async def _reply_raw(self, text: str) -> None:
        try:
            await self._send(text)
        except Exception:  # the connection is gone; the run is being cancelled anyway
            pass

    async def _reply_error(self, rid: Any, code: int, message: str) -> None:
        error = {"code": int(code), "message": message}
        await self._reply_raw(json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}))

    async def _answer(self, rid: Any, params: Dict[str, Any]) -> None:
        name = params.get("tool")
        args = params.get("args")
        fn = self._runs.tool(params, name) if isinstance(name, str) else None
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
        except AirlockError as e:
            return await self._reply_error(rid, e.code, e.message)
        except Exception as e:
            return await self._reply_error(rid, ErrorCode.TOOL_ERROR, f"{type(e).__name__}: {e}")
        if len(text.encode()) > MAX_MESSAGE_BYTES:
            return await self._reply_error(rid, ErrorCode.TOOL_ERROR, "the tool's result is over the message cap")
        await self._reply_raw(text)
