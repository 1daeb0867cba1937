"""Background processes of a sandbox (`sandbox.commands`): `process.*` on the wire
(docs/server.md, "Background processes and terminals"; the sandbox needs `processes` in its
`requires`).

A `Process` handle hears its process's `output` notifications (routed by `process_id`,
`_proc_route`) and completes on `process.exited`. Notifications can be lost (a connection that
reads slowly loses them; a process that ended before a connection attached sends none), so
`wait` also asks the broker (`process.wait`) now and then, and a result's output is checked
against the broker's record (`process.output`, the last 256 KiB) and taken from there when
the notifications missed some.
"""
from __future__ import annotations

import asyncio
import base64
import codecs
import logging
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Any, AsyncIterator, Callable, Dict, List, Literal, Mapping, Optional,
                    Sequence, Tuple, Union, overload)

from ._runs import OutputCallback
from ._session import Session
from .errors import NotFoundError
from .result import RunResult

if TYPE_CHECKING:
    from .sandbox import Sandbox

log = logging.getLogger("airlock_client")

#: A terminal's (or raw) output callback: the bytes as they came.
DataCallback = Callable[[bytes], object]
#: The most input one `process.input` carries (the broker's cap); larger input is split.
MAX_INPUT_BYTES = 64 * 1024
#: Output a handle keeps per stream (the newest; older bytes are counted as dropped).
MAX_KEPT_BYTES = 8 * 1024 * 1024
#: The longest `process.wait` the broker serves.
MAX_WAIT_S = 300.0
#: How often (at most, doubling from the first) `wait` asks the broker whether the process
#: ended, in case its `process.exited` notification was lost.
POLL_FIRST_S, POLL_MAX_S = 0.5, 5.0
#: Signal names the broker accepts (or their numbers).
SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGCONT", "SIGKILL")

SignalLike = Union[str, int]


def _bytes(data: Union[str, bytes]) -> bytes:
    return data.encode() if isinstance(data, str) else bytes(data)


def _int(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


@dataclass(frozen=True)
class ProcessInfo:
    """A process as `process.list` and `process.wait` describe it."""

    process_id: str
    sandbox_id: str
    argv: List[str]
    pty: bool
    state: str  # "running" or "exited"
    exit_code: Optional[int]
    signal: Optional[int]
    started_at_ms: int
    raw: Mapping[str, Any]

    @property
    def running(self) -> bool:
        return self.state == "running"

    @classmethod
    def from_wire(cls, d: Any) -> "ProcessInfo":
        d = d if isinstance(d, dict) else {}
        argv = d.get("argv")
        return cls(process_id=str(d.get("process_id", "")), sandbox_id=str(d.get("sandbox_id", "")),
                   argv=[str(a) for a in argv] if isinstance(argv, list) else [], pty=bool(d.get("pty")),
                   state=str(d.get("state", "")), exit_code=_int(d.get("exit_code")),
                   signal=_int(d.get("signal")), started_at_ms=_int(d.get("started_at_ms")) or 0, raw=d)


@dataclass(frozen=True)
class RecentOutput:
    """`process.output`: the broker's record of a process's recent output (the last 256 KiB of
    both streams together; a terminal's is all `stdout`)."""

    process_id: str
    stdout_data: bytes
    stderr_data: bytes
    dropped_bytes: int  # older bytes no longer kept

    @property
    def stdout(self) -> str:
        return _decode(self.stdout_data)

    @property
    def stderr(self) -> str:
        return _decode(self.stderr_data)

    @classmethod
    def from_wire(cls, d: Any) -> "RecentOutput":
        d = d if isinstance(d, dict) else {}

        def field(name: str) -> bytes:
            v = d.get(name)
            return base64.b64decode(v) if isinstance(v, str) else b""
        return cls(process_id=str(d.get("process_id", "")), stdout_data=field("stdout"),
                   stderr_data=field("stderr"), dropped_bytes=_int(d.get("dropped_bytes")) or 0)


@dataclass(frozen=True)
class CommandResult:
    """How a background process ended, with its output (`Process.wait`)."""

    process_id: str
    exit_code: Optional[int]  # None when a signal ended it
    signal: Optional[int]
    stdout_data: bytes
    stderr_data: bytes
    dropped_bytes: int  # output older than what is here (0: the output is whole)

    @property
    def stdout(self) -> str:
        return _decode(self.stdout_data)

    @property
    def stderr(self) -> str:
        return _decode(self.stderr_data)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class _Stream:
    """One stream's output as a handle keeps it: the newest MAX_KEPT_BYTES, and where they
    start in the whole stream."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.base = 0

    def add(self, data: bytes) -> None:
        self.buf += data
        over = len(self.buf) - MAX_KEPT_BYTES
        if over > 0:
            del self.buf[:over]
            self.base += over

    @property
    def end(self) -> int:
        return self.base + len(self.buf)


class ProcessCore:
    """What a `Process` and a `Terminal` share: the routed notifications, the output kept,
    waiting for the exit, and the `process.*` calls."""

    def __init__(self, session: Session, process_id: str, *, on_stdout: Optional[OutputCallback] = None,
                 on_stderr: Optional[OutputCallback] = None, on_data: Optional[DataCallback] = None) -> None:
        self.session = session
        self.process_id = process_id
        self.on_stdout, self.on_stderr, self.on_data = on_stdout, on_stderr, on_data
        self.streams = {"stdout": _Stream(), "stderr": _Stream()}
        self.received = 0
        self.exit: Optional[Tuple[Optional[int], Optional[int]]] = None
        self.closed: Optional[BaseException] = None
        self._ended = asyncio.Event()
        self._waiters: List["asyncio.Future[None]"] = []
        self._decoders = {k: codecs.getincrementaldecoder("utf-8")("replace") for k in self.streams}
        self._marks = {k: 0 for k in self.streams}
        self._result: Optional[CommandResult] = None

    # -- routing (ProcessSink) --------------------------------------------------------

    def attach(self) -> None:
        self.session.processes.register(self.process_id, self)

    def detach(self) -> None:
        self.session.processes.unregister(self.process_id, self)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def _call(self, stream: str, cb: Optional[Callable[[Any], object]], value: Any) -> None:
        if cb is None:
            return
        try:
            cb(value)
        except Exception:  # a callback's bug must not break the connection's reader
            log.exception("airlock_client: the %s callback of %s raised", stream, self.process_id)

    def on_output(self, stream: str, data: bytes) -> None:
        key = "stderr" if stream == "stderr" else "stdout"
        self.streams[key].add(data)
        self.received += len(data)
        self._call(stream, self.on_data, data)
        text = self._decoders[key].decode(data)
        if text:
            self._call(stream, self.on_stderr if key == "stderr" else self.on_stdout, text)
        self._wake()

    def on_exit(self, exit_code: Optional[int], signal: Optional[int]) -> None:
        if self.exit is not None:
            return
        self.exit = (exit_code, signal)
        for key, dec in self._decoders.items():
            rest = dec.decode(b"", final=True)
            if rest:
                self._call(key, self.on_stderr if key == "stderr" else self.on_stdout, rest)
        self.detach()
        self._ended.set()
        self._wake()

    def on_closed(self, err: BaseException) -> None:
        self.closed = err
        self._ended.set()
        self._wake()

    async def _changed(self, timeout: Optional[float]) -> None:
        fut: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        await asyncio.wait({fut}, timeout=timeout)

    # -- calls ------------------------------------------------------------------------

    async def request(self, method: str, **params: Any) -> Any:
        return await self.session.request(method, {"process_id": self.process_id, **params})

    async def poll(self, timeout_s: float = 0.0) -> ProcessInfo:
        info = ProcessInfo.from_wire(await self.request("process.wait", timeout_s=timeout_s))
        if not info.running:
            self.on_exit(info.exit_code, info.signal)
        return info

    async def wait_exit(self, timeout: Optional[float]) -> bool:
        """Whether the process ended within `timeout` (None: however long it takes)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        poll = POLL_FIRST_S
        while self.exit is None:
            if self.closed is not None:
                raise self.closed
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            step = poll if remaining is None else min(poll, remaining)
            try:
                await asyncio.wait_for(self._ended.wait(), step)
            except asyncio.TimeoutError:
                pass
            if self.exit is None and self.closed is None:
                # The notification may have been lost (a slow reader), or never sent (the
                # process ended before this connection attached).
                await self.poll()
                poll = min(poll * 2, POLL_MAX_S)
        return True

    async def recent(self) -> RecentOutput:
        return RecentOutput.from_wire(await self.request("process.output"))

    async def result(self) -> CommandResult:
        """The ended process's result: the output heard, unless the broker's record shows that
        some was missed (then the broker's record, with what it no longer keeps counted)."""
        if self._result is not None:
            return self._result
        code, sig = self.exit if self.exit is not None else (None, None)
        out, err = self.streams["stdout"], self.streams["stderr"]
        mine = CommandResult(self.process_id, code, sig, bytes(out.buf), bytes(err.buf), out.base + err.base)
        try:
            r = await self.recent()
        except NotFoundError:  # the sandbox (or its record of the process) is gone
            self._result = mine
            return mine
        if self.received < r.dropped_bytes + len(r.stdout_data) + len(r.stderr_data):
            mine = CommandResult(self.process_id, code, sig, r.stdout_data, r.stderr_data, r.dropped_bytes)
        self._result = mine
        return mine

    async def signal(self, signal: SignalLike) -> bool:
        if isinstance(signal, str) and not signal.startswith("SIG"):
            signal = "SIG" + signal.upper()
        result = await self.request("process.signal", signal=signal)
        return bool(result.get("delivered")) if isinstance(result, dict) else False

    async def send(self, data: Union[str, bytes]) -> int:
        raw = _bytes(data)
        sent = 0
        for i in range(0, max(len(raw), 1), MAX_INPUT_BYTES):
            chunk = raw[i:i + MAX_INPUT_BYTES]
            await self.request("process.input", data=base64.b64encode(chunk).decode("ascii"))
            sent += len(chunk)
        return sent

    # -- reading what came ------------------------------------------------------------

    def text(self, key: str) -> str:
        return _decode(bytes(self.streams[key].buf))

    async def expect(self, pattern: Union[str, bytes], timeout: Optional[float], key: str) -> bytes:
        """The output of `key` from the last match (or the start) through the next `pattern`."""
        pat = _bytes(pattern)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            s = self.streams[key]
            start = max(self._marks[key], s.base)
            i = s.buf.find(pat, start - s.base)
            if i >= 0:
                end = i + len(pat)
                self._marks[key] = s.base + end
                return bytes(s.buf[start - s.base:end])
            if self.closed is not None:
                raise self.closed
            tail = bytes(s.buf[-200:])
            if self.exit is not None:
                raise EOFError(f"{self.process_id} ended without printing {pattern!r}; its last output: {tail!r}")
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"{self.process_id} did not print {pattern!r} within {timeout} s; "
                                   f"its last output: {tail!r}")
            await self._changed(remaining)

    async def chunks(self, key: str) -> AsyncIterator[bytes]:
        """Every chunk of `key` from the start (what the handle still keeps), until the exit."""
        pos = 0
        while True:
            s = self.streams[key]
            pos = max(pos, s.base)
            if pos < s.end:
                chunk = bytes(s.buf[pos - s.base:])
                pos = s.end
                yield chunk
                continue
            if self.exit is not None:
                return
            if self.closed is not None:
                raise self.closed
            await self._changed(None)


def command_argv(cmd: Union[str, Sequence[str]]) -> List[str]:
    """A command line (run by `/bin/sh -c`) or an argv."""
    if isinstance(cmd, str):
        return ["/bin/sh", "-c", cmd]
    argv = [str(a) for a in cmd]
    if not argv:
        raise ValueError("the command is empty")
    return argv


def start_params(sandbox_id: str, argv: List[str], *, cwd: Optional[str], env: Optional[Mapping[str, str]],
                 stdin: bool, timeout: Optional[float], pty: Optional[Tuple[int, int]] = None) -> Dict[str, Any]:
    params: Dict[str, Any] = {"sandbox_id": sandbox_id, "argv": argv}
    if cwd is not None:
        params["cwd"] = cwd
    if env is not None:
        params["env"] = dict(env)
    if stdin:
        params["stdin"] = True
    if pty is not None:
        params["pty"] = {"rows": pty[0], "cols": pty[1]}
    if timeout is not None:
        params["timeout_s"] = timeout
    return params


async def start(session: Session, params: Mapping[str, Any], core_of: Callable[[str], ProcessCore]) -> ProcessCore:
    """`process.start`, with the handle routed before anything else runs on the loop (its
    notifications that came before the answer waited in the router)."""
    result = await session.request("process.start", params)
    pid = result.get("process_id") if isinstance(result, dict) else None
    if not isinstance(pid, str):
        raise NotFoundError(f"process.start answered without a process id: {result!r}")
    core = core_of(pid)
    core.attach()
    return core


async def reattach(session: Session, sandbox_id: str, process_id: str,
                   core_of: Callable[[str], ProcessCore]) -> Tuple[ProcessCore, ProcessInfo]:
    """A handle for a process started elsewhere (another connection, or before a reconnect):
    `sandbox.connect` attaches this connection to the sandbox's live processes."""
    core = core_of(process_id)
    core.attach()
    try:
        await session.request("sandbox.connect", {"sandbox_id": sandbox_id})
        info = await core.poll()
    except BaseException:
        core.detach()
        raise
    return core, info


class Process:
    """A background process in a sandbox (`sandbox.commands.run(..., background=True)`). It runs
    until it exits, is signalled, hits its `timeout`, or the sandbox ends; across a dropped
    connection too (`commands.connect(process_id)` re-attaches)."""

    def __init__(self, core: ProcessCore, sandbox_id: str, argv: Sequence[str]) -> None:
        self._core = core
        self._sandbox_id = sandbox_id
        self._argv = list(argv)

    @property
    def process_id(self) -> str:
        """`<sandbox_id>.proc-N`: names the process on any connection."""
        return self._core.process_id

    @property
    def pid(self) -> str:
        """The same as `process_id` (the broker's id, not the guest's pid number)."""
        return self._core.process_id

    @property
    def sandbox_id(self) -> str:
        return self._sandbox_id

    @property
    def argv(self) -> List[str]:
        return list(self._argv)

    @property
    def exit_code(self) -> Optional[int]:
        """None while it runs (as far as this handle has heard), or when a signal ended it."""
        return self._core.exit[0] if self._core.exit is not None else None

    @property
    def exited(self) -> bool:
        return self._core.exit is not None

    @property
    def stdout(self) -> str:
        """The stdout heard so far (decoded; invalid UTF-8 replaced)."""
        return self._core.text("stdout")

    @property
    def stderr(self) -> str:
        return self._core.text("stderr")

    def __repr__(self) -> str:
        return f"Process({self.process_id!r}, argv={self._argv!r})"

    async def wait(self, timeout: Optional[float] = None) -> CommandResult:
        """Wait for the exit (`timeout` in seconds, None: however long); its CommandResult.
        TimeoutError (the builtin) when it is still running then; the process goes on."""
        if not await self._core.wait_exit(timeout):
            raise TimeoutError(f"{self.process_id} was still running after {timeout} s")
        return await self._core.result()

    async def kill(self) -> bool:
        """SIGKILL to the process's whole group; whether it was delivered (False: already gone)."""
        return await self._core.signal("SIGKILL")

    async def signal(self, signal: SignalLike) -> bool:
        """Send `signal` (`"SIGTERM"`, `"TERM"`, `"SIGINT"`, ... or its number; see SIGNALS) to the
        process's group; whether it was delivered."""
        return await self._core.signal(signal)

    async def send_stdin(self, data: Union[str, bytes]) -> int:
        """Write to the process's stdin (started with `stdin=True`); `str` as UTF-8. Large
        input goes in 64 KiB calls. SandboxRefusedError when the process has not read for 5 s."""
        return await self._core.send(data)

    async def close_stdin(self) -> None:
        """End the process's stdin (it reads EOF)."""
        await self._core.request("process.close_stdin")

    async def output(self) -> RecentOutput:
        """The broker's record of the recent output (`process.output`: the last 256 KiB), e.g.
        what came before this handle attached."""
        return await self._core.recent()

    async def info(self) -> ProcessInfo:
        """The process as the broker describes it now."""
        return await self._core.poll()

    async def expect(self, pattern: Union[str, bytes], *, timeout: Optional[float] = 30.0,
                     stream: Literal["stdout", "stderr"] = "stdout") -> str:
        """Wait until `stream` prints `pattern`; the output from the previous match through this
        one (decoded). TimeoutError, or EOFError when the process ended without it."""
        return _decode(await self._core.expect(pattern, timeout, stream))

    def disconnect(self) -> None:
        """Stop routing this process's notifications to this handle (the process goes on)."""
        self._core.detach()


class Commands:
    """`sandbox.commands`: one-shot commands and background processes."""

    def __init__(self, sandbox: "Sandbox", session: Session) -> None:
        self._sandbox = sandbox
        self._session = session

    @overload
    async def run(self, cmd: Union[str, Sequence[str]], *, background: Literal[False] = False,
                  stdin: Literal[False] = False, cwd: Optional[str] = None,
                  env: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
                  on_stdout: Optional[OutputCallback] = None,
                  on_stderr: Optional[OutputCallback] = None) -> RunResult: ...

    @overload
    async def run(self, cmd: Union[str, Sequence[str]], *, background: Literal[True], stdin: bool = False,
                  cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                  timeout: Optional[float] = None, on_stdout: Optional[OutputCallback] = None,
                  on_stderr: Optional[OutputCallback] = None) -> Process: ...

    async def run(self, cmd: Union[str, Sequence[str]], *, background: bool = False, stdin: bool = False,
                  cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                  timeout: Optional[float] = None, on_stdout: Optional[OutputCallback] = None,
                  on_stderr: Optional[OutputCallback] = None) -> Union[RunResult, Process]:
        """Run `cmd` (a string for `/bin/sh -c`, or an argv).

        `background=False`: a one-shot run (`sandbox.exec`): returns its RunResult when it ends;
        `timeout` is the run's budget.
        `background=True`: a background process (`process.start`; the sandbox needs the
        `processes` capability): returns a `Process` at once. `stdin=True` gives it a stdin to
        `send_stdin` to; `timeout` (s) kills it after that long. `on_stdout`/`on_stderr` receive
        its output as it comes (decoded text, on the client's loop). `env` is the whole
        environment; `cwd` defaults to /work."""
        argv = command_argv(cmd)
        if not background:
            if stdin:
                raise ValueError("a one-shot command has no stdin: use background=True")
            return await self._sandbox.exec(argv, cwd=cwd, timeout=timeout, env=env, on_stdout=on_stdout,
                                            on_stderr=on_stderr)
        params = start_params(self._sandbox.sandbox_id, argv, cwd=cwd, env=env, stdin=stdin, timeout=timeout)
        core = await start(self._session, params,
                           lambda pid: ProcessCore(self._session, pid, on_stdout=on_stdout, on_stderr=on_stderr))
        return Process(core, self._sandbox.sandbox_id, argv)

    async def list(self) -> List[ProcessInfo]:
        """The sandbox's processes (recently ended ones included), oldest first."""
        result = await self._session.request("process.list", {"sandbox_id": self._sandbox.sandbox_id})
        procs = result.get("processes") if isinstance(result, dict) else None
        return [ProcessInfo.from_wire(p) for p in procs] if isinstance(procs, list) else []

    async def connect(self, process_id: str, *, on_stdout: Optional[OutputCallback] = None,
                      on_stderr: Optional[OutputCallback] = None) -> Process:
        """A handle for a process started elsewhere (another connection, or before a reconnect):
        it hears the output from now on (`output()` re-reads what came before) and its exit.
        NotFoundError when the sandbox has no such process."""
        core, info = await reattach(
            self._session, self._sandbox.sandbox_id, process_id,
            lambda pid: ProcessCore(self._session, pid, on_stdout=on_stdout, on_stderr=on_stderr))
        return Process(core, self._sandbox.sandbox_id, info.argv)

    async def kill(self, process_id: str) -> bool:
        """SIGKILL to a process by id; whether it was delivered."""
        return await ProcessCore(self._session, process_id).signal("SIGKILL")
