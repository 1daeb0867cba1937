"""Snapshots, pause and fork through the SDK against a real `airlock serve` with a state
directory of the test's own (docs/sdk.md, "Snapshots, pause and fork"): `snapshot()` and a
sandbox made from it, `pause()` and the same object's next calls resuming it, a paused sandbox
resumed after a server restart, `fork(3)` into independent branches, `list_snapshots()` /
`remove_snapshot()`, `idle_action="pause"`, the refusals, and the sync twins."""
import asyncio
import time

import pytest

from airlock_client import (DEFAULT_REQUIRES, AsyncClient, Capability, IdleAction, InvalidParamsError, KernelReport,
                            NotFoundError, Sandbox, SandboxRecord, SandboxRefusedError, SnapshotInfo, SnapshotRecord,
                            StdioClient, SyncClient, SyncSandbox)
import typed_user_program
from test_typing import mypy

SNAP = sorted(DEFAULT_REQUIRES | {Capability.SNAPSHOT})

#: A cell that leaves state of every kind: a value, a function and a class defined in the cell,
#: an instance, a module, a file in /work and one in /tmp, and things a snapshot cannot carry.
PREPARE = """
import json, threading
x = 41
def add(y):
    return x + y
class Point:
    def __init__(self, a):
        self.a = a
p = Point(7)
open('/work/data.txt', 'w').write('in work')
open('/tmp/scratch.txt', 'w').write('in tmp')
gen = (i for i in range(3))
fh = open('/work/data.txt')
lock = threading.Lock()
x
"""

#: Everything PREPARE left that a snapshot carries, read back in one cell.
CHECK = ("(x, add(1), p.a, type(p).__name__, json.dumps([1]), open('/work/data.txt').read(), "
         "open('/tmp/scratch.txt').read())")
CARRIED = [41, 42, 7, "Point", "[1]", "in work", "in tmp"]


@pytest.fixture
async def client(state_server):
    c = await AsyncClient.connect(state_server.url, state_server.token)
    yield c
    await c.close()


def by_id(records, sandbox_id):
    return next((r for r in records if r.sandbox_id == sandbox_id), None)


async def value(sb, code):
    r = await sb.run_code(code)
    assert r.ok, (r.status, r.stderr)
    return r.value.json if r.value is not None else None


async def prepared(client, **kw):
    sb = await client.sandbox(stateful=True, requires=SNAP, **kw)
    assert await value(sb, PREPARE) == 41
    return sb


async def test_snapshot_then_a_sandbox_made_from_it(client):
    async with await prepared(client, metadata={"run": "snap"}) as sb:
        snap = await sb.snapshot()
        assert isinstance(snap, SnapshotInfo) and not snap.paused
        assert snap.sandbox_id == sb.sandbox_id and len(snap.snapshot_id) == 64 and snap.bytes > 0
        assert isinstance(snap.kernel, KernelReport) and snap.kernel.bytes > 0
        assert {"x", "add", "Point", "p", "json", "threading"} <= set(snap.kernel.saved)
        # What cannot be carried is named, with why.
        # An interpreter holding an open file is pickled, not imaged, and says so.
        assert snap.kernel.carried == "pickle"
        assert set(snap.kernel.not_saved) == {"gen", "fh", "lock"}
        assert "generator" in snap.kernel.not_saved["gen"]
        # The sandbox goes on, and a later change is not in the snapshot.
        assert await value(sb, "x = 100; x") == 100

        # Made from the snapshot with no spec argument: the snapshot's own spec (stateful, the
        # snapshot capability, the metadata), its files and its variables; keyless.
        async with await client.sandbox(from_snapshot=snap.snapshot_id) as copy:
            assert copy.sandbox_id != sb.sandbox_id
            assert Capability.SNAPSHOT in copy.info.requires and copy.info.metadata == {"run": "snap"}
            assert await value(copy, CHECK) == CARRIED
            r = await copy.run_code("gen")
            assert r.status == "error" and "NameError" in r.stderr
            assert await copy.files.read_text("data.txt") == "in work"
            assert by_id(await client.list_sandboxes(), copy.sandbox_id).key is None
        # A spec of one's own (here: another label) with the snapshot object itself.
        async with await client.sandbox(from_snapshot=snap, stateful=True, requires=SNAP,
                                        metadata={"run": "copy"}) as copy2:
            assert copy2.info.metadata == {"run": "copy"}
            assert await value(copy2, "add(x)") == 82
        assert await value(sb, "x") == 100
    await client.remove_snapshot(snap)


async def test_pause_then_the_object_s_next_calls_resume_it(client):
    sb = await prepared(client)
    paused = await sb.pause()
    assert paused.paused and paused.sandbox_id == sb.sandbox_id and paused.kernel is not None
    [rec] = [r for r in await client.list_sandboxes() if r.sandbox_id == sb.sandbox_id]
    assert rec.state == "paused" and rec.paused and rec.snapshot_id == paused.snapshot_id
    assert rec.created_at_ms is None and rec.created_at is None and rec.idle_timeout_s is None
    assert rec.paused_at is not None and abs(rec.paused_at.timestamp() - time.time()) < 60
    [snap] = [s for s in await client.list_snapshots() if s.snapshot_id == paused.snapshot_id]
    assert snap.paused_sandboxes == [sb.sandbox_id] and not snap.kept
    with pytest.raises(SandboxRefusedError, match="paused already"):
        await sb.pause()
    # While it is paused its snapshot cannot be removed.
    with pytest.raises(SandboxRefusedError, match="paused sandbox"):
        await client.remove_snapshot(paused.snapshot_id)

    # The object's next run resumes it, variables and files back, under the same id.
    assert await value(sb, CHECK) == CARRIED
    rec = by_id(await client.list_sandboxes(), sb.sandbox_id)
    assert rec.state == "idle" and rec.created_at_ms is not None and rec.snapshot_id is None
    # The pause's own snapshot went with the resume (it was not kept).
    assert paused.snapshot_id not in {s.snapshot_id for s in await client.list_snapshots()}

    # Each other kind of call resumes it too: files, exec, describe, an explicit resume().
    for resume_with in (lambda: sb.files.read_text("data.txt"), lambda: sb.exec(["/bin/true"]),
                        sb.describe, sb.resume):
        await value(sb, "x += 1")
        await sb.pause()
        assert by_id(await client.list_sandboxes(), sb.sandbox_id).state == "paused"
        await resume_with()
        assert by_id(await client.list_sandboxes(), sb.sandbox_id).state == "idle"
    assert await value(sb, "x") == 45
    # resume() on a live sandbox is no error (it answers its description).
    assert (await sb.resume()).sandbox_id == sb.sandbox_id

    # dispose() on a paused sandbox forgets it, and its snapshot.
    await sb.pause()
    assert (await sb.dispose()).ok
    assert by_id(await client.list_sandboxes(), sb.sandbox_id) is None
    assert await client.list_snapshots() == []
    with pytest.raises(NotFoundError):
        await Sandbox.resume(client, sb.sandbox_id)


async def test_leaving_async_with_keeps_a_paused_sandbox_paused(client):
    async with await prepared(client) as sb:
        await sb.pause()
    assert by_id(await client.list_sandboxes(), sb.sandbox_id).state == "paused"
    # ... but one resumed since is disposed as usual.
    async with await Sandbox.resume(client, sb.sandbox_id) as again:
        assert await value(again, "x") == 41
        await again.pause()
        await again.run_code("1")  # resumes it
    assert by_id(await client.list_sandboxes(), sb.sandbox_id) is None


async def test_a_paused_sandbox_survives_a_server_restart(state_server):
    async with await AsyncClient.connect(state_server.url, state_server.token) as c:
        sb = await prepared(c, metadata={"who": "restart"})
        await sb.files.write("note.md", "# kept")
        snap = await sb.pause()
        live = await c.sandbox()  # not paused: gone with the server
    state_server.restart()
    async with await AsyncClient.connect(state_server.url, state_server.token) as c:
        records = await c.list_sandboxes()
        assert by_id(records, live.sandbox_id) is None
        rec = by_id(records, sb.sandbox_id)
        assert (rec.state, rec.snapshot_id, rec.metadata) == ("paused", snap.snapshot_id, {"who": "restart"})
        assert [s.paused_sandboxes for s in await c.list_snapshots()] == [[sb.sandbox_id]]
        back = await Sandbox.resume(c, sb.sandbox_id)
        assert back.sandbox_id == sb.sandbox_id and back.info.metadata == {"who": "restart"}
        assert await value(back, CHECK) == CARRIED
        assert await back.files.read_text("note.md") == "# kept"
        assert by_id(await c.list_sandboxes(), sb.sandbox_id).state == "idle"
        await back.dispose()
        assert await c.list_snapshots() == []


async def test_fork_into_three_independent_branches(client):
    async with await prepared(client, metadata={"tree": "root"}) as parent:
        branches = await parent.fork(3)
        assert len(branches) == 3 and all(isinstance(b, Sandbox) for b in branches)
        ids = {b.sandbox_id for b in branches}
        assert len(ids) == 3 and parent.sandbox_id not in ids
        assert all(b.info.metadata == {"tree": "root"} and Capability.SNAPSHOT in b.info.requires
                   for b in branches)
        try:
            for b in branches:
                assert await value(b, CHECK) == CARRIED
            # A change in one branch is seen in no other, nor in the parent; and the parent's
            # own later change in none of the branches.
            await value(branches[0], "x = 1000\nopen('/work/data.txt', 'w').write('branch 0')")
            await value(parent, "x = -1")
            assert await value(branches[0], "x, open('/work/data.txt').read()") == [1000, "branch 0"]
            for b in branches[1:]:
                assert await value(b, "x, open('/work/data.txt').read()") == [41, "in work"]
            assert await value(parent, "x, open('/work/data.txt').read()") == [-1, "in work"]
            # The branches are keyless and listed; the fork's snapshot is not kept.
            records = await client.list_sandboxes()
            assert all(by_id(records, i) is not None and by_id(records, i).key is None for i in ids)
            assert await client.list_snapshots() == []
            # The explore-each pattern: run the branches at once.
            outs = await asyncio.gather(*(value(b, f"add({i})") for i, b in enumerate(branches)))
            assert outs == [1000, 42, 43]
        finally:
            for b in branches:
                await b.dispose()
        for bad in (0, 17):
            with pytest.raises(InvalidParamsError, match="count"):
                await parent.fork(bad)
        with pytest.raises(TypeError):
            await parent.fork("2")  # type: ignore[arg-type]


async def test_list_and_remove_snapshots(client):
    async with await prepared(client) as sb:
        assert await client.list_snapshots() == []
        one = await sb.snapshot()
        await value(sb, "x = 2")
        two = await sb.snapshot()
        assert one.snapshot_id != two.snapshot_id
        snaps = {s.snapshot_id: s for s in await client.list_snapshots()}
        assert set(snaps) == {one.snapshot_id, two.snapshot_id}
        s1 = snaps[one.snapshot_id]
        assert isinstance(s1, SnapshotRecord) and s1.kept and s1.paused_sandboxes == [] and s1.bytes > 0
        assert abs(s1.made_at.timestamp() - time.time()) < 120
        await client.remove_snapshot(one.snapshot_id)
        assert [s.snapshot_id for s in await client.list_snapshots()] == [two.snapshot_id]
        with pytest.raises(NotFoundError):
            await client.remove_snapshot(one.snapshot_id)
        with pytest.raises(NotFoundError):
            await client.sandbox(from_snapshot=one)
        with pytest.raises(InvalidParamsError):
            await client.remove_snapshot("not-a-snapshot-id")
        with pytest.raises(TypeError):
            await client.remove_snapshot(42)  # type: ignore[arg-type]
        await client.remove_snapshot(snaps[two.snapshot_id])
        assert await client.list_snapshots() == []


async def test_idle_action_pause(client):
    sb = await client.sandbox(stateful=True, idle_timeout=1, idle_action=IdleAction.PAUSE)
    # `idle_action="pause"` adds the snapshot capability to the default `requires`.
    assert Capability.SNAPSHOT in sb.info.requires
    assert await value(sb, "x = 'kept'; open('/work/f', 'w').write('f'); x") == "kept"
    deadline = time.monotonic() + 30
    while (rec := by_id(await client.list_sandboxes(), sb.sandbox_id)).state != "paused":
        assert time.monotonic() < deadline, rec
        await asyncio.sleep(0.5)
    assert isinstance(rec, SandboxRecord) and rec.snapshot_id
    # Used again, it resumes with its state; it is still an idle-pausing sandbox.
    assert await value(sb, "x, open('/work/f').read()") == ["kept", "f"]
    assert by_id(await client.list_sandboxes(), sb.sandbox_id).state != "paused"
    await sb.dispose()
    # With `requires` of one's own, the capability must be in it: refused otherwise.
    with pytest.raises(InvalidParamsError, match="snapshot"):
        await client.sandbox(idle_action="pause", requires=["run_code"])
    with pytest.raises(ValueError):
        await client.sandbox(idle_action="hibernate")


async def test_without_the_snapshot_capability_every_method_is_refused(client, server):
    async with await client.sandbox(stateful=True) as sb:
        await value(sb, "x = 1")
        for call in (sb.snapshot, sb.pause, lambda: sb.fork(2)):
            with pytest.raises(SandboxRefusedError, match="without the snapshot capability"):
                await call()
        assert await value(sb, "x") == 1  # untouched
    # The same on the suite's shared server.
    async with await AsyncClient.connect(server.url, server.token) as c, await c.sandbox() as sb:
        with pytest.raises(SandboxRefusedError, match="snapshot capability"):
            await sb.pause()


async def test_stdio_client_snapshots(bin_path, tmp_path):
    c = await StdioClient.start(bin_path, ["--state-dir", str(tmp_path / "state")])
    try:
        sb = await prepared(c)
        await sb.pause()
        [rec] = await c.list_sandboxes()
        assert rec.state == "paused"
        [branch] = await sb.fork(1)  # a call on a paused sandbox: resumes it, then forks
        assert await value(branch, CHECK) == CARRIED
        assert {r.state for r in await c.list_sandboxes()} == {"idle"}
    finally:
        await c.close()


def test_sync_twins(state_server):
    with SyncClient.connect(state_server.url, state_server.token) as c:
        sb = c.sandbox(stateful=True, requires=SNAP)
        assert sb.run_code("x = 5; x").value.json == 5
        snap = sb.snapshot()
        assert isinstance(snap, SnapshotInfo) and "x" in snap.kernel.saved
        with c.sandbox(from_snapshot=snap) as copy:
            assert copy.run_code("x * 2").value.json == 10
        branches = sb.fork(2)
        assert all(isinstance(b, SyncSandbox) for b in branches)
        assert [b.run_code("x").value.json for b in branches] == [5, 5]
        for b in branches:
            b.dispose()
        paused = sb.pause()
        assert paused.paused and by_id(c.list_sandboxes(), sb.sandbox_id).state == "paused"
        assert sb.run_code("x + 1").value.json == 6  # resumed by the object's next call
        sb.pause()
        info = sb.resume()
        assert info.sandbox_id == sb.sandbox_id
        sb.pause()
        again = SyncSandbox.resume(c, sb.sandbox_id)
        assert isinstance(again, SyncSandbox) and again.run_code("x").value.json == 5
        assert c.resume_sandbox(sb.sandbox_id).sandbox_id == sb.sandbox_id  # live: re-attached
        assert [s.snapshot_id for s in c.list_snapshots()] == [snap.snapshot_id]
        c.remove_snapshot(snap)
        assert c.list_snapshots() == []
        sb.dispose()


async def test_the_typed_user_program_s_snapshot_demo_runs(client, state_server):
    assert await typed_user_program.demo_snapshots(client) == ["base", "20", "30", "True", "paused", "True", "10"]
    with SyncClient.connect(state_server.url, state_server.token) as c:
        assert typed_user_program.demo_snapshots_sync(c) == "True True 4"
    assert await client.list_snapshots() == [] and await client.list_sandboxes() == []


def test_resume_is_typed_on_the_class_and_on_an_instance(tmp_path):
    """`Sandbox.resume(client, id)` and `sandbox.resume()` are one name with two typed meanings
    (checked by mypy): each misuse is an error."""
    prog = tmp_path / "resume_misuse.py"
    prog.write_text("from airlock_client import AsyncClient, Sandbox, SandboxInfo, SyncClient, SyncSandbox\n"
                    "async def f(c: AsyncClient, sb: Sandbox) -> None:\n"
                    "    a: Sandbox = await Sandbox.resume(c, 'id')\n"
                    "    b: SandboxInfo = await sb.resume()\n"
                    "    await sb.resume(c, 'id')\n"              # an instance's resume takes nothing
                    "    await Sandbox.resume()\n"                # the class's needs a client and an id
                    "    x: Sandbox = await sb.resume()\n"        # an instance's answers a SandboxInfo
                    "def g(c: SyncClient, sb: SyncSandbox) -> None:\n"
                    "    a: SyncSandbox = SyncSandbox.resume(c, 'id')\n"
                    "    b: SandboxInfo = sb.resume()\n"
                    "    y: SyncSandbox = sb.resume()\n")
    r = mypy(tmp_path, prog)
    assert r.returncode == 1
    lines = sorted(int(line.split(":")[1]) for line in r.stdout.splitlines() if ": error:" in line)
    assert lines == [5, 6, 7, 11], r.stdout
