"""The blocking twins: `SyncClient`, `SyncSandbox`, `SyncFiles` — the async client on an event
loop of its own, on a private thread. Same methods, same explicit keyword arguments.

Tool callbacks run on worker threads (they may block); streaming callbacks run on the client's
loop thread (keep them quick). Interrupting a blocking call (KeyboardInterrupt) cancels the
run on the broker, as cancelling the async task does.
"""
from __future__ import annotations

import asyncio
import threading
from types import TracebackType
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Mapping, Optional, Protocol, Sequence, Type, TypeVar, Union

from . import _trace
from ._files import Files
from ._hybrid import ClassOrInstance
from ._process_sync import SyncCommands, SyncPty
from ._runs import OutputCallback, ToolFn
from .client import AsyncClient, BaseClient, SnapshotLike, StdioClient
from .models import (CollectedOutputs, Disposal, FileEntry, FileStat, SandboxInfo, SandboxRecord, SnapshotInfo,
                     SnapshotRecord)
from .result import Result, RunError, RunResult
from .sandbox import Sandbox
from .spec import (CapabilityLike, DeclaredOutput, Egress, IdleAction, Isolation, IsolationScope, Limits,
                   SandboxKey, Tool, TransferLimits)

T = TypeVar("T")


class _Loop:
    """An event loop running on a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="airlock-client", daemon=True)
        self.thread.start()

    def call(self, coro: Awaitable[T]) -> T:
        caller = _trace.capture()  # the caller's trace context, carried onto the loop thread

        async def wrap() -> T:
            with _trace.attached(caller):
                return await coro
        fut = asyncio.run_coroutine_threadsafe(wrap(), self.loop)
        try:
            return fut.result()
        except BaseException:
            fut.cancel()  # an interrupted caller cancels the task, and so the run on the broker
            raise

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class SyncFiles:
    """Blocking `Files`: see `airlock_client._files.Files`."""

    def __init__(self, loop: _Loop, files: Files) -> None:
        self._loop, self._files = loop, files

    def write(self, path: str, data: Union[bytes, str], *, encoding: str = "utf-8") -> FileStat:
        return self._loop.call(self._files.write(path, data, encoding=encoding))

    def read(self, path: str) -> bytes:
        return self._loop.call(self._files.read(path))

    def read_text(self, path: str, *, encoding: str = "utf-8") -> str:
        return self._loop.call(self._files.read_text(path, encoding=encoding))

    def list(self, path: Optional[str] = None) -> List[FileEntry]:
        return self._loop.call(self._files.list(path))

    def stat(self, path: str) -> FileStat:
        return self._loop.call(self._files.stat(path))

    def exists(self, path: str) -> bool:
        return self._loop.call(self._files.exists(path))

    def remove(self, path: str) -> None:
        self._loop.call(self._files.remove(path))

    def write_many(self, files: Mapping[str, Union[bytes, str]], *, encoding: str = "utf-8") -> List[FileStat]:
        return self._loop.call(self._files.write_many(files, encoding=encoding))

    def make_dir(self, path: str, *, parents: bool = False) -> bool:
        return self._loop.call(self._files.make_dir(path, parents=parents))

    def rename(self, src: str, dst: str) -> FileStat:
        return self._loop.call(self._files.rename(src, dst))


class SyncResumeById(Protocol):
    """`SyncSandbox.resume(client, sandbox_id, *, tools=None)`: see `SyncClient.resume_sandbox`."""

    def __call__(self, client: "SyncClient", sandbox_id: str, *,
                 tools: Optional[Mapping[str, ToolFn]] = None) -> "SyncSandbox": ...


class SyncResumeThis(Protocol):
    """`sync_sandbox.resume()`: see `Sandbox.resume`."""

    def __call__(self) -> SandboxInfo: ...


class SyncSandbox:
    """Blocking `Sandbox`. `cancel()` may be called from another thread while a run blocks."""

    def __init__(self, loop: _Loop, sandbox: Sandbox) -> None:
        self._loop, self._sb = loop, sandbox
        self.files = SyncFiles(loop, sandbox.files)
        self.commands = SyncCommands(loop, sandbox.commands)
        self.pty = SyncPty(loop, sandbox.pty)

    @property
    def sandbox_id(self) -> str:
        return self._sb.sandbox_id

    @property
    def info(self) -> SandboxInfo:
        return self._sb.info

    def __repr__(self) -> str:
        return f"SyncSandbox({self.sandbox_id!r})"

    @classmethod
    def connect(cls, client: "SyncClient", sandbox_id: str, *,
                tools: Optional[Mapping[str, ToolFn]] = None) -> "SyncSandbox":
        return client.connect_sandbox(sandbox_id, tools=tools)

    def snapshot(self) -> SnapshotInfo:
        """See `Sandbox.snapshot`."""
        return self._loop.call(self._sb.snapshot())

    def pause(self) -> SnapshotInfo:
        """See `Sandbox.pause`."""
        return self._loop.call(self._sb.pause())

    def _resume_this(self) -> SandboxInfo:
        return self._loop.call(self._sb.resume())

    @classmethod
    def _resume_by_id(cls, client: "SyncClient", sandbox_id: str, *,
                      tools: Optional[Mapping[str, ToolFn]] = None) -> "SyncSandbox":
        return client.resume_sandbox(sandbox_id, tools=tools)

    #: `SyncSandbox.resume(client, sandbox_id, *, tools=None)` -> SyncSandbox, or
    #: `sync_sandbox.resume()` -> SandboxInfo: see `Sandbox.resume`.
    resume: ClassOrInstance["SyncSandbox", SyncResumeById, SyncResumeThis] = ClassOrInstance("_resume_by_id",
                                                                                             "_resume_this")

    def fork(self, count: int) -> List["SyncSandbox"]:
        """See `Sandbox.fork`."""
        return [SyncSandbox(self._loop, b) for b in self._loop.call(self._sb.fork(count))]

    def describe(self) -> SandboxInfo:
        return self._loop.call(self._sb.describe())

    def set_timeout(self, seconds: float) -> SandboxInfo:
        """See `Sandbox.set_timeout`."""
        return self._loop.call(self._sb.set_timeout(seconds))

    def set_lifetime(self, seconds: float) -> SandboxInfo:
        """See `Sandbox.set_lifetime`."""
        return self._loop.call(self._sb.set_lifetime(seconds))

    def run_code(self, code: str, *, timeout: Optional[float] = None, env: Optional[Mapping[str, str]] = None,
                 on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None,
                 tools: Optional[Sequence[str]] = None, exact_output: bool = False,
                 on_result: Optional[Callable[[Result], Any]] = None,
                 on_error: Optional[Callable[[RunError], Any]] = None) -> RunResult:
        """`Sandbox.run_code`, blocking; `on_result`/`on_error` are called once the run ended."""
        return self._loop.call(self._sb.run_code(code, timeout=timeout, env=env, on_stdout=on_stdout,
                                                 on_stderr=on_stderr, tools=tools, exact_output=exact_output,
                                                 on_result=on_result, on_error=on_error))

    def exec(self, argv: Sequence[str], *, cwd: Optional[str] = None, timeout: Optional[float] = None,
             env: Optional[Mapping[str, str]] = None, on_stdout: Optional[OutputCallback] = None,
             on_stderr: Optional[OutputCallback] = None, exact_output: bool = False) -> RunResult:
        return self._loop.call(self._sb.exec(argv, cwd=cwd, timeout=timeout, env=env, on_stdout=on_stdout,
                                             on_stderr=on_stderr, exact_output=exact_output))

    def cancel(self) -> str:
        return self._loop.call(self._sb.cancel())

    def collect_outputs(self, outputs: Optional[Sequence[DeclaredOutput]] = None) -> CollectedOutputs:
        return self._loop.call(self._sb.collect_outputs(outputs))

    def expose(self, port: int) -> str:
        return self._loop.call(self._sb.expose(port))

    def get_host(self, port: int) -> str:
        return self._loop.call(self._sb.get_host(port))

    def unexpose(self, port: int) -> None:
        self._loop.call(self._sb.unexpose(port))

    def dispose(self) -> Disposal:
        return self._loop.call(self._sb.dispose())

    def __enter__(self) -> "SyncSandbox":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self._loop.call(self._sb.__aexit__(exc_type, exc, tb))


class SyncClient:
    """Blocking client: `SyncClient.connect(url, token)` (WebSocket) or `SyncClient.stdio()`."""

    def __init__(self, aclient: BaseClient, loop: _Loop) -> None:
        self._a, self._loop = aclient, loop

    @classmethod
    def connect(cls, url: str, token: Optional[str] = None, *, open_timeout: float = 10.0) -> "SyncClient":
        loop = _Loop()
        try:
            aclient = loop.call(AsyncClient.connect(url, token, open_timeout=open_timeout))
        except BaseException:
            loop.stop()
            raise
        return cls(aclient, loop)

    @classmethod
    def stdio(cls, binary: Optional[str] = None, args: Sequence[str] = (),
              env: Optional[Mapping[str, str]] = None, *,
              log_level: Optional[str] = "warn") -> "SyncClient":
        """As `StdioClient.start`."""
        loop = _Loop()
        try:
            aclient = loop.call(StdioClient.start(binary, args, env, log_level=log_level))
        except BaseException:
            loop.stop()
            raise
        return cls(aclient, loop)

    @property
    def async_client(self) -> BaseClient:
        """The async client underneath (its coroutines belong to this client's loop)."""
        return self._a

    def execute(self, code: Optional[str] = None, *, argv: Optional[Sequence[str]] = None,
                tools: Optional[Mapping[str, ToolFn]] = None, timeout: Optional[float] = None,
                memory_mb: Optional[int] = None, max_tool_calls: Optional[int] = None,
                max_output_bytes: Optional[int] = None, env: Optional[Mapping[str, str]] = None) -> RunResult:
        """See `AsyncClient.execute`."""
        return self._loop.call(self._a.execute(code, argv=argv, tools=tools, timeout=timeout, memory_mb=memory_mb,
                                               max_tool_calls=max_tool_calls, max_output_bytes=max_output_bytes,
                                               env=env))

    def sandbox(self, *, requires: Optional[Iterable[CapabilityLike]] = None,
                egress: Union[Egress, str, None] = None, egress_allow: Sequence[str] = (),
                isolation_scope: Union[IsolationScope, str, None] = None,
                min_isolation: Union[Isolation, str, None] = None, limits: Optional[Limits] = None,
                files_in: Optional[TransferLimits] = None, files_out: Optional[TransferLimits] = None,
                idle_timeout: Optional[float] = None, tools: Sequence[Tool] = (),
                declared_outputs: Sequence[DeclaredOutput] = (), outputs_named_at_call_time: bool = False,
                key: Optional[SandboxKey] = None, stateful: bool = False,
                restricted: bool = False, image: Optional[str] = None,
                metadata: Optional[Mapping[str, str]] = None,
                idle_action: Union[IdleAction, str, None] = None,
                from_snapshot: Optional[SnapshotLike] = None,
                env: Optional[Mapping[str, str]] = None,
                lifetime: Optional[float] = None) -> SyncSandbox:
        """See `AsyncClient.sandbox`."""
        sb = self._loop.call(self._a.sandbox(
            requires=requires, egress=egress, egress_allow=egress_allow, isolation_scope=isolation_scope,
            min_isolation=min_isolation, limits=limits, files_in=files_in, files_out=files_out,
            idle_timeout=idle_timeout, tools=tools, declared_outputs=declared_outputs,
            outputs_named_at_call_time=outputs_named_at_call_time, key=key, stateful=stateful,
            restricted=restricted, image=image, metadata=metadata, idle_action=idle_action,
            from_snapshot=from_snapshot, env=env, lifetime=lifetime))
        return SyncSandbox(self._loop, sb)

    def connect_sandbox(self, sandbox_id: str, *, tools: Optional[Mapping[str, ToolFn]] = None) -> SyncSandbox:
        return SyncSandbox(self._loop, self._loop.call(self._a.connect_sandbox(sandbox_id, tools=tools)))

    def resume_sandbox(self, sandbox_id: str, *, tools: Optional[Mapping[str, ToolFn]] = None) -> SyncSandbox:
        """See `AsyncClient.resume_sandbox`."""
        return SyncSandbox(self._loop, self._loop.call(self._a.resume_sandbox(sandbox_id, tools=tools)))

    def list_snapshots(self) -> List[SnapshotRecord]:
        """See `AsyncClient.list_snapshots`."""
        return self._loop.call(self._a.list_snapshots())

    def remove_snapshot(self, snapshot: SnapshotLike) -> None:
        """See `AsyncClient.remove_snapshot`."""
        self._loop.call(self._a.remove_snapshot(snapshot))

    def list_sandboxes(self) -> List[SandboxRecord]:
        """See `AsyncClient.list_sandboxes`."""
        return self._loop.call(self._a.list_sandboxes())

    def dispose_scope(self, scope: str, thread_id: str) -> Dict[str, Any]:
        return self._loop.call(self._a.dispose_scope(scope, thread_id))

    def close(self) -> None:
        if self._loop.loop.is_closed():
            return
        self._loop.call(self._a.close())
        self._loop.stop()

    def __enter__(self) -> "SyncClient":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()


#: The name the first releases used.
Client = SyncClient
