"""A sandbox's life through the SDK against a real `airlock serve` (docs/sdk.md, issue 26):
`metadata=` on create, `client.list_sandboxes()`, `sandbox.set_timeout(seconds)` on the async,
sync and stdio clients, and transfers checked per call (a file rewritten and read far more
often than the spec's `max_files`)."""
import asyncio
import time

import pytest

from airlock_client import (AsyncClient, FileRefusedError, InvalidParamsError, NotFoundError, SandboxKey,
                            SandboxRecord, SandboxRefusedError, StdioClient, SyncClient, TransferLimits)


@pytest.fixture
async def client(server):
    c = await AsyncClient.connect(server.url, server.token)
    yield c
    await c.close()


def by_id(records, sandbox_id):
    return next((r for r in records if r.sandbox_id == sandbox_id), None)


async def test_metadata_and_list_sandboxes(client, server):
    t0 = int(time.time() * 1000)
    key = SandboxKey("sdk-life", "thread-1")
    async with await client.sandbox(metadata={"owner": "ana", "ticket.id": "T-7"}, key=key,
                                    idle_timeout=120) as sb, await client.sandbox() as plain:
        assert sb.info.metadata == {"owner": "ana", "ticket.id": "T-7"}
        assert plain.info.metadata == {}
        assert (await sb.describe()).metadata == {"owner": "ana", "ticket.id": "T-7"}
        # Metadata takes no part in key reuse: the same key and spec return the same sandbox,
        # with the metadata it was made with.
        again = await client.sandbox(metadata={"owner": "bob"}, key=key, idle_timeout=120)
        assert again.sandbox_id == sb.sandbox_id and again.info.metadata["owner"] == "ana"
        # A one-shot execute is never held, so never listed.
        assert (await client.execute("print(1)")).stdout == "1\n"
        # Another connection sees the same sandboxes (one token, no tenants).
        async with await AsyncClient.connect(server.url, server.token) as other:
            records = await other.list_sandboxes()
        assert all(isinstance(r, SandboxRecord) for r in records)
        mine = by_id(records, sb.sandbox_id)
        assert mine is not None and by_id(records, plain.sandbox_id) is not None
        assert mine.key == key and by_id(records, plain.sandbox_id).key is None
        assert mine.metadata == {"owner": "ana", "ticket.id": "T-7"}
        assert mine.idle_timeout_s == 120 and mine.state == "idle"
        assert t0 - 1000 <= mine.created_at_ms <= mine.last_used_at_ms <= int(time.time() * 1000) + 1000
        assert mine.created_at.timestamp() == pytest.approx(mine.created_at_ms / 1000)
        # A run in flight is `running`.
        run = asyncio.ensure_future(sb.run_code("import time\ntime.sleep(1.5)"))
        deadline = time.monotonic() + 20
        while by_id(await client.list_sandboxes(), sb.sandbox_id).state != "running":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert (await run).ok
        assert by_id(await client.list_sandboxes(), sb.sandbox_id).state == "idle"
        ids = {sb.sandbox_id, plain.sandbox_id}
    # Disposed (leaving `async with`): no longer listed.
    assert not ids & {r.sandbox_id for r in await client.list_sandboxes()}
    # The bounds are the server's: refused InvalidParamsError naming the member.
    for bad, member in [({"a b": "v"}, "spec.metadata key"), ({"k": "x" * 513}, "spec.metadata"),
                        ({f"k{i}": "v" for i in range(33)}, "33 entries")]:
        with pytest.raises(InvalidParamsError, match=member):
            await client.sandbox(metadata=bad)
    with pytest.raises(TypeError):
        await client.sandbox(metadata=[("k", "v")])  # type: ignore[arg-type]


async def test_set_timeout_extends_and_shortens_a_sandbox_s_life(client):
    key = SandboxKey("sdk-life", "timeout")
    sb = await client.sandbox(idle_timeout=2, key=key)
    info = await sb.set_timeout(30)
    assert info.idle_timeout_s == 30 and sb.info.idle_timeout_s == 30
    await asyncio.sleep(3.5)  # past the 2 s it was made with
    assert (await sb.describe()).idle_timeout_s == 30
    assert by_id(await client.list_sandboxes(), sb.sandbox_id).idle_timeout_s == 30
    # A create with the key and the spec it was made with still returns it, timeout kept; the
    # new timeout in a spec is another spec under a live key.
    again = await client.sandbox(idle_timeout=2, key=key)
    assert again.sandbox_id == sb.sandbox_id and again.info.idle_timeout_s == 30
    with pytest.raises(SandboxRefusedError) as e:
        await client.sandbox(idle_timeout=30, key=key)
    assert e.value.kind == "SandboxKeySpecMismatch"
    for bad in (0, -1, 86401):
        with pytest.raises(InvalidParamsError, match="idle_timeout_s"):
            await sb.set_timeout(bad)
    with pytest.raises(TypeError):
        await sb.set_timeout("60")  # type: ignore[arg-type]
    await sb.set_timeout(1)
    await asyncio.sleep(3.5)
    with pytest.raises(NotFoundError):
        await sb.describe()
    with pytest.raises(NotFoundError):
        await sb.set_timeout(60)


async def test_transfers_are_checked_per_call(client):
    caps = TransferLimits(max_bytes_per_file=1000, max_total_bytes=1000, max_files=1)
    async with await client.sandbox(files_in=caps, files_out=caps) as sb:
        for i in range(40):  # 40 rewrites and reads, past max_files=1 and max_total_bytes=1000
            body = f"{i:04d}".encode() * 250
            assert (await sb.files.write("same.txt", body)).size == 1000
            assert await sb.files.read("same.txt") == body
        with pytest.raises(FileRefusedError) as e:
            await sb.files.write("same.txt", b"!" * 1001)
        assert e.value.kind == "SandboxFileTooLarge"
        assert await sb.files.read("same.txt") == b"0039" * 250


def test_sync_client_lists_and_sets_timeouts(server):
    with SyncClient.connect(server.url, server.token) as c:
        with c.sandbox(metadata={"via": "sync"}) as sb:
            assert sb.info.metadata == {"via": "sync"}
            assert sb.set_timeout(90).idle_timeout_s == 90
            rec = by_id(c.list_sandboxes(), sb.sandbox_id)
            assert rec is not None and rec.metadata == {"via": "sync"} and rec.idle_timeout_s == 90
        assert by_id(c.list_sandboxes(), sb.sandbox_id) is None


async def test_stdio_client_lists_and_sets_timeouts(bin_path, tmp_path):
    # A state directory of its own: the default one may hold another server's paused sandboxes.
    c = await StdioClient.start(bin_path, ["--state-dir", str(tmp_path / "state")])
    try:
        assert await c.list_sandboxes() == []
        sb = await c.sandbox(metadata={"via": "stdio"})
        assert (await sb.set_timeout(45)).idle_timeout_s == 45
        [rec] = await c.list_sandboxes()
        assert (rec.sandbox_id, rec.metadata, rec.idle_timeout_s, rec.key) == (sb.sandbox_id, {"via": "stdio"},
                                                                                45, None)
        await sb.dispose()
        assert await c.list_sandboxes() == []
    finally:
        await c.close()


async def test_a_sandboxs_env_reaches_every_run_and_a_calls_own_wins(client):
    """`env=` on create (issue 40): every run of the sandbox sees it, a run's own `env` wins, a
    name the server sets itself is refused."""
    async with await client.sandbox(env={"GREETING": "hello", "SHARED": "spec"}) as sb:
        code = "import os\nprint(os.environ['GREETING'], os.environ['SHARED'])"
        assert (await sb.run_code(code)).stdout == "hello spec\n"
        assert (await sb.run_code(code, env={"SHARED": "call"})).stdout == "hello call\n"
        assert (await sb.exec(["sh", "-c", "echo $GREETING"])).stdout == "hello\n"
    with pytest.raises(InvalidParamsError, match="reserved"):
        await client.sandbox(env={"HTTPS_PROXY": "http://elsewhere:1"})


async def test_a_lifetime_is_said_and_set_lifetime_moves_its_end(client):
    """`lifetime=` on create and `set_lifetime` (issue 40): the description says when the life
    ends; moving it later says so; a bad value is refused."""
    t0 = int(time.time() * 1000)
    async with await client.sandbox(lifetime=30) as sb:
        first = sb.info.ends_at_ms
        assert first is not None and t0 + 29_000 <= first <= int(time.time() * 1000) + 30_000
        moved = await sb.set_lifetime(120)
        assert moved.ends_at_ms is not None and moved.ends_at_ms >= first + 80_000
        with pytest.raises(InvalidParamsError):
            await sb.set_lifetime(0)
    async with await client.sandbox() as plain:
        assert plain.info.ends_at_ms is None
