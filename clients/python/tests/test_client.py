"""The Python client against a real `airlock serve` (WebSocket and stdio)."""
import asyncio
import json
import threading

import pytest

from airlock_client import (AsyncClient, BusyError, Client, InvalidParamsError, MAX_MESSAGE_BYTES,
                            ProgramTooLargeError, RunResult, StdioClient, ToolDenied, UnauthorizedError)

PROGRAM = """
print(call_tool('add', {'a': 2, 'b': 3}))
print(call_tool('shout', 'hi'))
for name in ('boom', 'secret', 'missing'):
    try:
        call_tool(name, {})
    except ToolError as e:
        print(name, e.code, e.message)
"""


def boom():
    raise ValueError("exploded")


def secret():
    raise ToolDenied("not for you")


async def shout(s):
    return s.upper()


def test_sync_client_runs_a_program_with_tool_callbacks(server):
    with Client.connect(server.url, server.token) as c:
        r = c.execute(PROGRAM, tools={"add": lambda a, b: a + b, "shout": shout, "boom": boom, "secret": secret},
                      timeout=20)
    assert isinstance(r, RunResult)
    assert r.ok, r
    assert r.stdout.splitlines() == [
        "5", "HI", "boom -32001 ValueError: exploded", "secret -32014 not for you",
        "missing -32013 no tool named \"missing\" is available",
    ]
    assert r.tool_calls == 5
    assert r.run_id.startswith("run-")
    # `airlock serve` with no flags forks a fitting run from its zygote.
    assert r.via == "zygote", r.via
    assert r.queued_ms >= 0.0
    records = [json.loads(line) for line in server.audit.read_text().splitlines()]
    assert any(rec.get("run_id") == r.run_id for rec in records)


def test_async_client_typed_results_and_statuses(server):
    async def main():
        async with await AsyncClient.connect(server.url, server.token) as c:
            ok = await c.execute(argv=["/bin/echo", "hello"])
            err = await c.execute("raise SystemExit(3)")
            slow = await c.execute("import time\ntime.sleep(30)", timeout=1)
            env = await c.execute("import os; print(os.environ['K'])", env={"K": "v"})
            return ok, err, slow, env
    ok, err, slow, env = asyncio.run(main())
    assert (ok.status, ok.stdout, ok.exit_code) == ("completed", "hello\n", 0)
    assert (err.status, err.exit_code) == ("error", 3)
    assert slow.status == "timeout" and slow.error.code == -32002
    assert env.stdout == "v\n"


def test_a_second_execute_while_busy_raises_busy_and_the_first_completes(server):
    async def main():
        c = await AsyncClient.connect(server.url, server.token)
        gate = asyncio.Event()

        async def wait():
            await gate.wait()
            return "released"

        first = asyncio.ensure_future(c.execute("print(call_tool('wait', {}))", tools={"wait": wait}))
        await asyncio.sleep(0.5)
        with pytest.raises(BusyError):
            await c.execute(argv=["/bin/true"])
        gate.set()
        r = await first
        await c.close()
        return r
    assert asyncio.run(main()).stdout == "released\n"


def test_refusals_are_typed_errors(server):
    with Client.connect(server.url, server.token) as c:
        with pytest.raises(ProgramTooLargeError):  # refused locally: over the message cap
            c.execute("x" * (MAX_MESSAGE_BYTES + 1))
        with pytest.raises(ProgramTooLargeError):  # refused by the broker: fits, but not with its envelope
            c.execute("#" * (MAX_MESSAGE_BYTES - 600))
        with pytest.raises(InvalidParamsError, match="timeout_s"):
            c.execute("1", timeout=61)
        with pytest.raises(ValueError):
            c.execute()
        assert c.execute(argv=["/bin/true"]).ok
    with pytest.raises(UnauthorizedError):
        Client.connect(server.url, "wrong-token-" + "x" * 20)


def test_many_async_clients_concurrently(server):
    async def one(i):
        async with await AsyncClient.connect(server.url, server.token) as c:
            outs = []
            for j in range(3):
                r = await c.execute(f"print(call_tool('id', {{'v': {i * 10 + j}}}))", tools={"id": lambda v: v})
                outs.append(r.stdout)
            return outs

    async def main():
        return await asyncio.gather(*(one(i) for i in range(8)))
    results = asyncio.run(main())
    assert results == [[f"{i * 10 + j}\n" for j in range(3)] for i in range(8)]


def test_stdio_client(bin_path):
    async def main():
        c = await StdioClient.start(bin_path, env={"RUST_LOG": "warn", "PATH": "/usr/bin:/bin"})
        r = await c.execute("print(call_tool('twice', 21))", tools={"twice": lambda n: n * 2})
        await c.close()
        return r
    r = asyncio.run(main())
    assert r.ok and r.stdout == "42\n"


def test_blocking_tool_callbacks_do_not_stall_the_connection(server):
    release = threading.Event()

    def blocking():
        release.wait(10)
        return "done"

    def releaser():
        release.set()
        return "set"

    # Both tools run on worker threads; the second call can only be answered if the first
    # did not block the reader.
    prog = "import threading\nprint(call_tool('releaser'))\nprint(call_tool('blocking'))"
    with Client.connect(server.url, server.token) as c:
        r = c.execute(prog, tools={"blocking": blocking, "releaser": releaser})
    assert r.stdout == "set\ndone\n"
