"""Terminals in a sandbox (`sandbox.pty`): a process on a pty pair of its own (`process.start`
with `pty`; the sandbox needs the `processes` capability). Its output is one stream of bytes
(what a terminal shows: echo, prompts, escape sequences); input is what a keyboard sends
(`"\\x03"` is Ctrl-C, `"\\x04"` Ctrl-D)."""
from __future__ import annotations

from typing import TYPE_CHECKING, AsyncIterator, Dict, Mapping, Optional, Sequence, Union, overload

from ._process import (DataCallback, ProcessCore, ProcessInfo, RecentOutput, SignalLike, _decode, command_argv,
                       reattach, start, start_params)
from ._session import Session

if TYPE_CHECKING:
    from .sandbox import Sandbox

#: The command `pty.create` runs by default.
DEFAULT_SHELL = ("/bin/bash", "-i")
#: The environment a terminal gets when `env` is not given (a program's environment is whole:
#: nothing else is added).
DEFAULT_TERMINAL_ENV: Mapping[str, str] = {
    "TERM": "xterm-256color", "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/work", "LANG": "C.UTF-8"}


class Terminal:
    """A process on a terminal in the sandbox (`sandbox.pty.create(...)`). Read its output with
    the `on_data` callback, `async for chunk in terminal`, `expect(...)`, or `output`."""

    def __init__(self, core: ProcessCore, sandbox_id: str) -> None:
        self._core = core
        self._sandbox_id = sandbox_id

    @property
    def process_id(self) -> str:
        return self._core.process_id

    @property
    def pid(self) -> str:
        """The same as `process_id`."""
        return self._core.process_id

    @property
    def sandbox_id(self) -> str:
        return self._sandbox_id

    @property
    def output(self) -> bytes:
        """Everything the terminal showed so far (the newest 8 MiB)."""
        return bytes(self._core.streams["stdout"].buf)

    @property
    def exit_code(self) -> Optional[int]:
        return self._core.exit[0] if self._core.exit is not None else None

    @property
    def exited(self) -> bool:
        return self._core.exit is not None

    def __repr__(self) -> str:
        return f"Terminal({self.process_id!r})"

    async def send_input(self, data: Union[str, bytes]) -> int:
        """Type `data` (`str` as UTF-8); the bytes sent. SandboxRefusedError when the terminal
        has not read for 5 s."""
        return await self._core.send(data)

    async def resize(self, rows: int, cols: int) -> None:
        """Change the terminal's size (the program gets SIGWINCH)."""
        await self._core.request("process.resize", rows=rows, cols=cols)

    async def close_stdin(self) -> None:
        """Ctrl-D at the start of a line (end of input)."""
        await self._core.request("process.close_stdin")

    async def kill(self) -> bool:
        """SIGKILL to the terminal's process group; whether it was delivered."""
        return await self._core.signal("SIGKILL")

    async def signal(self, signal: SignalLike) -> bool:
        return await self._core.signal(signal)

    async def wait(self, timeout: Optional[float] = None) -> ProcessInfo:
        """Wait for the exit (None: however long); the process as the broker describes it.
        TimeoutError (the builtin) when it is still running then."""
        if not await self._core.wait_exit(timeout):
            raise TimeoutError(f"{self.process_id} was still running after {timeout} s")
        return await self._core.poll()

    @overload
    async def expect(self, pattern: str, *, timeout: Optional[float] = 30.0) -> str: ...

    @overload
    async def expect(self, pattern: bytes, *, timeout: Optional[float] = 30.0) -> bytes: ...

    async def expect(self, pattern: Union[str, bytes], *, timeout: Optional[float] = 30.0) -> Union[str, bytes]:
        """Wait until the terminal shows `pattern`; what it showed from the previous match
        through this one (`str` for a `str` pattern, decoded). TimeoutError, or EOFError when
        the process ended without it."""
        data = await self._core.expect(pattern, timeout, "stdout")
        return _decode(data) if isinstance(pattern, str) else data

    async def recent_output(self) -> RecentOutput:
        """The broker's record of the recent output (`process.output`, the last 256 KiB)."""
        return await self._core.recent()

    def __aiter__(self) -> AsyncIterator[bytes]:
        """Every chunk the terminal shows, from its start (what this handle keeps) to its exit."""
        return self._core.chunks("stdout")

    def disconnect(self) -> None:
        """Stop routing this terminal's output to this handle (the process goes on)."""
        self._core.detach()


class Pty:
    """`sandbox.pty`: terminals."""

    def __init__(self, sandbox: "Sandbox", session: Session) -> None:
        self._sandbox = sandbox
        self._session = session

    async def create(self, *, rows: int = 24, cols: int = 80, cmd: Optional[Union[str, Sequence[str]]] = None,
                     cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                     timeout: Optional[float] = None, on_data: Optional[DataCallback] = None) -> Terminal:
        """Start `cmd` (default `/bin/bash -i`; a string runs under `/bin/sh -c`) on a `rows` x
        `cols` terminal. `env` is the whole environment (default DEFAULT_TERMINAL_ENV);
        `timeout` (s) kills it after that long; `on_data` receives the output bytes as they
        come (on the client's loop)."""
        argv = command_argv(cmd if cmd is not None else list(DEFAULT_SHELL))
        environ: Dict[str, str] = dict(env if env is not None else DEFAULT_TERMINAL_ENV)
        params = start_params(self._sandbox.sandbox_id, argv, cwd=cwd, env=environ, stdin=False, timeout=timeout,
                              pty=(rows, cols))
        core = await start(self._session, params, lambda pid: ProcessCore(self._session, pid, on_data=on_data))
        return Terminal(core, self._sandbox.sandbox_id)

    async def connect(self, process_id: str, *, on_data: Optional[DataCallback] = None) -> Terminal:
        """A handle for a terminal started elsewhere; it hears the output from now on."""
        core, _ = await reattach(self._session, self._sandbox.sandbox_id, process_id,
                                 lambda pid: ProcessCore(self._session, pid, on_data=on_data))
        return Terminal(core, self._sandbox.sandbox_id)
