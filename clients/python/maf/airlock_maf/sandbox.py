"""`AirlockSandbox`: maf-sandbox's `Sandbox` over one airlock sandbox session.

Every method runs on the connection's private loop (`_loop.LoopThread`) and is awaited from the
caller's. Runs (`exec`, `run_code`, and the native program channel) take the sandbox's run lock
first, because airlock runs one at a time per sandbox and answers a second with `busy`: the
lock is how a concurrent call queues instead, its queued time counted against its own bound.
"""
from __future__ import annotations

import asyncio
import posixpath
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from airlock_client import FileRefusedError, NotFoundError
from airlock_client import Sandbox as WireSandbox
from maf_sandbox import EntryKind, ExecResult, SandboxEntry, SandboxTransferCapExceeded
from maf_sandbox.paths import (confine_resolve_guest_delete_path, confine_resolve_guest_list_path,
                               confine_resolve_guest_path, confine_resolve_guest_read_path,
                               confine_resolve_guest_write_path, guest_path_relative_to)

from . import _guest, _runs
from ._loop import LoopThread

T = TypeVar("T")

#: Most entries one recursive removal visits before it refuses (a tree is walked by the file
#: plane, one no-follow listing per directory).
MAX_TREE_ENTRIES = 100_000


class ToolSlot:
    """Who answers the sandbox's `maf_host_tool` calls: the program run in flight, or nobody."""

    def __init__(self) -> None:
        self.policy_call: Callable[[str, dict[str, Any]], Awaitable[Any]] | None = None


class AirlockResetError(RuntimeError):
    """`Sandbox.reset` could not restore the sandbox: it has no baseline (it was not made by
    this backend before any input reached it), or the baseline could not be made again. The
    router escalates to disposal."""


@dataclass(eq=False)
class Instance:
    """What every wrapper of one airlock sandbox shares: the session (replaced by a reset), its
    base, its run lock, the host-tool policy of the program run in flight (the native
    channel's), and its reset baseline.

    `baseline` is the id of the snapshot taken right after the sandbox was made and its
    storage base prepared, before any call supplied input (None: a sandbox this backend did not
    see made, which is never snapshotted as its own baseline, or one whose snapshot failed).
    `make` makes the sandbox under its key (from a snapshot, given one). `remake` is the
    backend's reset: it swaps `wire` for a fresh sandbox made from `baseline` under the same key
    (None: the backend does not declare `Capability.SNAPSHOT`)."""

    wire: WireSandbox
    loop: LoopThread
    base: str
    slot: ToolSlot
    run_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    baseline: str | None = None
    make: Callable[[str | None], Coroutine[Any, Any, WireSandbox]] | None = None
    remake: Callable[[], Coroutine[Any, Any, None]] | None = None

    @property
    def sandbox_id(self) -> str:
        return self.wire.sandbox_id


class AirlockSandbox:
    """One acquire's view of an airlock sandbox (`freshly_created` is this acquire's own)."""

    def __init__(self, instance: Instance, *, freshly_created: bool) -> None:
        self._i = instance
        self.freshly_created = freshly_created

    # -- identity --------------------------------------------------------------------------

    @property
    def instance_id(self) -> str:
        """The airlock sandbox id: stable while the sandbox lives, new after it is replaced."""
        return self._i.sandbox_id

    @property
    def storage_base(self) -> str:
        """The guest directory `working_directory="."` addresses."""
        return self._i.base

    def _on_loop(self, coro: Coroutine[Any, Any, T]) -> Awaitable[T]:
        return self._i.loop.run(coro)

    def _wd(self, working_directory: str) -> str:
        return _guest.working_directory(working_directory, self._i.base)

    # -- the no-follow stat every confinement check is fed ----------------------------------

    async def _stat(self, guest_path: str) -> SandboxEntry | None:
        fixed = _guest.fixed_entry(guest_path)
        if fixed is not None:
            return fixed
        rel = _guest.wire_path(guest_path)
        if rel is None:
            raise _guest.outside_the_plane(guest_path)
        try:
            st = await self._i.wire.files.stat(rel)
        except FileRefusedError as e:
            # The broker resolves with no link and no non-directory on the way; the walk above
            # this call names which one it was before it ever gets here.
            raise ValueError(f"{guest_path!r} is not reachable without following a link: {e}") from e
        if not st.exists:
            return None
        kind = _guest.kind_of(st.kind, st.exists, st.is_dir, st.size)
        return SandboxEntry(path=guest_path, kind=kind, size_bytes=st.size if kind is EntryKind.FILE else None)

    def _wire(self, guest_path: str) -> str:
        rel = _guest.wire_path(guest_path)
        if rel is None:
            raise _guest.outside_the_plane(guest_path)
        return rel

    # -- files in ---------------------------------------------------------------------------

    async def write_file(self, path: str, content: str | bytes, *, working_directory: str) -> None:
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        await self._on_loop(self._write(path, data, working_directory))

    async def _write(self, path: str, data: bytes, working_directory: str) -> None:
        wd = self._wd(working_directory)
        full = await confine_resolve_guest_write_path(self._stat, path, wd)
        rel = self._wire(full)
        entry = await self._stat(full)
        if entry is not None and entry.kind is EntryKind.DIRECTORY:
            raise IsADirectoryError(f"{path!r} is a directory")
        try:
            await self._i.wire.files.write(rel, data)
        except FileRefusedError as e:
            raise _refused(path, e) from e

    # -- runs -------------------------------------------------------------------------------

    async def exec(self, command: str | Sequence[str], *, working_directory: str, timeout: float) -> ExecResult:
        if isinstance(command, str):
            argv = ["/bin/sh", "-c", command]
        else:
            argv = [str(a) for a in command]
            if not argv:
                raise ValueError("exec needs a command")
        deadline = time.monotonic() + timeout
        return await self._on_loop(self._exec(argv, self._wd(working_directory), deadline))

    async def _exec(self, argv: list[str], cwd: str, deadline: float) -> ExecResult:
        if cwd != _guest.WORK:
            # airlock starts a command in an existing directory under /work; anywhere else (a
            # legacy absolute working directory such as "/", or one not made yet) the guest
            # changes there itself, as any program could, and a failure is its shell's to report.
            argv = ["/bin/sh", "-c", 'cd "$1" || exit 126; shift; exec "$@"', "sh", cwd, *argv]
            cwd = _guest.WORK
        await _runs.queued(self._i.run_lock, deadline)
        try:
            result = await _runs.with_a_slot(
                lambda left: self._i.wire.exec(argv, cwd=cwd, timeout=left, env=_runs.GUEST_ENV,
                                               exact_output=True), deadline)
        finally:
            self._i.run_lock.release()
        return _runs.exec_result(result)

    async def run_code(self, code: str, *, timeout: float) -> ExecResult:
        """Run Python source in a fresh CPython process over the sandbox's files (cwd `/work`).

        What comes back is what the program printed (stdout and stderr apart, exact bytes) and
        its exit status; the value of the last expression is not returned. Whatever the guest's
        interpreter ships is importable (the host's `python3`, read-only); nothing else is.
        """
        deadline = time.monotonic() + timeout
        return await self._on_loop(self._run_code(code, deadline))

    async def _run_code(self, code: str, deadline: float) -> ExecResult:
        await _runs.queued(self._i.run_lock, deadline)
        try:
            result = await _runs.with_a_slot(
                lambda left: self._i.wire.run_code(code, timeout=left, env=_runs.GUEST_ENV, exact_output=True),
                deadline)
        finally:
            self._i.run_lock.release()
        return _runs.exec_result(result)

    # -- files out --------------------------------------------------------------------------

    async def stat_file(self, path: str, *, working_directory: str) -> SandboxEntry | None:
        return await self._on_loop(self._stat_file(path, working_directory))

    async def _stat_file(self, path: str, working_directory: str) -> SandboxEntry | None:
        wd = self._wd(working_directory)
        full = await confine_resolve_guest_read_path(self._stat, path, wd)
        entry = await self._stat(full)
        if entry is None:
            return None
        rel = guest_path_relative_to(full, wd) or ""
        return SandboxEntry(path=rel, kind=entry.kind, size_bytes=entry.size_bytes)

    async def read_file(self, path: str, *, working_directory: str, max_bytes: int) -> bytes:
        return await self._on_loop(self._read_file(path, working_directory, max_bytes))

    async def _read_file(self, path: str, working_directory: str, max_bytes: int) -> bytes:
        wd = self._wd(working_directory)
        full = await confine_resolve_guest_read_path(self._stat, path, wd)
        entry = await self._stat(full)
        if entry is None:
            raise FileNotFoundError(f"no such file: {path!r}")
        if entry.kind is EntryKind.DIRECTORY:
            raise IsADirectoryError(f"{path!r} is a directory")
        if entry.kind is not EntryKind.FILE or entry.size_bytes is None:
            raise OSError(f"{path!r} is not a regular file with one link, and is refused")
        if entry.size_bytes > max_bytes:
            raise SandboxTransferCapExceeded(f"{path!r} is {entry.size_bytes} bytes; the caller allowed {max_bytes}")
        try:
            data = await self._i.wire.files.read(self._wire(full))
        except FileRefusedError as e:
            raise _refused(path, e) from e
        except NotFoundError as e:
            raise FileNotFoundError(f"no such file: {path!r}") from e
        if len(data) > max_bytes:
            raise SandboxTransferCapExceeded(f"{path!r} grew to {len(data)} bytes; the caller allowed {max_bytes}")
        return data

    async def list_dir(self, path: str, *, working_directory: str) -> tuple[SandboxEntry, ...]:
        return await self._on_loop(self._list_dir(path, working_directory))

    async def _list_dir(self, path: str, working_directory: str) -> tuple[SandboxEntry, ...]:
        wd = self._wd(working_directory)
        full = await confine_resolve_guest_list_path(self._stat, path, wd)
        entry = await self._stat(full)
        if entry is None:
            raise FileNotFoundError(f"no such directory: {path!r}")
        if entry.kind is not EntryKind.DIRECTORY:
            raise NotADirectoryError(f"{path!r} is not a directory")
        rel = self._wire(full)
        try:
            listed = await self._i.wire.files.list(rel or None)
        except FileRefusedError as e:
            raise _refused(path, e) from e
        prefix = guest_path_relative_to(full, wd) or ""
        out = []
        for listed_entry in listed:
            name, size = listed_entry.name, listed_entry.size
            kind = _guest.kind_of(listed_entry.kind, True, listed_entry.is_dir, size)
            out.append(SandboxEntry(path=posixpath.join(prefix, name) if prefix else name, kind=kind,
                                    size_bytes=size if kind is EntryKind.FILE else None))
        return tuple(out)

    # -- removal ----------------------------------------------------------------------------

    async def remove(self, path: str, *, working_directory: str, recursive: bool = False) -> None:
        await self._on_loop(self._remove(path, working_directory, recursive))

    async def _remove(self, path: str, working_directory: str, recursive: bool) -> None:
        wd = self._wd(working_directory)
        full = await confine_resolve_guest_delete_path(self._stat, path, wd)
        entry = await self._stat(full)
        if entry is None:
            return
        if entry.kind is EntryKind.DIRECTORY and not recursive:
            raise IsADirectoryError(f"{path!r} is a directory; removing it takes recursive=True")
        await self._remove_tree(self._wire(full), [MAX_TREE_ENTRIES])

    async def _remove_tree(self, rel: str, budget: list[int]) -> None:
        """Remove `rel` and, if it is a directory, everything under it, by the file plane's own
        no-follow primitives: a link is unlinked, never entered; a component swapped for a link
        mid-walk makes the walk fail rather than leave the tree."""
        try:
            st = await self._i.wire.files.stat(rel)
            if st.exists and _guest.kind_of(st.kind, st.exists, st.is_dir, st.size) is EntryKind.DIRECTORY:
                for e in await self._i.wire.files.list(rel):
                    budget[0] -= 1
                    if budget[0] < 0:
                        raise OSError(f"more than {MAX_TREE_ENTRIES} entries under {rel!r}; refused")
                    child = f"{rel}/{e.name}"
                    if _guest.kind_of(e.kind, True, e.is_dir, e.size) is EntryKind.DIRECTORY:
                        await self._remove_tree(child, budget)
                    else:
                        await self._i.wire.files.remove(child)
            await self._i.wire.files.remove(rel)
        except FileRefusedError as e:
            raise OSError(f"the file plane refused to remove {rel!r}: {e}") from e

    async def reclaim(self, directory: str, *, working_directory: str, timeout: float) -> None:
        """Remove a call's directory and everything under it, at the guest's own authority.

        airlock's file plane acts as the sandbox's identity through no-follow primitives, so no
        swap can redirect it; a relative target must name a child of the working directory, an
        absolute one a directory strictly below `/work`.
        """
        await self._on_loop(asyncio.wait_for(self._reclaim(directory, working_directory), timeout))

    async def _reclaim(self, directory: str, working_directory: str) -> None:
        wd = self._wd(working_directory)
        if posixpath.isabs(directory):
            target = posixpath.normpath(directory)
            if not _guest.wire_path(target):
                raise ValueError(f"reclaim target {directory!r} is not a directory below /work")
        else:
            target = confine_resolve_guest_path(directory, wd)
            if target == wd:
                raise ValueError("reclaim must name a child of the working directory")
            if not _guest.wire_path(target):
                raise _guest.outside_the_plane(target)
        rel = self._wire(target)
        try:
            if not (await self._i.wire.files.stat(rel)).exists:
                return
        except FileRefusedError as e:
            raise OSError(f"cannot reach {directory!r} without following a link: {e}") from e
        await self._remove_tree(rel, [MAX_TREE_ENTRIES])

    async def fingerprint(self) -> None:
        """Unsupported, said rather than faked: the file plane sees `/work`, and `/tmp` and
        `/dev/shm` (the same tmpfs) are invisible to it, so any answer would be incomplete. No
        process outlives a run, but half a fingerprint is not one."""
        return None

    async def reset(self, *, timeout: float) -> None:
        """Replace the sandbox with a fresh one made from its baseline snapshot, within `timeout`.

        The old sandbox is disposed first (every process of it ends, a run in flight included)
        and a new airlock sandbox is made under the same key from the snapshot taken before any
        input reached the old one: the files of `/work`, `/tmp` and `/dev/shm` as they were with
        the storage base prepared, new namespaces, root and identity, no process of the old one.
        Every wrapper of the instance then answers the new `instance_id`. Raises
        `NotImplementedError` where `Capability.SNAPSHOT` is not declared, `AirlockResetError`
        for a sandbox without a baseline or a baseline that could not be made again, and
        `TimeoutError` when the bound expires; after a failure the sandbox may be gone, and only
        disposal is left (the router's escalation).
        """
        remake = self._i.remake
        if remake is None:
            raise NotImplementedError("this backend does not declare Capability.SNAPSHOT (it does not own its "
                                      "broker), so its sandboxes are not reset")
        if self._i.baseline is None:
            raise AirlockResetError(f"sandbox {self.instance_id} has no reset baseline: this backend did not see "
                                    "it made (a sandbox that may have served input is never its own baseline), "
                                    "or its snapshot failed")
        await self._on_loop(_bounded(remake(), timeout))


async def _bounded(coro: Coroutine[Any, Any, None], timeout: float) -> None:
    async with asyncio.timeout(timeout):
        await coro


def _refused(path: str, e: FileRefusedError) -> Exception:
    """A refusal the checks before the call did not predict: something changed under the path
    between the check and the no-follow operation, which then refused rather than followed."""
    if e.kind == "SandboxPathNotConfined":
        return ValueError(f"{path!r}: the file plane refused a path that passes a link ({e})")
    if e.kind == "SandboxFileTooLarge":
        return SandboxTransferCapExceeded(f"{path!r}: {e}")
    return OSError(f"{path!r}: refused by the file plane ({e})")
