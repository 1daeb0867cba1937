"""One sandbox reached from synchronous or asynchronous framework code.

A framework may call a tool from a plain function or from a coroutine. A `SyncSandbox` serves
both (a coroutine waits for it on a worker thread, and cancelling that coroutine cancels the run
on the broker); an async `Sandbox` serves coroutines only, since its connection belongs to the
event loop that made it.
"""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, List, Optional, TypeVar, Union

from .._runs import OutputCallback
from ..errors import AirlockError
from ..models import FileEntry, FileStat
from ..result import RunResult
from ..sandbox import Sandbox
from ..sync import SyncSandbox

T = TypeVar("T")
AnySandbox = Union[Sandbox, SyncSandbox]


class SandboxBridge:
    """The few sandbox calls the tools make, each in a blocking and an async form."""

    def __init__(self, sandbox: AnySandbox) -> None:
        self.sandbox = sandbox

    def _sync(self) -> SyncSandbox:
        if isinstance(self.sandbox, SyncSandbox):
            return self.sandbox
        raise RuntimeError("this tool holds an async airlock Sandbox: call it with ainvoke, "
                           "or give it a SyncSandbox (SyncClient.sandbox()) to call it synchronously")

    async def _off_loop(self, call: Callable[[SyncSandbox], T]) -> T:
        sb = self._sync()
        try:
            return await asyncio.to_thread(call, sb)
        except asyncio.CancelledError:
            try:  # the worker thread cannot be interrupted; the run on the broker can
                await asyncio.to_thread(sb.cancel)
            except AirlockError:  # already over (not_found), or the connection is gone
                pass
            raise

    async def _either(self, call: Callable[[SyncSandbox], T], acall: Callable[[Sandbox], Awaitable[T]]) -> T:
        if isinstance(self.sandbox, Sandbox):
            return await acall(self.sandbox)
        return await self._off_loop(call)

    def run_code(self, code: str, timeout: Optional[float], on_stdout: Optional[OutputCallback] = None,
                 on_stderr: Optional[OutputCallback] = None) -> RunResult:
        return self._sync().run_code(code, timeout=timeout, on_stdout=on_stdout, on_stderr=on_stderr)

    async def arun_code(self, code: str, timeout: Optional[float], on_stdout: Optional[OutputCallback] = None,
                        on_stderr: Optional[OutputCallback] = None) -> RunResult:
        return await self._either(
            lambda sb: sb.run_code(code, timeout=timeout, on_stdout=on_stdout, on_stderr=on_stderr),
            lambda sb: sb.run_code(code, timeout=timeout, on_stdout=on_stdout, on_stderr=on_stderr))

    def write(self, path: str, data: Union[str, bytes]) -> FileStat:
        return self._sync().files.write(path, data)

    async def awrite(self, path: str, data: Union[str, bytes]) -> FileStat:
        return await self._either(lambda sb: sb.files.write(path, data), lambda sb: sb.files.write(path, data))

    def read(self, path: str) -> bytes:
        return self._sync().files.read(path)

    async def aread(self, path: str) -> bytes:
        return await self._either(lambda sb: sb.files.read(path), lambda sb: sb.files.read(path))

    def list(self, path: Optional[str]) -> List[FileEntry]:
        return self._sync().files.list(path)

    async def alist(self, path: Optional[str]) -> List[FileEntry]:
        return await self._either(lambda sb: sb.files.list(path), lambda sb: sb.files.list(path))
