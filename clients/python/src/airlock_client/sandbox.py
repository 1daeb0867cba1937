"""`Sandbox`: a sandbox that persists across runs (docs/server.md, "Sandboxes that persist").

Each run is a fresh process over the sandbox's persistent `/work`; files move in and out with
`files`; a run can stream its output and be cancelled; `dispose()` (or leaving `async with`)
frees everything.
"""
from __future__ import annotations

import asyncio
from types import TracebackType
from typing import TYPE_CHECKING, Any, Awaitable, Dict, List, Mapping, Optional, Protocol, Sequence, Type

from ._files import Files
from ._hybrid import ClassOrInstance
from ._process import Commands
from ._pty import Pty
from ._runs import OutputCallback, RunCtx, ToolFn
from ._session import Session
from .errors import AirlockError, NotFoundError
from .models import CollectedOutputs, Disposal, SandboxInfo, SnapshotInfo
from .result import RunResult
from .rich import ErrorCallback, ResultCallback, call_back
from .spec import DeclaredOutput

if TYPE_CHECKING:
    from .client import BaseClient


def run_params(sandbox_id: str, *, timeout: Optional[float], env: Optional[Mapping[str, str]],
               stream: bool, exact_output: bool = False) -> Dict[str, Any]:
    params: Dict[str, Any] = {"sandbox_id": sandbox_id}
    if exact_output:
        params["output_encoding"] = "base64"
    if timeout is not None:
        params["timeout_s"] = timeout
    if env is not None:
        params["env"] = dict(env)
    if stream:
        params["stream"] = True
    return params


def fork_count(count: int) -> int:
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(f"count must be an int, not {type(count).__name__}")
    return count


class ResumeById(Protocol):
    """`Sandbox.resume(client, sandbox_id, *, tools=None)`: see `BaseClient.resume_sandbox`."""

    def __call__(self, client: "BaseClient", sandbox_id: str, *,
                 tools: Optional[Mapping[str, ToolFn]] = None) -> Awaitable["Sandbox"]: ...


class ResumeThis(Protocol):
    """`sandbox.resume()`: see `Sandbox._resume_this`."""

    def __call__(self) -> Awaitable[SandboxInfo]: ...


def _port(port: int) -> int:
    if isinstance(port, bool) or not isinstance(port, int):
        raise TypeError(f"port must be an int, not {type(port).__name__}")
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} is not in 1..65535")
    return port


class Sandbox:
    """A live sandbox on the broker. Make one with `client.sandbox(...)`, re-attach to one by id
    with `Sandbox.connect(client, id)` (or `client.connect_sandbox(id)`)."""

    def __init__(self, session: Session, info: SandboxInfo, tools: Optional[Mapping[str, ToolFn]] = None) -> None:
        self._session = session
        self._info = info
        self._tools: Dict[str, ToolFn] = dict(tools or {})
        self._disposed = False
        self._paused = False
        #: File transfer: `write`, `read`, `read_text`, `list`, `stat`, `exists`, `remove`.
        self.files = Files(session, info.sandbox_id)
        #: Commands, one-shot or in the background (`processes` capability): `run`, `list`, `connect`.
        self.commands = Commands(self, session)
        #: Terminals (`processes` capability): `create`, `connect`.
        self.pty = Pty(self, session)

    @property
    def sandbox_id(self) -> str:
        return self._info.sandbox_id

    @property
    def info(self) -> SandboxInfo:
        """The broker's description of this sandbox (as of create or the last `describe()`)."""
        return self._info

    def __repr__(self) -> str:
        return f"Sandbox({self.sandbox_id!r})"

    @classmethod
    async def connect(cls, client: "BaseClient", sandbox_id: str, *,
                      tools: Optional[Mapping[str, ToolFn]] = None) -> "Sandbox":
        """Re-attach to a live sandbox by id (from any connection). `tools` answers the tools its
        spec declared, by name."""
        return await client.connect_sandbox(sandbox_id, tools=tools)

    # -- snapshots, pause and fork (`snapshot` capability; docs/sdk.md) -----------------------

    async def snapshot(self) -> SnapshotInfo:
        """Save the sandbox's files (/work, /tmp, /dev/shm) and, if it is stateful, its
        interpreter's variables to the server's state directory (`sandbox.snapshot`); the sandbox
        goes on running. Kept until `client.remove_snapshot()`; `client.sandbox(from_snapshot=)`
        starts new sandboxes from it. `.kernel.not_saved` names the variables left behind, and
        why. Needs `Capability.SNAPSHOT` (SandboxRefusedError otherwise, and on a server with no
        state directory); BusyError while a run is in flight."""
        return SnapshotInfo.from_wire(await self._session.request("sandbox.snapshot",
                                                                  {"sandbox_id": self.sandbox_id}))

    async def pause(self) -> SnapshotInfo:
        """Snapshot the sandbox, then free its processes and memory (`sandbox.pause`). Durable: it
        survives a server restart on the same `--state-dir`. This object stays usable: any later
        call on it (a run, a file, `describe()`, `resume()`) resumes the sandbox first, under the
        same id. Leaving `async with` while it is still paused leaves it paused (`dispose()`
        forgets it). Refusals as `snapshot()`; SandboxRefusedError if it is paused already."""
        info = SnapshotInfo.from_wire(await self._session.request("sandbox.pause", {"sandbox_id": self.sandbox_id}))
        self._paused = True
        return info

    async def _resume_this(self) -> SandboxInfo:
        """Resume this sandbox if it is paused (`sandbox.resume`; a live one is left as it is);
        returns (and keeps) its description. NotFoundError when it is gone."""
        self._info = SandboxInfo.from_wire(await self._session.request("sandbox.resume",
                                                                       {"sandbox_id": self.sandbox_id}))
        self._paused = False
        return self._info

    @classmethod
    async def _resume_by_id(cls, client: "BaseClient", sandbox_id: str, *,
                            tools: Optional[Mapping[str, ToolFn]] = None) -> "Sandbox":
        """Resume a paused sandbox by id (`client.resume_sandbox`), from any connection and after
        a server restart on the same state directory."""
        return await client.resume_sandbox(sandbox_id, tools=tools)

    #: `await Sandbox.resume(client, sandbox_id, *, tools=None)` -> Sandbox: a paused sandbox
    #: by id (a live one is re-attached). `await sandbox.resume()` -> SandboxInfo: this one.
    resume: ClassOrInstance["Sandbox", ResumeById, ResumeThis] = ClassOrInstance("_resume_by_id", "_resume_this")

    async def fork(self, count: int) -> List["Sandbox"]:
        """`count` (1..16) new sandboxes, each holding this one's files and interpreter variables
        as they are now (`sandbox.fork`); they share nothing afterwards, with this one or each
        other. Branches are keyless, get this sandbox's spec, metadata and tools, and are
        disposed of like any other (`async with`, `dispose()`, their idle timeout). Refusals as
        `snapshot()`; InvalidParamsError for a count out of range."""
        r = await self._session.request("sandbox.fork", {"sandbox_id": self.sandbox_id,
                                                         "count": fork_count(count)})
        ids = [str(i) for i in (r.get("sandbox_ids") if isinstance(r, dict) else None) or []]
        infos = await asyncio.gather(*(self._session.request("sandbox.connect", {"sandbox_id": i}) for i in ids))
        return [Sandbox(self._session, SandboxInfo.from_wire(i), self._tools) for i in infos]

    async def describe(self) -> SandboxInfo:
        """Ask the broker again (`sandbox.connect`); NotFoundError once it is gone."""
        self._info = SandboxInfo.from_wire(await self._session.request("sandbox.connect",
                                                                       {"sandbox_id": self.sandbox_id}))
        return self._info

    async def set_timeout(self, seconds: float) -> SandboxInfo:
        """Change the idle timeout (`sandbox.set_timeout`): disposed after `seconds` without a
        call, from now (the call is a use). Same bounds as `idle_timeout` at create: more than
        0, at most 86400 (else InvalidParamsError). The spec a key compares keeps the timeout
        the sandbox was made with. Returns (and keeps) the new description."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError("seconds is a number")
        self._info = SandboxInfo.from_wire(await self._session.request(
            "sandbox.set_timeout", {"sandbox_id": self.sandbox_id, "idle_timeout_s": seconds}))
        return self._info

    async def set_lifetime(self, seconds: float) -> SandboxInfo:
        """End the sandbox's life `seconds` from now, whatever its activity
        (`sandbox.set_lifetime`): then it is paused (`idle_action="pause"`) or disposed of.
        More than 0, at most 30 days (else InvalidParamsError). Returns the new description
        (`info.ends_at_ms`)."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError("seconds is a number")
        self._info = SandboxInfo.from_wire(await self._session.request(
            "sandbox.set_lifetime", {"sandbox_id": self.sandbox_id, "lifetime_s": seconds}))
        return self._info

    async def run_code(self, code: str, *, timeout: Optional[float] = None, env: Optional[Mapping[str, str]] = None,
                       on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None,
                       tools: Optional[Sequence[str]] = None, exact_output: bool = False,
                       on_result: Optional[ResultCallback] = None,
                       on_error: Optional[ErrorCallback] = None) -> RunResult:
        """Run Python `code` in a fresh process over the sandbox's files.

        `timeout` (s) overrides the spec's run budget; `env` is the program's whole environment;
        `on_stdout`/`on_stderr` receive the output as it is produced, in order (the result
        still carries all of it); `tools` narrows the declared tools this run may call;
        `exact_output` asks for each stream's exact bytes (`RunResult.stdout_data`/`stderr_data`).
        Returns the RunResult of any run that started (check `.status`); raises a typed
        AirlockError for a refusal (BusyError, NotFoundError, InvalidParamsError, ...).
        Cancelling the awaiting task cancels the run on the broker. When the run has ended,
        `on_result` receives each rich result in order (`RunResult.results`: displayed objects,
        then the cell's value) and `on_error` the `RunError` of an exception the code raised;
        either may be a coroutine function.
        """
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        params = run_params(self.sandbox_id, timeout=timeout, env=env,
                            stream=on_stdout is not None or on_stderr is not None, exact_output=exact_output)
        params["code"] = code
        allowed = None
        if tools is not None:
            if isinstance(tools, str):
                raise TypeError("tools is a list of tool names")
            params["tools"] = sorted(tools)
            allowed = frozenset(tools)
        ctx = RunCtx(self.sandbox_id, self._tools, allowed, on_stdout, on_stderr)
        result = await self._session.run("sandbox.run_code", params, ctx)
        for item in result.results:
            await call_back(on_result, item)
        if result.error is not None and result.error.name is not None:
            await call_back(on_error, result.error)
        return result

    async def exec(self, argv: Sequence[str], *, cwd: Optional[str] = None, timeout: Optional[float] = None,
                   env: Optional[Mapping[str, str]] = None, on_stdout: Optional[OutputCallback] = None,
                   on_stderr: Optional[OutputCallback] = None, exact_output: bool = False) -> RunResult:
        """Run a command (`["/bin/sh", "-c", "ls -l"]`) in the sandbox; `cwd` defaults to /work.
        Otherwise as `run_code`."""
        if isinstance(argv, str):
            raise TypeError("argv is a list of strings, e.g. ['/bin/sh', '-c', command]")
        params = run_params(self.sandbox_id, timeout=timeout, env=env,
                            stream=on_stdout is not None or on_stderr is not None, exact_output=exact_output)
        params["argv"] = list(argv)
        if cwd is not None:
            params["cwd"] = cwd
        ctx = RunCtx(self.sandbox_id, {}, None, on_stdout, on_stderr)
        return await self._session.run("sandbox.exec", params, ctx)

    async def cancel(self) -> str:
        """Cancel the run in flight (`run.cancel`); its own call then returns a RunResult with
        status `cancelled`. Returns the cancelled run's id; NotFoundError when none is running."""
        return await self._session.cancel_sandbox_run(self.sandbox_id)

    async def collect_outputs(self, outputs: Optional[Sequence[DeclaredOutput]] = None) -> CollectedOutputs:
        """The spec's `declared_outputs` (or `outputs`, if the spec allowed outputs named at call
        time), all-or-nothing: FileRefusedError (`.kind`) when any check fails."""
        params: Dict[str, Any] = {"sandbox_id": self.sandbox_id}
        if outputs is not None:
            params["outputs"] = [o.to_wire() for o in outputs]
        return CollectedOutputs.from_wire(await self._session.request("outputs.collect", params))

    async def expose(self, port: int) -> str:
        """Serve `port` of the sandbox's own loopback on the server's listener (`sandbox.expose`):
        the URL, `http://<server>/x/<token>/`, whose unguessable token is the only credential
        (a browser can open it). Exposing a port twice gives the same URL. Needs the `ports`
        capability (SandboxRefusedError otherwise) and a server started with `--listen`
        (SandboxRefusedError, kind `PortsNeedListener`, on `--stdio`)."""
        r = await self._session.request("sandbox.expose", {"sandbox_id": self.sandbox_id, "port": _port(port)})
        return str(r["url"])

    async def get_host(self, port: int) -> str:
        """The exposed `port`'s address without its scheme, `<server>/x/<token>` (exposing it
        first if it is not), for `f"http://{host}/..."` or `f"ws://{host}/..."`."""
        url = await self.expose(port)
        return url.split("://", 1)[-1].rstrip("/")

    async def unexpose(self, port: int) -> None:
        """Revoke the exposure of `port` (`sandbox.unexpose`): its URL answers 404 like one never
        issued, and its live connections close at once. A port not exposed is no error."""
        await self._session.request("sandbox.unexpose", {"sandbox_id": self.sandbox_id, "port": _port(port)})

    async def _still_paused(self) -> bool:
        """Whether the server lists this sandbox as paused (a call since `pause()` resumed it)."""
        try:
            result = await self._session.request("sandbox.list", {})
        except AirlockError:
            return False
        items = result.get("sandboxes") if isinstance(result, dict) else None
        return any(isinstance(s, dict) and s.get("sandbox_id") == self.sandbox_id and s.get("state") == "paused"
                   for s in items or [])

    async def dispose(self) -> Disposal:
        """Cancel any run, free everything the sandbox holds. A second call is a NotFoundError.
        On a paused sandbox, forgets it (and its snapshot, unless `snapshot()` kept that)."""
        d = Disposal.from_wire(await self._session.request("sandbox.dispose", {"sandbox_id": self.sandbox_id}))
        self._disposed = True
        return d

    async def __aenter__(self) -> "Sandbox":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        if self._disposed or self._session.closed:
            return
        if self._paused and await self._still_paused():
            return
        try:
            await self.dispose()
        except NotFoundError:
            pass  # disposed elsewhere, or idled out
