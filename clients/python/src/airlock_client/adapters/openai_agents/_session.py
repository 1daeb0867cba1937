"""`AirlockSandboxSession`: the Agents SDK's `BaseSandboxSession` over one airlock sandbox.

Commands run with `sandbox.exec` (cwd /work), files move with `files.read`/`files.write`
(paths beneath /work; the broker refuses anything that leaves it, links included), the workspace
persists as a tar archive made and unpacked inside the sandbox. The SDK's own shell-based
fallbacks (`ls`, `mkdir`, `rm`, `mv`) run through `exec`.
"""
from __future__ import annotations

import io
import logging
import uuid
from pathlib import Path, PurePosixPath
from typing import Dict, List, NoReturn, Optional, Type, Union

from agents.sandbox.errors import (ExecTimeoutError, ExecTransportError, WorkspaceArchiveReadError,
                                   WorkspaceArchiveWriteError, WorkspaceReadNotFoundError, WorkspaceWriteTypeError)
from agents.sandbox.session.base_sandbox_session import BaseSandboxSession
from agents.sandbox.session.pty_types import PtyExecUpdate
from agents.sandbox.types import ExecResult, User

from ...errors import AirlockError, ErrorCode, NotFoundError
from ...result import RunResult, RunStatus
from ...sandbox import Sandbox
from ._options import AirlockSandboxSessionState
from ._pty import ProcessSessions, supports_processes

log = logging.getLogger("airlock_client.adapters.openai_agents")

ArchiveError = Union[Type[WorkspaceArchiveReadError], Type[WorkspaceArchiveWriteError]]

#: Exit code reported for a command the sandbox could not find (as a shell does).
COMMAND_NOT_FOUND = 127


def _payload_bytes(data: io.IOBase, path: Path) -> bytes:
    payload = data.read()
    if isinstance(payload, str):
        return payload.encode("utf-8")
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    raise WorkspaceWriteTypeError(path=path, actual_type=type(payload).__name__)


def exec_result(argv: List[str], timeout: Optional[float], r: RunResult) -> ExecResult:
    """The SDK's ExecResult for an airlock run: a nonzero exit is an exit code; a run that did
    not end on its own says why on stderr; a time-out is the SDK's ExecTimeoutError."""
    if r.status == RunStatus.TIMEOUT:
        raise ExecTimeoutError(command=argv, timeout_s=timeout, context={"run_id": r.run_id})
    stderr = r.stderr
    if r.stdout_truncated or r.stderr_truncated:
        stderr += f"\n[airlock: output cut at the sandbox's cap ({r.stdout_bytes} + {r.stderr_bytes} bytes produced)]"
    code = r.exit_code
    if code is None:
        why = r.error.message if r.error is not None else r.status.value
        stderr += f"\n[airlock: the run ended {r.status.value}: {why}]" if stderr else f"[airlock: {why}]"
        not_found = r.error is not None and r.error.code == ErrorCode.NOT_FOUND and why.startswith("command not found")
        code = COMMAND_NOT_FOUND if not_found else 128 + r.signal if r.signal else 1
    return ExecResult(stdout=r.stdout.encode("utf-8"), stderr=stderr.encode("utf-8"), exit_code=code)


class AirlockSandboxSession(BaseSandboxSession):
    """One airlock sandbox as an Agents SDK sandbox session. Made by `AirlockSandboxClient`."""

    state: AirlockSandboxSessionState

    def __init__(self, *, state: AirlockSandboxSessionState, sandbox: Sandbox) -> None:
        self.state = state
        self._sandbox = sandbox
        self._disposed = False
        self._procs = ProcessSessions()

    @property
    def sandbox(self) -> Sandbox:
        """The airlock sandbox underneath (its files, `run_code`, `cancel`, ...)."""
        return self._sandbox

    def _root(self) -> PurePosixPath:
        return PurePosixPath(self.state.manifest.root)

    def _relative(self, path: Union[Path, str], *, for_write: bool) -> str:
        """`path` (absolute in the sandbox, or relative to the workspace) as the broker's path
        relative to /work. The SDK's policy confines it to the workspace first."""
        full = PurePosixPath(self.normalize_path(path, for_write=for_write).as_posix())
        rel = full.relative_to(self._root()).as_posix() if full.is_relative_to(self._root()) else ""
        if rel in ("", "."):
            error = WorkspaceArchiveWriteError if for_write else WorkspaceArchiveReadError
            raise error(path=Path(str(path)), context={"reason": "not_a_file_beneath_the_workspace"})
        return rel

    @staticmethod
    def _refuse_user(user: Union[str, User, None], argv: List[str]) -> None:
        if user is not None:
            raise ExecTransportError(command=argv, message="airlock runs every command as the sandbox's one "
                                     "unprivileged user; SandboxAgent(run_as=...) is not supported")

    async def _env(self) -> Optional[Dict[str, str]]:
        env = {**(self.state.options.env or {}), **await self.state.manifest.environment.resolve()}
        return env or None

    async def _run(self, argv: List[str], timeout: Optional[float]) -> RunResult:
        try:
            return await self._sandbox.exec(argv, cwd=str(self._root()), timeout=timeout, env=await self._env())
        except AirlockError as e:
            raise ExecTransportError(command=argv, context={"code": e.code, "message": e.message}, cause=e) from e

    async def _exec_internal(self, *command: Union[str, Path], timeout: Optional[float] = None) -> ExecResult:
        argv = [str(c) for c in command]
        if argv[:2] == ["sudo", "-u"] and len(argv) > 3 and argv[3] == "--":  # SDK's run_as prefix
            self._refuse_user(argv[2], argv)
        return exec_result(argv, timeout, await self._run(argv, timeout))

    # -- interactive exec (`_pty`): background processes when the sandbox has `processes` --

    def supports_pty(self) -> bool:
        return supports_processes(self._sandbox)

    async def pty_exec_start(self, *command: Union[str, Path], timeout: Optional[float] = None,
                             shell: Union[bool, List[str]] = True, user: Union[str, User, None] = None,
                             tty: bool = False, yield_time_s: Optional[float] = None,
                             max_output_tokens: Optional[int] = None) -> PtyExecUpdate:
        argv = self._prepare_exec_command(*command, shell=shell, user=None)
        self._refuse_user(user, argv)
        return await self._procs.start(self._sandbox, argv, cwd=str(self._root()), env=await self._env(),
                                       timeout=timeout, tty=tty, yield_time_s=yield_time_s,
                                       max_output_tokens=max_output_tokens)

    async def pty_write_stdin(self, *, session_id: int, chars: str, yield_time_s: Optional[float] = None,
                              max_output_tokens: Optional[int] = None) -> PtyExecUpdate:
        entry = self._resolve_pty_session_entry(pty_processes=self._procs.entries, session_id=session_id)
        return await self._procs.write(entry, session_id, chars, yield_time_s, max_output_tokens)

    async def pty_terminate_all(self) -> None:
        await self._procs.terminate_all()

    async def read(self, path: Path, *, user: Union[str, User, None] = None) -> io.IOBase:
        self._refuse_user(user, ["read", str(path)])
        rel = self._relative(path, for_write=False)
        try:
            return io.BytesIO(await self._sandbox.files.read(rel))
        except NotFoundError as e:
            raise WorkspaceReadNotFoundError(path=path, cause=e) from e
        except AirlockError as e:
            raise WorkspaceArchiveReadError(path=path, context={"code": e.code, "message": e.message}, cause=e) from e

    async def write(self, path: Path, data: io.IOBase, *, user: Union[str, User, None] = None) -> None:
        self._refuse_user(user, ["write", str(path)])
        payload = _payload_bytes(data, path)
        rel = self._relative(path, for_write=True)
        try:
            await self._sandbox.files.write(rel, payload)
        except AirlockError as e:
            raise WorkspaceArchiveWriteError(path=path, context={"code": e.code, "message": e.message}, cause=e) from e

    async def running(self) -> bool:
        if self._disposed:
            return False
        try:
            await self._sandbox.describe()
        except (AirlockError, OSError):
            return False
        return True

    def _archive_failure(self, error: ArchiveError, reason: str, r: Optional[RunResult] = None,
                         cause: Optional[BaseException] = None) -> NoReturn:
        context: Dict[str, object] = {"reason": reason}
        if r is not None:
            context.update(status=r.status.value, exit_code=r.exit_code, stderr=r.stderr[-4096:])
        raise error(path=Path(str(self._root())), context=context, cause=cause)

    async def persist_workspace(self) -> io.IOBase:
        """The workspace as a tar archive with workspace-relative members (made in the sandbox,
        read with `files.read`: it must fit the sandbox's per-file transfer cap)."""
        name = f".airlock-workspace-{uuid.uuid4().hex}.tar"
        skips = sorted(p.as_posix().lstrip("/") for p in self._persist_workspace_skip_relpaths())
        excludes = [f"--exclude=./{p}" for p in skips if p not in ("", ".")] + [f"--exclude=./{name}"]
        root = str(self._root())
        r = await self._run(["tar", *excludes, "-cf", f"{root}/{name}", "-C", root, "."], None)
        try:
            if not r.ok:
                self._archive_failure(WorkspaceArchiveReadError, "tar_failed", r)
            try:
                return io.BytesIO(await self._sandbox.files.read(name))
            except AirlockError as e:
                self._archive_failure(WorkspaceArchiveReadError, f"archive_read_refused: {e.message}", cause=e)
        finally:
            await self._remove_quietly(name)

    async def hydrate_workspace(self, data: io.IOBase) -> None:
        """Unpack a tar archive (as `persist_workspace` makes) into the workspace. It is written
        into the sandbox and unpacked there by `tar`, as the sandbox's unprivileged user, so a
        hostile archive reaches nothing the sandbox's own code could not."""
        name = f".airlock-hydrate-{uuid.uuid4().hex}.tar"
        raw = _payload_bytes(data, Path(name))
        try:
            try:
                await self._sandbox.files.write(name, raw)
            except AirlockError as e:
                self._archive_failure(WorkspaceArchiveWriteError, f"archive_write_refused: {e.message}", cause=e)
            root = str(self._root())
            r = await self._run(["tar", "--no-same-owner", "-xf", f"{root}/{name}", "-C", root], None)
            if not r.ok:
                self._archive_failure(WorkspaceArchiveWriteError, "untar_failed", r)
        finally:
            await self._remove_quietly(name)

    async def _remove_quietly(self, name: str) -> None:
        try:
            await self._sandbox.files.remove(name)
        except (AirlockError, OSError) as e:
            log.warning("could not remove %s from sandbox %s: %s", name, self._sandbox.sandbox_id, e)

    async def dispose(self) -> None:
        """Dispose of the airlock sandbox (once; one already gone is fine)."""
        if self._disposed:
            return
        self._disposed = True
        try:
            await self._sandbox.dispose()
        except NotFoundError:
            pass

    async def _shutdown_backend(self) -> None:
        if not self.state.options.dispose_on_shutdown:
            return
        try:
            await self.dispose()
        except (AirlockError, OSError) as e:
            log.warning("could not dispose of sandbox %s: %s", self._sandbox.sandbox_id, e)
