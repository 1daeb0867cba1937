"""The clients: `AsyncClient` (WebSocket), `StdioClient` (spawns `airlock serve --stdio`) and
the blocking `Client` wrapper."""
from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, Optional, Sequence

import websockets
from websockets.asyncio.client import connect as ws_connect

from ._session import MAX_MESSAGE_BYTES, Session
from .errors import AirlockError, ProtocolError, UnauthorizedError
from .result import RunResult

#: Longest header section accepted from the broker on stdio.
MAX_HEADER_BYTES = 4096


class _Base:
    _session: Session

    async def execute(self, code: Optional[str] = None, **kwargs: Any) -> RunResult:
        """Run `code` (or `argv=[...]`) in a fresh sandbox; answer its tool calls from `tools`.

        Keyword arguments: argv, tools ({name: callable or async callable}; a dict argument
        is passed as keyword arguments), timeout (s), memory_mb, max_tool_calls,
        max_output_bytes, env. Returns a RunResult for any run that started (check
        `.status`); raises a typed AirlockError for a request refused before the run.
        """
        return await self._session.execute(code, **kwargs)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class AsyncClient(_Base):
    """A WebSocket connection to `airlock serve --listen`. One run at a time."""

    def __init__(self, ws):
        self._ws = ws
        self._session = Session(self._ws.send)
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def connect(cls, url: str, token: Optional[str] = None, *, open_timeout: float = 10.0) -> "AsyncClient":
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            ws = await ws_connect(url, additional_headers=headers, max_size=MAX_MESSAGE_BYTES,
                                  compression=None, open_timeout=open_timeout)
        except websockets.exceptions.InvalidStatus as e:
            status = e.response.status_code
            if status == 401:
                raise UnauthorizedError("the broker refused the bearer token") from e
            raise AirlockError(f"websocket upgrade refused with HTTP {status}") from e
        return cls(ws)

    async def _read(self) -> None:
        why = None
        try:
            async for message in self._ws:
                self._session.on_message(message if isinstance(message, str) else message.decode())
        except websockets.exceptions.ConnectionClosed as e:
            why = f"connection closed ({e.rcvd.code if e.rcvd else 'no close frame'})"
        finally:
            self._session.on_close(why)

    async def close(self) -> None:
        await self._ws.close()
        await asyncio.gather(self._reader, return_exceptions=True)


class StdioClient(_Base):
    """Spawns `airlock serve --stdio` and talks Content-Length framing over its pipes."""

    def __init__(self, proc):
        self._proc = proc
        self._session = Session(self._write)
        self._lock = asyncio.Lock()
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, binary: Optional[str] = None, args: Sequence[str] = (), env=None) -> "StdioClient":
        binary = binary or os.environ.get("AIRLOCK_BIN", "airlock")
        proc = await asyncio.create_subprocess_exec(
            binary, "serve", "--stdio", *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env=env, limit=MAX_MESSAGE_BYTES + MAX_HEADER_BYTES)
        return cls(proc)

    async def _write(self, text: str) -> None:
        body = text.encode()
        async with self._lock:
            self._proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            await self._proc.stdin.drain()

    async def _read_frame(self) -> Optional[bytes]:
        length, seen = None, 0
        while True:
            line = await self._proc.stdout.readline()
            if not line:
                return None
            seen += len(line)
            if seen > MAX_HEADER_BYTES:
                raise ProtocolError("header section too long")
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("ascii", "replace").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if length is None or length < 0 or length > MAX_MESSAGE_BYTES:
            raise ProtocolError(f"bad content-length {length!r}")
        return await self._proc.stdout.readexactly(length)

    async def _read(self) -> None:
        why = None
        try:
            while True:
                body = await self._read_frame()
                if body is None:
                    break
                self._session.on_message(body.decode("utf-8", "replace"))
        except (ProtocolError, ValueError, asyncio.IncompleteReadError) as e:
            why = str(e)
        finally:
            self._session.on_close(why)

    async def close(self) -> None:
        if self._proc.stdin and not self._proc.stdin.is_closing():
            self._proc.stdin.close()
        await asyncio.gather(self._reader, return_exceptions=True)
        await self._proc.wait()


class Client:
    """Blocking wrapper over `AsyncClient`: an event loop on a private thread. Tool callbacks
    run on worker threads, so they may block."""

    def __init__(self, aclient: AsyncClient, loop: asyncio.AbstractEventLoop, thread: threading.Thread):
        self._a, self._loop, self._thread = aclient, loop, thread

    @classmethod
    def connect(cls, url: str, token: Optional[str] = None, **kwargs: Any) -> "Client":
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="airlock-client", daemon=True)
        thread.start()
        try:
            aclient = asyncio.run_coroutine_threadsafe(AsyncClient.connect(url, token, **kwargs), loop).result()
        except BaseException:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()
            raise
        return cls(aclient, loop, thread)

    def execute(self, code: Optional[str] = None, **kwargs: Any) -> RunResult:
        """See `AsyncClient.execute`."""
        return asyncio.run_coroutine_threadsafe(self._a.execute(code, **kwargs), self._loop).result()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self._a.close(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
