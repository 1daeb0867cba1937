"""`Capability.SNAPSHOT` and `Cleanup.RESET` against real sandboxes (maf-sandbox ships no reset
suite): the private broker's own state directory, the baseline taken before any input, a reset
as a new sandbox made from it under the same key, and the refusals that make the router dispose.

What a "process" is here: airlock's maf sandboxes have no background processes (the backend
never asks for `processes`); every `exec`/`run_code` is pid 1 of its own pid namespace and ends
with its run, and run_code is a fresh interpreter (no kernel state: the specs are not
stateful). So the process half of a reset is checked on the host: a run still in flight when
the reset comes is gone from the host's /proc after it, as is everything else of the old
sandbox.
"""
from __future__ import annotations

import asyncio
import os
import stat
import time
import uuid
from pathlib import Path

import pytest
from maf_sandbox import Capability, Cleanup, ExecResult, SandboxKey, SandboxRouter
from maf_sandbox.conformance import assert_fresh_acquire_conformance

from airlock_maf import AirlockResetError, AirlockSandbox, AirlockSandboxBackend, _keys

from .conftest import airlock_binary
from .test_conformance import WORK, spec

BASE = "/work/base/deeper"


def reset_router(backend: AirlockSandboxBackend) -> SandboxRouter:
    return SandboxRouter([backend], min_isolation=backend.isolation, min_cleanup=Cleanup.RESET)


def instance_of(sandbox: object) -> AirlockSandbox:
    assert isinstance(sandbox, AirlockSandbox)
    return sandbox


async def snapshots(backend: AirlockSandboxBackend) -> set[str]:
    """The snapshot ids in the private broker's state directory (the backend's own connection)."""
    records = await backend._loop.run(backend._client.list_snapshots())  # noqa: SLF001
    return {r.snapshot_id for r in records}


async def sh(sandbox: object, script: str) -> tuple[int, str]:
    r = await instance_of(sandbox).exec(["/bin/sh", "-c", script], working_directory="/work", timeout=60)
    return r.exit_code, r.stdout


async def dirty(sandbox: object) -> None:
    """Input the way a call supplies it: a file in the base, one in /tmp, a directory."""
    s = instance_of(sandbox)
    await s.write_file("note.txt", b"left by a call", working_directory=".")
    assert (await sh(s, "echo residue > /tmp/residue && mkdir /work/extra && echo ok"))[1] == "ok\n"


async def assert_as_at_the_baseline(sandbox: object, base: str = BASE) -> None:
    s = instance_of(sandbox)
    assert await s.stat_file("note.txt", working_directory=".") is None, "a reset kept a file a call wrote"
    code, out = await sh(s, f"test -e /tmp/residue; echo $?; test -e /work/extra; echo $?; "
                            f"test -d {base} && echo base")
    assert out == "1\n1\nbase\n", f"not the baseline (the storage base is kept, the call's files are not): {out!r}"


def host_processes_with(marker: str) -> list[int]:
    """Host pids whose command line carries `marker` (every sandbox process is visible here)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_snapshot_is_declared_on_the_private_broker_s_own_state_dir() -> None:
    b = AirlockSandboxBackend(binary=airlock_binary())
    state_dir = b._state_dir  # noqa: SLF001
    try:
        assert Capability.SNAPSHOT in b.declarations.capabilities
        assert state_dir is not None and os.path.isdir(state_dir)
        st = os.stat(state_dir)
        assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700
        assert SandboxRouter([b], min_isolation=b.isolation, min_cleanup=Cleanup.RESET).effective_cleanup(
            spec()) is Cleanup.RESET
    finally:
        b.close()
    assert not os.path.exists(state_dir), "close() left the private state directory"


async def test_a_call_s_cleanup_resets_to_the_baseline(backend: AirlockSandboxBackend, unique: str) -> None:
    """The router's RESET rung after each call: a new instance under the same key, the call's
    files gone, the prepared base there, the next acquire on the new id; twice, from one
    baseline; the baseline removed with the sandbox."""
    r = reset_router(backend)
    key, s = SandboxKey("reset", unique, "agent"), spec(work_dir=BASE)
    assert r.effective_cleanup(s) is Cleanup.RESET
    seen: list[str] = []
    baseline = None
    try:
        for call in ("call-1", "call-2"):
            admission = await r.enter_call(key, s, owner=call)
            sandbox = instance_of(await r.acquire(key, s, _admission=admission))
            if baseline is None:
                assert sandbox.freshly_created is True
                baseline = sandbox._i.baseline  # noqa: SLF001
                assert baseline is not None and baseline in await snapshots(backend)
            else:
                assert sandbox.instance_id == seen[-1], "the acquire after a reset did not get the new instance"
                assert sandbox.freshly_created is False
                await assert_as_at_the_baseline(sandbox)
            assert sandbox._i.baseline == baseline, "a reused sandbox was snapshotted as its baseline"  # noqa: SLF001
            before = sandbox.instance_id
            await dirty(sandbox)
            failure = await r.finish_call(key, s, admission=admission, sandbox=sandbox, owner=call)
            assert failure is None, failure
            assert sandbox.instance_id != before, "the reset kept the instance id"
            assert not await backend.exists(before), "the old sandbox outlived its reset"
            assert await backend.exists(sandbox.instance_id)
            await assert_as_at_the_baseline(sandbox)
            seen += [before] if not seen else []
            seen.append(sandbox.instance_id)
        assert len(set(seen)) == 3, seen
    finally:
        assert (await r.dispose_scope("reset", unique)).undisposed is None
    assert baseline not in await snapshots(backend), "disposal left the baseline snapshot"


async def test_a_reset_ends_every_process_of_the_old_sandbox(backend: AirlockSandboxBackend, unique: str) -> None:
    """Files and processes: a run in flight when the reset comes is gone from the host after it
    (with the sandbox's namespaces), the wrapper and a reacquire name the new instance."""
    key, s = SandboxKey("reset-proc", unique, "agent"), spec()
    sandbox = instance_of(await backend.acquire(key, s))
    marker = f"airlock-maf-{uuid.uuid4().hex}"
    try:
        await dirty(sandbox)
        running = asyncio.ensure_future(sandbox.exec(["/bin/sh", "-c", f"sleep 250; : {marker}"],
                                                    working_directory=".", timeout=250))
        deadline = time.monotonic() + 30
        while not host_processes_with(marker):
            assert time.monotonic() < deadline and not running.done(), "the long run never showed on the host"
            await asyncio.sleep(0.05)
        before = sandbox.instance_id
        await sandbox.reset(timeout=60)
        assert sandbox.instance_id != before
        assert host_processes_with(marker) == [], "a process of the old sandbox outlived the reset"
        done, _ = await asyncio.wait([running], timeout=30)
        assert done, "the run of the old sandbox did not end with it"
        ended = running.exception() or running.result()
        assert not (isinstance(ended, ExecResult) and ended.exit_code == 0), f"the run went on: {ended!r}"
        assert not await backend.exists(before)
        await assert_as_at_the_baseline(sandbox, WORK)
        assert (await sh(sandbox, "echo alive"))[1] == "alive\n"
        # The first wrapper still says it was made fresh, and a reacquire resumes the new id.
        await assert_fresh_acquire_conformance(sandbox, lambda: backend.acquire(key, s))
    finally:
        assert await backend.dispose(key) is None


async def test_a_sandbox_adopted_without_a_baseline_raises_and_the_router_disposes_it(
        backend: AirlockSandboxBackend, unique: str) -> None:
    """A sandbox this backend did not see made (here: one it lost track of while the broker kept
    it, as a restarted host would find it) has no baseline and is never snapshotted as one:
    its reset raises, and a router with RESET disposes of it and hands out a fresh one."""
    key, s = SandboxKey("adopt", unique, "agent"), spec()
    first = instance_of(await backend.acquire(key, s))
    await dirty(first)
    await backend._loop.run(backend._forget((key, s.kind)))  # noqa: SLF001
    adopted = instance_of(await backend.acquire(key, s))
    try:
        assert adopted.instance_id == first.instance_id, "the broker's sandbox under the key was not found"
        assert adopted.freshly_created is False and adopted._i.baseline is None  # noqa: SLF001
        with pytest.raises(AirlockResetError, match="no reset baseline"):
            await adopted.reset(timeout=30)
        assert adopted.instance_id == first.instance_id
        assert await adopted.stat_file("note.txt", working_directory=".") is not None

        r = reset_router(backend)
        clean = instance_of(await r.acquire(key, s))
        assert clean.instance_id != first.instance_id and clean.freshly_created is True
        assert not await backend.exists(first.instance_id), "the router kept a sandbox it could not reset"
        assert await clean.stat_file("note.txt", working_directory=".") is None
        assert clean._i.baseline is not None  # noqa: SLF001
    finally:
        assert (await backend.dispose_scope("adopt", unique)).undisposed is None


async def test_a_reset_whose_baseline_is_gone_raises(backend: AirlockSandboxBackend, unique: str) -> None:
    key, s = SandboxKey("lost", unique, "agent"), spec()
    sandbox = instance_of(await backend.acquire(key, s))
    try:
        baseline = sandbox._i.baseline  # noqa: SLF001
        assert baseline is not None
        await backend._loop.run(backend._client.remove_snapshot(baseline))  # noqa: SLF001
        with pytest.raises(AirlockResetError, match="could not be made again"):
            await sandbox.reset(timeout=30)
    finally:
        assert await backend.dispose(key) is None
    assert (key, s.kind) not in backend._held  # noqa: SLF001


@pytest.mark.parametrize("bound", [0.001, 0.01, 0.03, 0.1])
async def test_a_reset_cut_by_its_bound_leaves_nothing_under_the_key(backend: AirlockSandboxBackend, unique: str,
                                                                    bound: float) -> None:
    """Wherever the bound cuts a reset (disposing the old sandbox, or making the new one), it
    either lands or raises TimeoutError, and once the router's escalation (dispose) has run no
    sandbox is left under the key: one made after the bound expired is disposed of too."""
    key, s = SandboxKey("cut", unique, "agent"), spec()
    sandbox = instance_of(await backend.acquire(key, s))
    before = sandbox.instance_id
    try:
        await sandbox.reset(timeout=bound)
    except TimeoutError:
        pass
    else:
        assert sandbox.instance_id != before
    assert await backend.dispose(key) is None
    wire_key = _keys.wire_key(key, s.kind)
    deadline = time.monotonic() + 10
    while True:
        records = await backend._loop.run(backend._client.list_sandboxes())  # noqa: SLF001
        left = [r.sandbox_id for r in records if r.key == wire_key]
        if not left:
            break
        assert time.monotonic() < deadline, f"a cut reset left {left} under the key"
        await asyncio.sleep(0.05)


async def test_a_call_scoped_sandbox_keeps_no_baseline(backend: AirlockSandboxBackend, unique: str) -> None:
    """CALL scope always disposes (never resets), so nothing is snapshotted for it."""
    key, s = SandboxKey("callscope", unique, "agent", "call-1"), spec()
    sandbox = instance_of(await backend.acquire(key, s))
    try:
        assert sandbox._i.baseline is None  # noqa: SLF001
        with pytest.raises(AirlockResetError):
            await sandbox.reset(timeout=30)
    finally:
        assert await backend.dispose(key) is None
