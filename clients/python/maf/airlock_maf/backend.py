"""`AirlockSandboxBackend`: maf-sandbox's `SandboxBackend` over `airlock serve`.

By default it launches `airlock serve --stdio` itself (a private broker: every sandbox on it is
this backend's); `AirlockSandboxBackend.connect(url, token)` drives a running server instead.
Construction probes the broker once, synchronously, because the router reads the rung and the
declarations before any sandbox exists: a throw-away sandbox says which rung the server probed
(`container` or `os_process`), and a second, asked for `allowlist` egress, says whether this
machine can enforce it. A private broker gets a state directory of its own (a temporary
directory removed at `close()`), and a third throw-away sandbox, snapshotted there, says whether
`Capability.SNAPSHOT` (and so `Cleanup.RESET`) holds.
"""
from __future__ import annotations

import asyncio
import logging
import posixpath
import shutil
import tempfile
import tomllib
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airlock_client import (AirlockError, AsyncClient, BaseClient, Capability as WireCap, ConnectionError,
                            NotFoundError, OverCapacityError, SandboxRefusedError, StdioClient)
from airlock_client import Sandbox as WireSandbox
from airlock_client import TransferLimits as WireLimits
from maf_sandbox import (BackendDeclarations, Capability, DisposalFailure, Egress, EgressRule, EntryKind,
                         Isolation, IsolationScope, OsFamily, SandboxBackendUnavailable, SandboxKey, SandboxLimits,
                         SandboxSpec, ScopePurge, TransferLimits, fold_disposal_failures)
from maf_sandbox.paths import ensure_guest_work_dir, posix_work_dir_ancestors

from . import _guest, _keys
from ._loop import LoopThread
from .channel import AirlockProgramChannel, transport_tool
from .sandbox import AirlockResetError, AirlockSandbox, Instance, ToolSlot

logger = logging.getLogger(__name__)

#: What every airlock sandbox is created able to do: the methods `AirlockSandbox` is built from
#: (its confinement checks stat and list, whatever the workload asked for). A workload's own
#: `requires` is held by maf-sandbox's router, before any sandbox exists.
WIRE_REQUIRES = frozenset({WireCap.EXEC, WireCap.RUN_CODE, WireCap.FILES_IN, WireCap.FILES_OUT,
                           WireCap.FILES_LIST, WireCap.FILES_DELETE})

CAPABILITIES = frozenset({Capability.EXEC, Capability.RUN_CODE, Capability.FILES_IN, Capability.FILES_OUT,
                          Capability.FILES_LIST, Capability.FILES_DELETE, Capability.RECLAIM,
                          Capability.HOST_TOOLS})

#: The local backend's transfer ceilings (docs/policy.md), per direction: a policy may lower them,
#: never raise them. airlock counts them over a sandbox's whole life, not per collection.
AIRLOCK_DEFAULT_LIMITS = TransferLimits(8 * 1024 * 1024, 32 * 1024 * 1024, 32)


@dataclass(frozen=True)
class Probe:
    """What the broker said about itself at construction."""

    isolation: Isolation
    allowlist: bool
    #: Whether a sandbox can be snapshotted and made again from it (private brokers only).
    snapshot: bool = False


def policy_limits(policy: str | None) -> SandboxLimits:
    """The transfer ceilings a policy.toml sets (`[limits.files_in]`, `[limits.files_out]`),
    within the local backend's own, which is what the broker enforces."""
    table: Mapping[str, object] = {}
    if policy is not None:
        limits = tomllib.loads(Path(policy).read_text(encoding="utf-8")).get("limits", {})
        table = limits if isinstance(limits, dict) else {}

    def one(direction: str) -> TransferLimits:
        got = table.get(direction, {})
        got = got if isinstance(got, dict) else {}
        d = AIRLOCK_DEFAULT_LIMITS
        return TransferLimits(min(int(got.get("max_bytes_per_file", d.max_bytes_per_file)), d.max_bytes_per_file),
                              min(int(got.get("max_total_bytes", d.max_total_bytes)), d.max_total_bytes),
                              min(int(got.get("max_files", d.max_files)), d.max_files))

    return SandboxLimits(files_in=one("files_in"), files_out=one("files_out"))


async def _probe(client: BaseClient, *, private: bool) -> Probe:
    sb = await client.sandbox(requires=[WireCap.EXEC])
    try:
        isolation = Isolation(sb.info.isolation)
    finally:
        await sb.dispose()
    try:
        allow = await client.sandbox(requires=[WireCap.EXEC], egress="allowlist", egress_allow=["probe.invalid"])
    except SandboxRefusedError:
        allowlist = False
    else:
        await allow.dispose()
        allowlist = True
    return Probe(isolation, allowlist=allowlist, snapshot=private and await _probe_snapshot(client))


async def _probe_snapshot(client: BaseClient) -> bool:
    """Whether the broker snapshots a sandbox and makes a new one from it (it has a usable state
    directory): asked, not assumed. Only for a private broker: on a shared server this backend
    cannot prove a sandbox new, so it could never take a baseline before input."""
    try:
        sb = await client.sandbox(requires=[WireCap.EXEC, WireCap.SNAPSHOT])
    except SandboxRefusedError as e:
        logger.warning("airlock-maf: the broker refuses snapshot-capable sandboxes (%s); "
                       "Capability.SNAPSHOT is not declared", e)
        return False
    try:
        snap = await sb.snapshot()
    except AirlockError as e:
        logger.warning("airlock-maf: the broker cannot snapshot (%s); Capability.SNAPSHOT is not declared", e)
        return False
    finally:
        await sb.dispose()
    try:
        again = await client.sandbox(requires=[WireCap.EXEC, WireCap.SNAPSHOT], from_snapshot=snap)
        await again.dispose()
        await client.remove_snapshot(snap)
    except AirlockError as e:
        logger.warning("airlock-maf: the broker cannot make a sandbox from a snapshot and remove it (%s); "
                       "Capability.SNAPSHOT is not declared", e)
        return False
    return True


def _names_a_state_dir(args: Sequence[str]) -> bool:
    return any(a == "--state-dir" or a.startswith("--state-dir=") for a in args)


class AirlockSandboxBackend:
    """airlock's sandboxes behind maf-sandbox's router (see docs/maf.md)."""

    def __init__(self, binary: str = "airlock", policy: str | None = None, *, args: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, idle_timeout: float = 3600.0,
                 name: str = "airlock") -> None:
        """Launch `binary serve --stdio` (under `policy`, a policy.toml path) and probe it.

        The broker gets a state directory of its own (`--state-dir`, a temporary directory
        removed at `close()`) unless `args` names one: its snapshots are the reset baselines."""
        state_dir = None if _names_a_state_dir(args) else tempfile.mkdtemp(prefix="airlock-maf-state-")
        flags = [*(["--policy", policy] if policy else []), *(["--state-dir", state_dir] if state_dir else []),
                 *args]

        async def connect() -> BaseClient:
            return await StdioClient.start(binary, args=flags, env=env)

        try:
            self._start(name, policy, idle_timeout, private=True, connect=connect, state_dir=state_dir)
        except BaseException:
            if state_dir is not None:
                shutil.rmtree(state_dir, ignore_errors=True)
            raise

    @classmethod
    def connect(cls, url: str, token: str | None = None, *, policy: str | None = None,
                idle_timeout: float = 3600.0, name: str = "airlock") -> AirlockSandboxBackend:
        """Drive a running `airlock serve --listen` (`policy`: the policy.toml it runs under,
        read for its transfer ceilings; airlock's defaults without one)."""
        async def connect() -> BaseClient:
            return await AsyncClient.connect(url, token)

        self = cls.__new__(cls)
        self._start(name, policy, idle_timeout, private=False, connect=connect)
        return self

    def _start(self, name: str, policy: str | None, idle_timeout: float, *, private: bool,
               connect: Callable[[], Coroutine[Any, Any, BaseClient]], state_dir: str | None = None) -> None:
        self._name = name
        self._private = private
        self._state_dir = state_dir
        self._idle = idle_timeout
        self._limits = policy_limits(policy)
        self._loop = LoopThread()
        try:
            self._client: BaseClient = self._loop.blocking(connect())
            self._probe = self._loop.blocking(_probe(self._client, private=private))
        except BaseException:
            client = getattr(self, "_client", None)
            if client is not None:
                try:
                    self._loop.blocking(client.close())
                except Exception:  # noqa: BLE001 - the probe's own failure is the one to raise
                    pass
            self._loop.stop()
            raise
        self._held: dict[tuple[SandboxKey, str], Instance] = {}
        self._seen: set[str] = set()
        self._acquiring: dict[tuple[SandboxKey, str], asyncio.Lock] = {}
        self._channel = AirlockProgramChannel()

    # -- declarations -----------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def isolation(self) -> Isolation:
        """The rung the broker probed on this machine, as this identity."""
        return self._probe.isolation

    @property
    def declarations(self) -> BackendDeclarations:
        egress = {Egress.CLOSED} | ({Egress.ALLOWLIST} if self._probe.allowlist else set())
        return BackendDeclarations(
            capabilities=CAPABILITIES | ({Capability.SNAPSHOT} if self._probe.snapshot else set()),
            limits=self._limits,
            egress_modes=frozenset(egress),
            os_families=frozenset({OsFamily.POSIX}),
            isolation_scopes=frozenset({IsolationScope.CONVERSATION, IsolationScope.CALL}),
            program_channels=(self._channel,),
        )

    # -- acquire ----------------------------------------------------------------------------

    async def acquire(self, key: SandboxKey, spec: SandboxSpec) -> AirlockSandbox:
        base = _guest.storage_base(spec.work_dir)
        if spec.image_id is not None:
            raise ValueError("airlock names images by the name they were imported under "
                             f"(`airlock image ls`), not by id: use image=, not image_id={spec.image_id!r}")
        return await self._loop.run(self._acquire(key, spec, base))

    async def _acquire(self, key: SandboxKey, spec: SandboxSpec, base: str) -> AirlockSandbox:
        ident = (key, spec.kind)
        lock = self._acquiring.setdefault(ident, asyncio.Lock())
        async with lock:
            held = self._held.get(ident)
            if held is not None:
                try:
                    await held.wire.describe()
                    return AirlockSandbox(held, freshly_created=False)
                except NotFoundError:
                    await self._forget(ident)  # idled out or disposed elsewhere: a new one
            instance, fresh = await self._create(key, spec, base)
            if instance.make is not None:
                instance.remake = lambda: self._reset(ident, instance)
            self._held[ident] = instance
            return AirlockSandbox(instance, freshly_created=fresh)

    async def _create(self, key: SandboxKey, spec: SandboxSpec, base: str) -> tuple[Instance, bool]:
        """Make (or, under a key the broker already holds, find) the sandbox, prepare its storage
        base, and, when it is new and snapshots are declared, take its reset baseline."""
        slot = ToolSlot()
        host_tools = Capability.HOST_TOOLS in spec.required_capabilities
        snapshots = self._probe.snapshot
        requires = (set(WIRE_REQUIRES) | ({WireCap.HOST_TOOLS} if host_tools else set())
                    | ({WireCap.SNAPSHOT} if snapshots else set()))
        hosts = [e.host if isinstance(e, EgressRule) else e for e in spec.egress_allow]
        limits = self._limits
        wire_key = _keys.wire_key(key, spec.kind)

        async def make(from_snapshot: str | None = None) -> WireSandbox:
            try:
                return await self._client.sandbox(
                    requires=sorted(requires), egress=str(spec.egress), egress_allow=hosts,
                    isolation_scope="call", key=wire_key, idle_timeout=self._idle,
                    files_in=_wire_limits(limits.files_in), files_out=_wire_limits(limits.files_out),
                    tools=[transport_tool(slot)] if host_tools else [], image=spec.image,
                    from_snapshot=from_snapshot)
            except (ConnectionError, OverCapacityError) as e:
                raise SandboxBackendUnavailable(f"airlock could not make a sandbox: {e}") from e

        wire = await make()
        fresh = self._private and wire.sandbox_id not in self._seen
        self._seen.add(wire.sandbox_id)
        instance = Instance(wire=wire, loop=self._loop, base=base, slot=slot)
        try:
            await _prepare_base(AirlockSandbox(instance, freshly_created=False), spec, base)
            if snapshots:
                instance.make = make
                # The baseline: the prepared base and nothing else, before acquire returns. Never
                # of a sandbox this backend did not see made; none for a call-scoped key, which is
                # disposed after its call and never reset.
                if fresh and not key.call_id:
                    instance.baseline = await _baseline(wire)
        except BaseException:
            await wire.dispose()
            raise
        return instance, fresh

    async def _reset(self, ident: tuple[SandboxKey, str], instance: Instance) -> None:
        """`Sandbox.reset`: dispose of the instance's sandbox and make a new one under the same key
        from its baseline snapshot, then swap it in (every wrapper sees the new id)."""
        baseline, make = instance.baseline, instance.make
        if baseline is None or make is None:
            raise AirlockResetError(f"sandbox {instance.sandbox_id} has no reset baseline")
        lock = self._acquiring.setdefault(ident, asyncio.Lock())
        async with lock:
            old = instance.wire
            try:
                gone = await old.dispose()
            except NotFoundError:
                pass  # idled out or disposed elsewhere: nothing of it is left either way
            except AirlockError as e:
                raise AirlockResetError(f"sandbox {old.sandbox_id} could not be disposed for a reset: {e}") from e
            else:
                if not gone.ok:
                    raise AirlockResetError(f"sandbox {old.sandbox_id} could not be disposed for a reset: "
                                            f"{gone.failure_code}: {gone.failure_message}")
            # Shielded: a reset cancelled (its bound expiring) while the new sandbox is being made
            # disposes of that sandbox once it exists, rather than leave it under the key.
            making = asyncio.ensure_future(make(baseline))
            try:
                new = await asyncio.shield(making)
            except asyncio.CancelledError:
                making.add_done_callback(_dispose_when_made)
                raise
            except AirlockError as e:
                raise AirlockResetError(f"sandbox {old.sandbox_id} could not be made again from its baseline "
                                        f"snapshot {baseline}: {e}") from e
            if new.sandbox_id == old.sandbox_id or new.sandbox_id in self._seen:
                await new.dispose()
                raise AirlockResetError(f"the broker answered a reset of {old.sandbox_id} with a sandbox already seen")
            self._seen.add(new.sandbox_id)
            instance.wire = new
            self._held.setdefault(ident, instance)

    async def _forget(self, ident: tuple[SandboxKey, str]) -> None:
        """Stop holding `ident` (its sandbox is gone) and remove its baseline snapshot."""
        instance = self._held.pop(ident, None)
        if instance is not None:
            await self._drop_baseline(instance)

    async def _drop_baseline(self, instance: Instance) -> None:
        snapshot, instance.baseline = instance.baseline, None
        if snapshot is None:
            return
        try:
            await self._client.remove_snapshot(snapshot)
        except (NotFoundError, ConnectionError):
            pass
        except AirlockError as e:  # it stays in the private state directory until close()
            logger.warning("airlock-maf: baseline snapshot %s could not be removed: %s", snapshot, e)

    # -- disposal ---------------------------------------------------------------------------

    async def dispose(self, key: SandboxKey, *, kind: str | None = None,
                      instance_id: str | None = None) -> DisposalFailure | None:
        return await self._loop.run(self._dispose(key, kind, instance_id))

    async def _dispose(self, key: SandboxKey, kind: str | None, instance_id: str | None) -> DisposalFailure | None:
        targets = [ident for ident, inst in self._held.items()
                   if ident[0] == key and (kind is None or ident[1] == kind)
                   and (instance_id is None or inst.sandbox_id == instance_id)]
        failures = []
        for ident in targets:
            failure = await _dispose_one(self._held[ident])
            if failure is None:
                await self._forget(ident)
            else:
                failures.append(failure)
        return fold_disposal_failures(failures)

    async def dispose_scope(self, scope: str, thread_id: str) -> ScopePurge:
        return await self._loop.run(self._dispose_scope(scope, thread_id))

    async def _dispose_scope(self, scope: str, thread_id: str) -> ScopePurge:
        wire_scope, wire_thread = _keys.conversation(scope, thread_id)
        try:
            answer = await self._client.dispose_scope(wire_scope, wire_thread)
        except ConnectionError as e:
            return ScopePurge(0, DisposalFailure("unreachable", f"the broker could not be reached: {e}"))
        except AirlockError as e:
            return ScopePurge(0, DisposalFailure("unknown", f"scope.dispose failed: {e}"))
        undisposed = answer.get("undisposed")
        failure = _failure(undisposed) if isinstance(undisposed, dict) else None
        if failure is None:
            for ident in [i for i in self._held if (i[0].scope, i[0].thread_id) == (scope, thread_id)]:
                await self._forget(ident)
        disposed = answer.get("disposed", 0)
        return ScopePurge(int(disposed) if isinstance(disposed, int) else 0, failure)

    async def exists(self, instance_id: str) -> bool:
        """Whether the broker still has the sandbox `instance_id` (an engine-side answer)."""

        async def ask() -> bool:
            try:
                await self._client.connect_sandbox(instance_id)
                return True
            except NotFoundError:
                return False

        return await self._loop.run(ask())

    def close(self) -> None:
        """Close the connection (a private broker exits, disposing every sandbox it held, and its
        state directory, with every baseline snapshot, is removed)."""
        try:
            self._loop.blocking(self._client.close())
        finally:
            self._loop.stop()
            if self._state_dir is not None:
                shutil.rmtree(self._state_dir, ignore_errors=True)


async def _baseline(wire: WireSandbox) -> str | None:
    """Snapshot a sandbox nothing has reached yet, as what its resets restore; None (and resets
    then raise, so the router disposes instead) if the broker cannot."""
    try:
        return (await wire.snapshot()).snapshot_id
    except AirlockError as e:
        logger.warning("airlock-maf: no reset baseline for sandbox %s: %s", wire.sandbox_id, e)
        return None


#: Disposals started by a callback, held until they end (a task nobody holds may be collected).
_disposing: set[asyncio.Task[Any]] = set()


def _dispose_when_made(making: asyncio.Future[WireSandbox]) -> None:
    if making.cancelled() or making.exception() is not None:
        return
    task = asyncio.ensure_future(making.result().dispose())
    _disposing.add(task)
    task.add_done_callback(_disposing.discard)


def _wire_limits(t: TransferLimits) -> WireLimits:
    return WireLimits(t.max_bytes_per_file, t.max_total_bytes, t.max_files)


def _failure(d: Mapping[str, object]) -> DisposalFailure:
    code = str(d.get("code", "unknown"))
    codes = ("unreachable", "timeout", "refused", "unlisted", "unknown")
    return DisposalFailure(code if code in codes else "unknown", str(d.get("message", "")))  # type: ignore[arg-type]


async def _dispose_one(instance: Instance) -> DisposalFailure | None:
    try:
        d = await instance.wire.dispose()
    except NotFoundError:
        return None
    except ConnectionError as e:
        return DisposalFailure("unreachable", f"the broker could not be reached: {e}")
    except AirlockError as e:
        return DisposalFailure("unknown", f"sandbox.dispose failed: {e}")
    if d.ok:
        return None
    return _failure({"code": d.failure_code, "message": d.failure_message})


async def _prepare_base(sandbox: AirlockSandbox, spec: SandboxSpec, base: str) -> None:
    """Make the storage base a real directory (parents too), refusing a link or a file on it."""

    async def create(directories: tuple[str, ...]) -> None:
        deepest = directories[-1]
        keep = posixpath.join(deepest, ".airlock-maf-base")
        await sandbox._i.wire.files.write(_guest.wire_path(keep) or keep, b"")  # noqa: SLF001
        await sandbox._i.wire.files.remove(_guest.wire_path(keep) or keep)  # noqa: SLF001

    if base == _guest.WORK:
        return
    await ensure_guest_work_dir(spec, sandbox._stat, create, resolve=posix_work_dir_ancestors, base=base)  # noqa: SLF001
    entry = await sandbox._stat(base)  # noqa: SLF001
    if entry is None or entry.kind is not EntryKind.DIRECTORY:
        raise NotADirectoryError(f"the storage base {base!r} could not be prepared")
