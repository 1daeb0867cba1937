"""The blocking twins of `sandbox.commands` and `sandbox.pty`: `SyncCommands`, `SyncProcess`,
`SyncPty`, `SyncTerminal` (the async handles driven on the client's loop thread; callbacks run
on that thread)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, List, Literal, Mapping, Optional, Sequence, Union, overload

from ._process import Commands, CommandResult, DataCallback, Process, ProcessInfo, RecentOutput, SignalLike
from ._pty import Pty, Terminal
from ._runs import OutputCallback
from .result import RunResult

if TYPE_CHECKING:
    from .sync import _Loop


class SyncProcess:
    """Blocking `Process`."""

    def __init__(self, loop: "_Loop", process: Process) -> None:
        self._loop, self._p = loop, process

    @property
    def process_id(self) -> str:
        return self._p.process_id

    @property
    def pid(self) -> str:
        return self._p.pid

    @property
    def sandbox_id(self) -> str:
        return self._p.sandbox_id

    @property
    def argv(self) -> List[str]:
        return self._p.argv

    @property
    def exit_code(self) -> Optional[int]:
        return self._p.exit_code

    @property
    def exited(self) -> bool:
        return self._p.exited

    @property
    def stdout(self) -> str:
        return self._p.stdout

    @property
    def stderr(self) -> str:
        return self._p.stderr

    @property
    def async_process(self) -> Process:
        return self._p

    def __repr__(self) -> str:
        return f"SyncProcess({self.process_id!r})"

    def wait(self, timeout: Optional[float] = None) -> CommandResult:
        return self._loop.call(self._p.wait(timeout))

    def kill(self) -> bool:
        return self._loop.call(self._p.kill())

    def signal(self, signal: SignalLike) -> bool:
        return self._loop.call(self._p.signal(signal))

    def send_stdin(self, data: Union[str, bytes]) -> int:
        return self._loop.call(self._p.send_stdin(data))

    def close_stdin(self) -> None:
        self._loop.call(self._p.close_stdin())

    def output(self) -> RecentOutput:
        return self._loop.call(self._p.output())

    def info(self) -> ProcessInfo:
        return self._loop.call(self._p.info())

    def expect(self, pattern: Union[str, bytes], *, timeout: Optional[float] = 30.0,
               stream: Literal["stdout", "stderr"] = "stdout") -> str:
        return self._loop.call(self._p.expect(pattern, timeout=timeout, stream=stream))

    def disconnect(self) -> None:
        self._loop.loop.call_soon_threadsafe(self._p.disconnect)


class SyncCommands:
    """Blocking `Commands`."""

    def __init__(self, loop: "_Loop", commands: Commands) -> None:
        self._loop, self._c = loop, commands

    @overload
    def run(self, cmd: Union[str, Sequence[str]], *, background: Literal[False] = False,
            stdin: Literal[False] = False, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
            timeout: Optional[float] = None, on_stdout: Optional[OutputCallback] = None,
            on_stderr: Optional[OutputCallback] = None) -> RunResult: ...

    @overload
    def run(self, cmd: Union[str, Sequence[str]], *, background: Literal[True], stdin: bool = False,
            cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
            on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None) -> SyncProcess: ...

    def run(self, cmd: Union[str, Sequence[str]], *, background: bool = False, stdin: bool = False,
            cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
            on_stdout: Optional[OutputCallback] = None,
            on_stderr: Optional[OutputCallback] = None) -> Union[RunResult, SyncProcess]:
        """See `Commands.run`."""
        if not background:
            if stdin:
                raise ValueError("a one-shot command has no stdin: use background=True")
            return self._loop.call(self._c.run(cmd, cwd=cwd, env=env, timeout=timeout, on_stdout=on_stdout,
                                               on_stderr=on_stderr))
        p = self._loop.call(self._c.run(cmd, background=True, stdin=stdin, cwd=cwd, env=env, timeout=timeout,
                                        on_stdout=on_stdout, on_stderr=on_stderr))
        return SyncProcess(self._loop, p)

    def list(self) -> List[ProcessInfo]:
        return self._loop.call(self._c.list())

    def connect(self, process_id: str, *, on_stdout: Optional[OutputCallback] = None,
                on_stderr: Optional[OutputCallback] = None) -> SyncProcess:
        return SyncProcess(self._loop, self._loop.call(self._c.connect(process_id, on_stdout=on_stdout,
                                                                       on_stderr=on_stderr)))

    def kill(self, process_id: str) -> bool:
        return self._loop.call(self._c.kill(process_id))


class SyncTerminal:
    """Blocking `Terminal`; iterating it blocks for each chunk."""

    def __init__(self, loop: "_Loop", terminal: Terminal) -> None:
        self._loop, self._t = loop, terminal

    @property
    def process_id(self) -> str:
        return self._t.process_id

    @property
    def pid(self) -> str:
        return self._t.pid

    @property
    def sandbox_id(self) -> str:
        return self._t.sandbox_id

    @property
    def output(self) -> bytes:
        return self._t.output

    @property
    def exit_code(self) -> Optional[int]:
        return self._t.exit_code

    @property
    def exited(self) -> bool:
        return self._t.exited

    @property
    def async_terminal(self) -> Terminal:
        return self._t

    def __repr__(self) -> str:
        return f"SyncTerminal({self.process_id!r})"

    def send_input(self, data: Union[str, bytes]) -> int:
        return self._loop.call(self._t.send_input(data))

    def resize(self, rows: int, cols: int) -> None:
        self._loop.call(self._t.resize(rows, cols))

    def close_stdin(self) -> None:
        self._loop.call(self._t.close_stdin())

    def kill(self) -> bool:
        return self._loop.call(self._t.kill())

    def signal(self, signal: SignalLike) -> bool:
        return self._loop.call(self._t.signal(signal))

    def wait(self, timeout: Optional[float] = None) -> ProcessInfo:
        return self._loop.call(self._t.wait(timeout))

    @overload
    def expect(self, pattern: str, *, timeout: Optional[float] = 30.0) -> str: ...

    @overload
    def expect(self, pattern: bytes, *, timeout: Optional[float] = 30.0) -> bytes: ...

    def expect(self, pattern: Union[str, bytes], *, timeout: Optional[float] = 30.0) -> Union[str, bytes]:
        if isinstance(pattern, str):
            return self._loop.call(self._t.expect(pattern, timeout=timeout))
        return self._loop.call(self._t.expect(pattern, timeout=timeout))

    def recent_output(self) -> RecentOutput:
        return self._loop.call(self._t.recent_output())

    def __iter__(self) -> Iterator[bytes]:
        chunks = self._t.__aiter__()
        while True:
            try:
                yield self._loop.call(chunks.__anext__())
            except StopAsyncIteration:
                return

    def disconnect(self) -> None:
        self._loop.loop.call_soon_threadsafe(self._t.disconnect)


class SyncPty:
    """Blocking `Pty`."""

    def __init__(self, loop: "_Loop", pty: Pty) -> None:
        self._loop, self._p = loop, pty

    def create(self, *, rows: int = 24, cols: int = 80, cmd: Optional[Union[str, Sequence[str]]] = None,
               cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
               on_data: Optional[DataCallback] = None) -> SyncTerminal:
        """See `Pty.create`."""
        return SyncTerminal(self._loop, self._loop.call(self._p.create(
            rows=rows, cols=cols, cmd=cmd, cwd=cwd, env=env, timeout=timeout, on_data=on_data)))

    def connect(self, process_id: str, *, on_data: Optional[DataCallback] = None) -> SyncTerminal:
        return SyncTerminal(self._loop, self._loop.call(self._p.connect(process_id, on_data=on_data)))
