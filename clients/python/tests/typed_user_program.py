"""A small user program of the SDK. `test_typing.py` checks it with `mypy --strict` (so every
name and field it touches must be typed) and runs it against a real broker."""
from __future__ import annotations

import asyncio
from typing import List, Optional

from airlock_client import (DEFAULT_REQUIRES, AirlockError, AsyncClient, Capability, CollectedOutputs,
                            DeclaredOutput, Egress, FileEntry, IdleAction, KernelReport, Limits, RunResult, RunStatus,
                            Sandbox, SandboxInfo, SandboxKey, SandboxRecord, SandboxRefusedError, SnapshotInfo,
                            SnapshotRecord, SyncClient, SyncSandbox, Tool, TransferLimits)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


ADD = Tool.define(add, schema={"type": "object", "properties": {"a": {"type": "integer"},
                                                                "b": {"type": "integer"}}})


async def demo(url: str, token: str) -> List[str]:
    lines: List[str] = []
    async with await AsyncClient.connect(url, token) as client:
        sb: Sandbox = await client.sandbox(
            requires=[Capability.RUN_CODE, Capability.EXEC, Capability.FILES_IN, Capability.FILES_OUT,
                      Capability.FILES_LIST, Capability.HOST_TOOLS],
            egress=Egress.CLOSED, limits=Limits(timeout_s=20, memory_mb=256),
            files_in=TransferLimits(max_bytes_per_file=4 << 20), tools=[ADD],
            declared_outputs=[DeclaredOutput("answer.txt", "text/plain")],
            key=SandboxKey("typed", "program"), idle_timeout=60)
        async with sb:
            await sb.files.write("in.txt", "20 22")
            r: RunResult = await sb.run_code(
                "a, b = map(int, open('in.txt').read().split())\n"
                "open('answer.txt', 'w').write(str(call_tool('add', {'a': a, 'b': b})))\nprint('ok')",
                timeout=10, on_stdout=lines.append)
            code: Optional[int] = r.exit_code
            assert r.status is RunStatus.COMPLETED and code == 0 and r.sandbox_id == sb.sandbox_id
            entries: List[FileEntry] = await sb.files.list()
            lines.extend(e.name for e in entries)
            out: CollectedOutputs = await sb.collect_outputs()
            lines.extend(a.text() for a in out.artifacts)
            try:
                await client.sandbox(key=SandboxKey("typed", "program"))
            except SandboxRefusedError as e:
                lines.append(e.kind or "")
            except AirlockError as e:
                lines.append(f"unexpected {e.code}")
    return lines


def demo_sync(url: str, token: str) -> str:
    with SyncClient.connect(url, token) as client, client.sandbox(metadata={"owner": "typed"}) as sb:
        sb.files.write("x.bin", b"\x00\x01")
        size: Optional[int] = sb.files.stat("x.bin").size
        info: SandboxInfo = sb.set_timeout(120)
        records: List[SandboxRecord] = client.list_sandboxes()
        mine = [r for r in records if r.sandbox_id == sb.sandbox_id]
        owner: str = mine[0].metadata["owner"] if mine else "?"
        return f"{sb.exec(['/bin/echo', 'hi']).stdout.strip()} {size} {owner} {info.idle_timeout_s:g}"


async def demo_snapshots(client: AsyncClient) -> List[str]:
    """Prepare once, fork, explore each; pause and resume by id (run by test_snapshots.py)."""
    lines: List[str] = []
    sb = await client.sandbox(stateful=True, requires=DEFAULT_REQUIRES | {Capability.SNAPSHOT},
                              idle_action=IdleAction.DISPOSE)
    await sb.run_code("base = 10")
    snap: SnapshotInfo = await sb.snapshot()
    kernel: Optional[KernelReport] = snap.kernel
    lines.append(",".join(kernel.saved) if kernel else "-")
    branches: List[Sandbox] = await sb.fork(2)
    for i, b in enumerate(branches):
        r = await b.run_code(f"base * {i + 2}")
        lines.append(r.value.repr if r.value else "?")
        await b.dispose()
    paused: SnapshotInfo = await sb.pause()
    lines.append(str(paused.paused))
    records: List[SandboxRecord] = await client.list_sandboxes()
    lines.extend(r.state for r in records if r.sandbox_id == sb.sandbox_id)
    again: Sandbox = await Sandbox.resume(client, sb.sandbox_id)
    info: SandboxInfo = await again.resume()
    lines.append(str(info.sandbox_id == sb.sandbox_id))
    copy = await client.sandbox(from_snapshot=snap)
    r = await copy.run_code("base")
    lines.append(r.value.repr if r.value else "?")
    await copy.dispose()
    snaps: List[SnapshotRecord] = await client.list_snapshots()
    for s in snaps:
        if s.kept:
            await client.remove_snapshot(s)
    await again.dispose()
    return lines


def demo_snapshots_sync(client: SyncClient) -> str:
    sb = client.sandbox(stateful=True, requires=[*DEFAULT_REQUIRES, "snapshot"], idle_action="pause")
    sb.run_code("n = 3")
    snap: SnapshotInfo = sb.pause()
    back: SyncSandbox = SyncSandbox.resume(client, sb.sandbox_id)
    info: SandboxInfo = back.resume()
    [branch] = back.fork(1)
    r = branch.run_code("n + 1")
    branch.dispose()
    back.dispose()
    return f"{snap.paused} {info.sandbox_id == sb.sandbox_id} {r.value.repr if r.value else '?'}"


if __name__ == "__main__":
    import sys
    print(asyncio.run(demo(sys.argv[1], sys.argv[2])), demo_sync(sys.argv[1], sys.argv[2]))
