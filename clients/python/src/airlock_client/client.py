"""The asynchronous clients: `AsyncClient` (WebSocket) and `StdioClient` (spawns
`airlock serve --stdio`), over one shared API in `BaseClient`."""
from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Type, TypeVar, Union

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect

from ._binary import find_airlock_bin
from ._runs import RunCtx, ToolFn
from ._session import MAX_MESSAGE_BYTES, Session
from .errors import AirlockError, ConnectionError, ProtocolError, UnauthorizedError
from .models import SandboxInfo, SandboxRecord, SnapshotInfo, SnapshotRecord
from .result import RunResult
from .sandbox import Sandbox
from .spec import (DEFAULT_REQUIRES, Capability, CapabilityLike, DeclaredOutput, Egress, IdleAction, Isolation,
                   IsolationScope, Limits, SandboxKey, Tool, TransferLimits, capabilities)

#: Longest header section accepted from the broker on stdio.
MAX_HEADER_BYTES = 4096

C = TypeVar("C", bound="BaseClient")

#: A snapshot named by its id or by what `snapshot()`/`pause()`/`list_snapshots()` returned.
SnapshotLike = Union[str, SnapshotInfo, SnapshotRecord]


def snapshot_id_of(snapshot: SnapshotLike) -> str:
    if isinstance(snapshot, (SnapshotInfo, SnapshotRecord)):
        return snapshot.snapshot_id
    if not isinstance(snapshot, str):
        raise TypeError(f"a snapshot is named by its id (str), not {type(snapshot).__name__}")
    return snapshot


def execute_params(code: Optional[str], argv: Optional[Sequence[str]], limits: Limits,
                   env: Optional[Mapping[str, str]], tools: Iterable[str]) -> Dict[str, Any]:
    if (code is None) == (argv is None):
        raise ValueError("give exactly one of code= or argv=")
    if isinstance(argv, str):
        raise TypeError("argv is a list of strings, e.g. ['/bin/echo', 'hi']")
    params: Dict[str, Any] = {"code": code} if code is not None else {"argv": list(argv or [])}
    if limits.to_wire():
        params["limits"] = limits.to_wire()
    if env:
        params["env"] = dict(env)
    params["tools"] = sorted(tools)
    return params


def create_params(*, requires: Optional[Iterable[CapabilityLike]], egress: Union[Egress, str, None],
                  egress_allow: Sequence[str], isolation_scope: Union[IsolationScope, str, None],
                  min_isolation: Union[Isolation, str, None], limits: Optional[Limits],
                  files_in: Optional[TransferLimits], files_out: Optional[TransferLimits],
                  idle_timeout: Optional[float], tools: Sequence[Tool], declared_outputs: Sequence[DeclaredOutput],
                  outputs_named_at_call_time: bool, key: Optional[SandboxKey], stateful: bool = False,
                  restricted: bool = False, image: Optional[str] = None,
                  metadata: Optional[Mapping[str, str]] = None,
                  idle_action: Union[IdleAction, str, None] = None,
                  from_snapshot: Optional[SnapshotLike] = None,
                  env: Optional[Mapping[str, str]] = None,
                  lifetime: Optional[float] = None) -> Dict[str, Any]:
    """The `sandbox.create` params; deterministic, so an equal spec under one key is equal on the wire.

    With `from_snapshot` and no spec argument at all, the params carry no `spec`: the broker
    makes the sandbox with the snapshot's own."""
    if isinstance(egress_allow, str):
        raise TypeError("egress_allow is a list of 'host[:port]' strings")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise TypeError("metadata is a mapping of str to str")
    if env is not None and not isinstance(env, Mapping):
        raise TypeError("env is a mapping of str to str")
    action = IdleAction(idle_action) if idle_action is not None else None
    snapshot = snapshot_id_of(from_snapshot) if from_snapshot is not None else None
    spec_given = (requires is not None or egress is not None or bool(egress_allow) or isolation_scope is not None
                  or min_isolation is not None or limits is not None or files_in is not None
                  or files_out is not None or idle_timeout is not None or bool(tools) or bool(declared_outputs)
                  or outputs_named_at_call_time or stateful or restricted or image is not None
                  or metadata is not None or action is not None or env is not None or lifetime is not None)
    if snapshot is not None and not spec_given:
        bare: Dict[str, Any] = {"from_snapshot": snapshot}
        if key is not None:
            bare["key"] = key.to_wire()
        return bare
    caps = capabilities(requires) if requires is not None else None
    if caps is None and (tools or action is IdleAction.PAUSE):
        caps = DEFAULT_REQUIRES | ({Capability.HOST_TOOLS} if tools else set()) \
            | ({Capability.SNAPSHOT} if action is IdleAction.PAUSE else set())
    spec: Dict[str, Any] = {}
    if caps is not None:
        spec["requires"] = sorted(c.value for c in caps)
    spec["egress"] = Egress(egress).value if egress is not None else (
        Egress.ALLOWLIST.value if egress_allow else Egress.CLOSED.value)
    if egress_allow:
        spec["egress_allow"] = list(egress_allow)
    if isolation_scope is not None:
        spec["isolation_scope"] = IsolationScope(isolation_scope).value
    if min_isolation is not None:
        spec["min_isolation"] = Isolation(min_isolation).value
    if limits is not None and limits.to_wire():
        spec["limits"] = limits.to_wire()
    if files_in is not None:
        spec["files_in"] = files_in.to_wire()
    if files_out is not None:
        spec["files_out"] = files_out.to_wire()
    if idle_timeout is not None:
        spec["idle_timeout_s"] = idle_timeout
    if action is not None:
        spec["idle_action"] = action.value
    if tools:
        spec["tools"] = [t.declaration.to_wire() for t in tools]
    if declared_outputs:
        spec["declared_outputs"] = [o.to_wire() for o in declared_outputs]
    if outputs_named_at_call_time:
        spec["outputs_named_at_call_time"] = True
    if stateful:
        spec["stateful"] = True
    if restricted:
        spec["restricted"] = True
    if image is not None:
        spec["image"] = str(image)
    if metadata:
        spec["metadata"] = dict(metadata)
    if env:
        spec["env"] = dict(env)
    if lifetime is not None:
        spec["lifetime_s"] = lifetime
    params: Dict[str, Any] = {"spec": spec}
    if key is not None:
        params["key"] = key.to_wire()
    if snapshot is not None:
        params["from_snapshot"] = snapshot
    return params


class BaseClient:
    """What every transport offers: one-shot `execute`, and persistent sandboxes."""

    _session: Session

    async def execute(self, code: Optional[str] = None, *, argv: Optional[Sequence[str]] = None,
                      tools: Optional[Mapping[str, ToolFn]] = None, timeout: Optional[float] = None,
                      memory_mb: Optional[int] = None, max_tool_calls: Optional[int] = None,
                      max_output_bytes: Optional[int] = None, env: Optional[Mapping[str, str]] = None) -> RunResult:
        """Run `code` (or `argv=[...]`) in a fresh, throw-away sandbox; answer its tool calls from
        `tools` ({name: callable or async callable}; a dict argument is passed as keyword
        arguments). Returns a RunResult for any run that started (check `.status`); raises a
        typed AirlockError for a request refused before the run. One at a time per connection.
        """
        limits = Limits(timeout_s=timeout, memory_mb=memory_mb, max_tool_calls=max_tool_calls,
                        max_output_bytes=max_output_bytes)
        tools = dict(tools or {})
        params = execute_params(code, argv, limits, env, tools)
        return await self._session.run("execute", params, RunCtx(None, tools))

    async def sandbox(self, *, requires: Optional[Iterable[CapabilityLike]] = None,
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
                      lifetime: Optional[float] = None) -> Sandbox:
        """Create a sandbox that persists across runs (`sandbox.create`).

        `requires`: the capabilities it may use (default: all but host tools; `host_tools` is
        added when `tools` are given). `egress`: closed (default) or allowlist (the default when
        `egress_allow` names hosts). `limits`: every run's limits. `files_in`/`files_out`:
        transfer caps. `idle_timeout` (s): disposed after this long without a call.
        `tools`: declared tools with the callables that answer them. `declared_outputs`: what
        `collect_outputs()` returns. `key`: the same key with an equal spec returns the same
        sandbox. `stateful`: one interpreter serves every `run_code` (variables, imports and
        objects persist; results carry `value` and `display`; see docs/server.md).
        `restricted`: programs run under the host's restricted language profile. `image`: the
        name of an image in the server's store (`airlock image ls`) to run on instead of the
        host's system directories; its interpreter runs `run_code`. `metadata`: your labels
        (at most 32 entries; keys 1-64 characters of `[A-Za-z0-9_.-]`, values at most 512
        bytes), returned in `info.metadata` and by `list_sandboxes()`; not part of the spec a
        key compares. `idle_action`: what the idle timeout does, `dispose` (the default) or
        `pause` (kept in the server's state directory; any later call resumes it; needs
        `Capability.SNAPSHOT`, added to the default `requires`). `from_snapshot`: a snapshot id
        (or the `SnapshotInfo`/`SnapshotRecord` naming one): the new sandbox starts with the
        snapshot's files and interpreter state; given no spec argument it is made with the
        snapshot's spec (any spec argument sends a whole spec of its own, as for a new sandbox).
        `env`: environment variables of every run, process and terminal of the sandbox (a
        call's own `env` wins; the proxy variables the server sets are refused); part of the
        spec a key compares. `lifetime` (s): an absolute life from now, whatever the activity
        (then paused with `idle_action="pause"`, else disposed of; `set_lifetime` moves it).
        Refusals raise SandboxRefusedError (`.kind`), InvalidParamsError, OverCapacityError;
        an unknown snapshot is NotFoundError.
        """
        tools = list(tools)
        params = create_params(requires=requires, egress=egress, egress_allow=egress_allow,
                               isolation_scope=isolation_scope, min_isolation=min_isolation, limits=limits,
                               files_in=files_in, files_out=files_out, idle_timeout=idle_timeout, tools=tools,
                               declared_outputs=declared_outputs,
                               outputs_named_at_call_time=outputs_named_at_call_time, key=key,
                               stateful=stateful, restricted=restricted, image=image, metadata=metadata,
                               idle_action=idle_action, from_snapshot=from_snapshot, env=env,
                               lifetime=lifetime)
        info = SandboxInfo.from_wire(await self._session.request("sandbox.create", params))
        return Sandbox(self._session, info, {t.declaration.name: t.handler for t in tools})

    async def connect_sandbox(self, sandbox_id: str, *, tools: Optional[Mapping[str, ToolFn]] = None) -> Sandbox:
        """Re-attach to a live sandbox by id (`sandbox.connect`); NotFoundError when it is gone.
        `tools` answers, by name, the tools its spec declared."""
        info = SandboxInfo.from_wire(await self._session.request("sandbox.connect", {"sandbox_id": sandbox_id}))
        return Sandbox(self._session, info, tools)

    async def resume_sandbox(self, sandbox_id: str, *, tools: Optional[Mapping[str, ToolFn]] = None) -> Sandbox:
        """Resume a paused sandbox by id (`sandbox.resume`): made again under the same id with its
        files and interpreter state (also after a server restart on the same `--state-dir`). A
        live sandbox is simply re-attached; NotFoundError when it is neither. `tools` as for
        `connect_sandbox`."""
        info = SandboxInfo.from_wire(await self._session.request("sandbox.resume", {"sandbox_id": sandbox_id}))
        return Sandbox(self._session, info, tools)

    async def list_snapshots(self) -> List[SnapshotRecord]:
        """The snapshots in the server's state directory (`snapshot.list`): those `snapshot()`
        kept and those holding paused sandboxes. SandboxRefusedError on a server that keeps no
        snapshots (no state directory)."""
        result = await self._session.request("snapshot.list", {})
        items = result.get("snapshots") if isinstance(result, dict) else None
        return [SnapshotRecord.from_wire(s) for s in items or []]

    async def remove_snapshot(self, snapshot: SnapshotLike) -> None:
        """Delete a snapshot (`snapshot.remove`). NotFoundError when there is none of that id;
        SandboxRefusedError while a paused sandbox is kept in it (resume or dispose of it
        first)."""
        await self._session.request("snapshot.remove", {"snapshot_id": snapshot_id_of(snapshot)})

    async def list_sandboxes(self) -> List[SandboxRecord]:
        """The sandboxes the server holds (`sandbox.list`): the live ones oldest first, then the
        paused ones (`state == "paused"`). The server serves one token, so every connection sees
        every sandbox it holds; one-shot `execute` sandboxes are never held, so never listed."""
        result = await self._session.request("sandbox.list", {})
        items = result.get("sandboxes") if isinstance(result, dict) else None
        return [SandboxRecord.from_wire(s) for s in items or []]

    async def dispose_scope(self, scope: str, thread_id: str) -> Dict[str, Any]:
        """Dispose every sandbox of one conversation key (`scope.dispose`); the broker's answer."""
        result = await self._session.request("scope.dispose", {"scope": scope, "thread_id": thread_id})
        return dict(result) if isinstance(result, dict) else {}

    async def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    async def __aenter__(self: C) -> C:
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        await self.close()


class AsyncClient(BaseClient):
    """A WebSocket connection to `airlock serve --listen`."""

    def __init__(self, ws: ClientConnection) -> None:
        self._ws = ws
        self._session = Session(self._ws.send)
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def connect(cls, url: str, token: Optional[str] = None, *, open_timeout: float = 10.0) -> "AsyncClient":
        """Connect and authenticate. UnauthorizedError for a wrong token; ConnectionError when the
        broker cannot be reached."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            ws = await ws_connect(url, additional_headers=headers, max_size=MAX_MESSAGE_BYTES,
                                  compression=None, open_timeout=open_timeout)
        except websockets.exceptions.InvalidStatus as e:
            status = e.response.status_code
            if status == 401:
                raise UnauthorizedError("the broker refused the bearer token") from e
            raise ConnectionError(f"websocket upgrade to {url} refused with HTTP {status}") from e
        except (OSError, asyncio.TimeoutError, websockets.exceptions.WebSocketException, ValueError) as e:
            raise ConnectionError(f"cannot connect to the broker at {url}: {e}") from e
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


class StdioClient(BaseClient):
    """Spawns `airlock serve --stdio` and talks Content-Length framing over its pipes."""

    def __init__(self, proc: "asyncio.subprocess.Process") -> None:
        self._proc = proc
        self._session = Session(self._write)
        self._lock = asyncio.Lock()
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, binary: Optional[str] = None, args: Sequence[str] = (),
                    env: Optional[Mapping[str, str]] = None, *,
                    log_level: Optional[str] = "warn") -> "StdioClient":
        """Spawn the broker (`binary`, default `find_airlock_bin()`: $AIRLOCK_BIN, the binary
        the `airlock` wheel installed beside this interpreter, or `airlock` on PATH). Its stderr
        is this program's; it writes `log_level` and worse there (`--log-level`: trace, debug,
        info, warn, error); None passes no flag (then `RUST_LOG`, else the broker's `info`)."""
        binary = binary or find_airlock_bin()
        named = any(a == "--log-level" or a.startswith("--log-level=") for a in args)
        level = ["--log-level", log_level] if log_level is not None and not named else []
        try:
            proc = await asyncio.create_subprocess_exec(
                binary, "serve", "--stdio", *level, *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                env=dict(env) if env is not None else None, limit=MAX_MESSAGE_BYTES + MAX_HEADER_BYTES)
        except OSError as e:
            raise ConnectionError(f"cannot start {binary!r}: {e}") from e
        return cls(proc)

    async def _write(self, text: str) -> None:
        body = text.encode()
        stdin = self._proc.stdin
        if stdin is None:
            raise AirlockError("the broker's stdin is not a pipe")
        async with self._lock:
            stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            await stdin.drain()

    async def _read_frame(self) -> Optional[bytes]:
        stdout = self._proc.stdout
        if stdout is None:
            return None
        length, seen = None, 0
        while True:
            line = await stdout.readline()
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
        return await stdout.readexactly(length)

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
