"""The Sandbox API (async) against a real `airlock serve`: every method, chunked files, streaming,
cancel, persistence, re-attach, typed errors, declared tools answered by Python callables."""
import asyncio
import builtins
import hashlib
import json
import socket

import pytest

from airlock_client import (AsyncClient, BusyError, Capability, CollectedOutputs, ConnectionClosedError,
                            ConnectionError, DeclaredOutput,
                            Egress, FileRefusedError, InvalidParamsError, IsolationScope, Limits, NotFoundError,
                            RunStatus, Sandbox, SandboxKey, SandboxRefusedError, StdioClient, Tool, TransferLimits)

MIB = 1024 * 1024
ALL_BUT_TOOLS = [Capability.RUN_CODE, Capability.EXEC, Capability.FILES_IN, Capability.FILES_OUT,
                 Capability.FILES_LIST, Capability.FILES_DELETE]

RUNAWAY = """
import time
n = 0
while True:
    n += 1
    open('beat.txt', 'w').write(str(n))
    if n == 2:
        print('started', flush=True)
    time.sleep(0.05)
"""


@pytest.fixture
async def client(server):
    c = await AsyncClient.connect(server.url, server.token)
    yield c
    await c.close()


def started_event():
    """An on_stdout callback and an event set once the program printed 'started'."""
    ev = asyncio.Event()
    seen = []

    def on_out(chunk):
        seen.append(chunk)
        if "started" in "".join(seen):
            ev.set()
    return on_out, ev


async def assert_stopped(sb):
    """External evidence the run is gone: its heartbeat file stops changing."""
    first = await sb.files.read_text("beat.txt")
    await asyncio.sleep(0.5)
    assert await sb.files.read_text("beat.txt") == first


async def test_every_method_of_a_sandbox(client):
    outputs = [DeclaredOutput("out/p.bin", "image/png", name="plot"),
               DeclaredOutput("missing.txt", "text/plain", required=False)]
    async with await client.sandbox(requires=ALL_BUT_TOOLS, limits=Limits(timeout_s=20, memory_mb=256),
                                     idle_timeout=300, declared_outputs=outputs) as sb:
        assert isinstance(sb, Sandbox) and sb.sandbox_id.startswith("sb-")
        assert (sb.info.work_dir, sb.info.egress, sb.info.isolation_scope) == ("/work", Egress.CLOSED,
                                                                            IsolationScope.CONVERSATION)
        assert sb.info.idle_timeout_s == 300
        assert set(sb.info.requires) == set(ALL_BUT_TOOLS)

        assert (await sb.files.write("data/in.txt", "3 4 5")).size == 5
        assert (await sb.files.write("raw.bin", b"\x00\xff\x01")).size == 3
        r = await sb.run_code("import os\nnums = [int(x) for x in open('data/in.txt').read().split()]\n"
                              "os.makedirs('out', exist_ok=True)\nopen('out/p.bin', 'wb').write(bytes(range(256)))\n"
                              "print(sum(nums), os.environ.get('K'))", env={"K": "v"})
        assert r.ok and r.stdout == "12 v\n", r
        assert r.status is RunStatus.COMPLETED and r.sandbox_id == sb.sandbox_id and r.run_id.startswith("run-")
        assert r.warm is False and r.egress == [] and r.output_dropped_bytes is None
        assert isinstance(r.enforcement, list) and r.raw["run_id"] == r.run_id

        e = await sb.exec(["/bin/sh", "-c", "pwd; echo $K; cat in.txt"], cwd="/work/data", env={"K": "w"})
        assert e.ok and e.stdout == "/work/data\nw\n3 4 5", e

        assert await sb.files.read("raw.bin") == b"\x00\xff\x01"
        assert await sb.files.read_text("data/in.txt") == "3 4 5"
        names = [(x.name, x.is_dir) for x in await sb.files.list()]
        assert names == [("data", True), ("out", True), ("raw.bin", False)]
        assert [x.name for x in await sb.files.list("out")] == ["p.bin"]
        st = await sb.files.stat("raw.bin")
        assert (st.exists, st.size, st.is_dir) == (True, 3, False)
        assert (await sb.files.stat("data")).is_dir
        assert not await sb.files.exists("nope")
        await sb.files.remove("raw.bin")
        assert not await sb.files.exists("raw.bin")
        await sb.files.remove("raw.bin")  # missing is success
        many = await sb.files.write_many({"many/a.txt": "aa", "many/b.bin": b"\x00"})
        assert [(s.path, s.size) for s in many] == [("many/a.txt", 2), ("many/b.bin", 1)]
        await sb.files.remove("many/a.txt")
        await sb.files.remove("many/b.bin")
        await sb.files.remove("many")
        assert await sb.files.make_dir("made/deep", parents=True) is True
        assert await sb.files.make_dir("made/deep") is False  # already there
        moved = await sb.files.rename("data/in.txt", "made/deep/in.txt")
        assert (moved.path, moved.kind, moved.size) == ("made/deep/in.txt", "file", 5)
        assert not await sb.files.exists("data/in.txt")
        await sb.files.rename("made/deep/in.txt", "data/in.txt")
        await sb.files.remove("made/deep")
        await sb.files.remove("made")

        got = await sb.collect_outputs()
        assert isinstance(got, CollectedOutputs) and got.absent == ["missing.txt"]
        plot = got.get("plot")
        assert plot is not None and (plot.media_type, plot.size, plot.data) == ("image/png", 256, bytes(range(256)))

        assert (await sb.describe()).sandbox_id == sb.sandbox_id
        d = await sb.dispose()
        assert d.ok and d.sandbox_id == sb.sandbox_id
    # Leaving `async with` after an explicit dispose is quiet; the sandbox is gone.
    with pytest.raises(NotFoundError):
        await client.connect_sandbox(sb.sandbox_id)


async def test_a_3_mib_file_moves_both_ways_byte_exact(client):
    blob = bytes((i * 31 + i // 1000) % 256 for i in range(3 * MIB + 12345))
    async with await client.sandbox() as sb:
        assert (await sb.files.write("blob.bin", blob)).size == len(blob)
        r = await sb.run_code("import hashlib\nb = open('blob.bin', 'rb').read()\n"
                              "open('rev.bin', 'wb').write(b[::-1])\nprint(len(b), hashlib.sha256(b).hexdigest())")
        assert r.stdout == f"{len(blob)} {hashlib.sha256(blob).hexdigest()}\n", r
        assert await sb.files.read("rev.bin") == blob[::-1]
        assert (await sb.files.stat("rev.bin")).size == len(blob)
        # An exact multiple of the chunk, and an empty file.
        exact = blob[:2 * 512 * 1024]
        await sb.files.write("exact.bin", exact)
        assert await sb.files.read("exact.bin") == exact
        await sb.files.write("empty.bin", b"")
        assert await sb.files.read("empty.bin") == b""


async def test_streaming_callbacks_arrive_in_order_before_the_result(client):
    code = ("import sys, time\nfor i in range(6):\n    print(f'out {i}', flush=True)\n"
            "    print(f'err {i}', file=sys.stderr, flush=True)\n    time.sleep(0.1)\n")
    outs, errs, events = [], [], []
    async with await client.sandbox() as sb:
        r = await sb.run_code(code, on_stdout=lambda s: (outs.append(s), events.append("o")),
                              on_stderr=lambda s: (errs.append(s), events.append("e")))
        assert r.ok, r
        assert "".join(outs) == r.stdout == "".join(f"out {i}\n" for i in range(6))
        assert "".join(errs) == r.stderr == "".join(f"err {i}\n" for i in range(6))
        assert len(events) >= 6 and r.output_dropped_bytes == 0
        # exec streams too.
        lines = []
        e = await sb.exec(["/bin/sh", "-c", "for i in 1 2 3; do echo $i; sleep 0.1; done"], on_stdout=lines.append)
        assert "".join(lines) == e.stdout == "1\n2\n3\n"


async def test_two_sandboxes_stream_and_call_tools_concurrently_on_one_connection(client):
    """Routing by run: each run's output and tool calls reach its own callbacks only."""
    def tool_for(tag):
        return Tool.define(lambda v: f"{tag}:{v}", name="echo", schema={"type": "object"})
    code = ("import time\nfor i in range(5):\n    print(call_tool('echo', {'v': i}), flush=True)\n"
            "    time.sleep(0.05)\n")
    a = await client.sandbox(tools=[tool_for("A")])
    b = await client.sandbox(tools=[tool_for("B")])
    got = {"A": [], "B": []}
    try:
        ra, rb = await asyncio.gather(a.run_code(code, on_stdout=got["A"].append),
                                      b.run_code(code, on_stdout=got["B"].append))
    finally:
        await a.dispose()
        await b.dispose()
    for tag, r in (("A", ra), ("B", rb)):
        assert r.ok and r.stdout == "".join(f"{tag}:{i}\n" for i in range(5)), r
        assert "".join(got[tag]) == r.stdout


async def test_cancel_stops_a_runaway_run_and_the_sandbox_lives_on(client, server):
    async with await client.sandbox() as sb:
        on_out, started = started_event()
        run = asyncio.ensure_future(sb.run_code(RUNAWAY, timeout=60, on_stdout=on_out))
        await asyncio.wait_for(started.wait(), 30)
        with pytest.raises(BusyError):
            await sb.run_code("print(1)")
        run_id = await sb.cancel()
        r = await asyncio.wait_for(run, 30)
        assert r.status == RunStatus.CANCELLED and r.run_id == run_id, r
        await assert_stopped(sb)
        with pytest.raises(NotFoundError):
            await sb.cancel()  # nothing in flight
        assert (await sb.run_code("print(open('beat.txt').read() != '')")).stdout == "True\n"
    records = [json.loads(line) for line in server.audit.read_text().splitlines()]
    assert any(rec.get("run_id") == run_id and rec["status"] == "cancelled" for rec in records)


async def test_cancelling_the_awaiting_task_cancels_the_run_on_the_broker(client, server):
    async with await client.sandbox() as sb:
        on_out, started = started_event()
        task = asyncio.ensure_future(sb.run_code(RUNAWAY, timeout=60, on_stdout=on_out))
        await asyncio.wait_for(started.wait(), 30)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The next run waits for the cancelled one to end (no `busy`), long before its 60 s budget.
        r = await sb.run_code("print('next')")
        assert r.stdout == "next\n" and loop.time() - t0 < 20, r
        await assert_stopped(sb)
    records = [json.loads(line) for line in server.audit.read_text().splitlines()]
    assert any(rec.get("status") == "cancelled" and rec.get("workload") == "python" for rec in records)


async def test_files_persist_across_runs_and_each_run_is_a_fresh_process(client):
    async with await client.sandbox() as sb:
        await sb.run_code("import os\nopen('state.json', 'w').write('{\"n\": 1}')\nprint(os.getpid())")
        for want in (2, 3):
            r = await sb.run_code("import json\ns = json.load(open('state.json'))\ns['n'] += 1\n"
                                  "json.dump(s, open('state.json', 'w'))\nprint(s['n'], 'x' in globals())")
            assert r.stdout == f"{want} False\n", r
        assert json.loads(await sb.files.read_text("state.json")) == {"n": 3}


async def test_reattach_after_the_connection_closes(server):
    first = await AsyncClient.connect(server.url, server.token)
    sb = await first.sandbox(idle_timeout=120)
    await sb.files.write("note.txt", "kept")
    await first.close()
    with pytest.raises(ConnectionClosedError):
        await sb.files.read("note.txt")
    async with await AsyncClient.connect(server.url, server.token) as second:
        again = await Sandbox.connect(second, sb.sandbox_id)
        assert again.sandbox_id == sb.sandbox_id and again.info.idle_timeout_s == 120
        assert await again.files.read_text("note.txt") == "kept"
        assert (await again.run_code("print(open('note.txt').read())")).stdout == "kept\n"
        via_client = await second.connect_sandbox(sb.sandbox_id)
        await via_client.dispose()
        with pytest.raises(NotFoundError):
            await again.run_code("1")


async def test_typed_errors(client, server):
    sb = await client.sandbox(requires=[Capability.RUN_CODE, Capability.FILES_IN, Capability.FILES_OUT])
    with pytest.raises(InvalidParamsError):
        await sb.files.read("../etc/passwd")
    with pytest.raises(InvalidParamsError, match="timeout_s"):
        await sb.run_code("1", timeout=61)  # over the server's 60 s ceiling
    with pytest.raises(SandboxRefusedError) as refused:
        await sb.files.remove("x")  # files_delete was not required
    assert refused.value.code == -32007 and "files_delete" in refused.value.message
    with pytest.raises(SandboxRefusedError):
        await sb.exec(["/bin/true"])
    await sb.run_code("import os\nos.symlink('/etc/passwd', 'link')")
    with pytest.raises(FileRefusedError):
        await sb.files.read("link")
    await sb.dispose()
    for call in (lambda: sb.run_code("1"), lambda: sb.files.read("x"), lambda: sb.dispose(),
                 lambda: client.connect_sandbox(sb.sandbox_id)):
        with pytest.raises(NotFoundError) as nf:
            await call()
        assert nf.value.code == -32016

    key = SandboxKey("tenant", "conversation-1")
    keyed = await client.sandbox(key=key, limits=Limits(timeout_s=10))
    assert (await client.sandbox(key=key, limits=Limits(timeout_s=10))).sandbox_id == keyed.sandbox_id
    with pytest.raises(SandboxRefusedError) as mismatch:
        await client.sandbox(key=key, limits=Limits(timeout_s=11))
    assert mismatch.value.kind == "SandboxKeySpecMismatch"
    await keyed.dispose()
    with pytest.raises(SandboxRefusedError) as too_big:
        await client.sandbox(files_in=TransferLimits(max_bytes_per_file=2**40, max_total_bytes=2**41))
    assert too_big.value.kind == "SandboxTransferLimitsNotPermitted"
    with pytest.raises(InvalidParamsError):
        await client.sandbox(idle_timeout=-1)
    with pytest.raises(ValueError):
        await client.sandbox(requires=["teleport"])


async def test_a_refused_connection_is_a_typed_connection_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the connect: nothing listens
    with pytest.raises(ConnectionError) as e:
        await AsyncClient.connect(f"ws://127.0.0.1:{port}/", "t" * 20)
    assert isinstance(e.value, builtins.ConnectionError)
    with pytest.raises(ConnectionError):
        await StdioClient.start("/nonexistent/airlock")


async def test_declared_tools_are_answered_by_python_callables(client):
    calls = []

    def add(a, b):
        """Add two integers."""
        calls.append((a, b))
        return a + b

    async def shout(text):
        return text.upper()

    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
              "required": ["a", "b"], "additionalProperties": False}
    tools = [Tool.define(add, schema=schema),
             Tool.define(shout, schema={"type": "object", "properties": {"text": {"type": "string"}}})]
    program = """
print(call_tool('add', {'a': 2, 'b': 3}))
print(call_tool('shout', {'text': 'hi'}))
for name, args in (('add', {'a': 'x'}), ('undeclared', {})):
    try:
        call_tool(name, args)
    except ToolError as e:
        print(name, e.code)
"""
    async with await client.sandbox(tools=tools) as sb:
        assert Capability.HOST_TOOLS in sb.info.requires
        r = await sb.run_code(program)
        assert r.ok, r
        out = r.stdout.splitlines()
        assert out[:2] == ["5", "HI"]
        assert out[2] == "add -32602" and out[3] == "undeclared -32013", out
        assert calls == [(2, 3)]  # the schema-violating call never reached the callable
        assert r.tool_calls >= 3
        narrowed = await sb.run_code("try:\n    call_tool('add', {'a': 1, 'b': 1})\n"
                                     "except ToolError as e:\n    print(e.message)", tools=["shout"])
        # Refused by the broker (the relay reports it to the guest as tool_error, not unknown_tool).
        assert narrowed.stdout == 'no tool named "add" is available\n', narrowed
        assert calls == [(2, 3)]
        # A re-attached sandbox gets its callables by name.
        again = await client.connect_sandbox(sb.sandbox_id, tools={"add": lambda a, b: a * b})
        assert (await again.run_code("print(call_tool('add', {'a': 4, 'b': 5}))")).stdout == "20\n"


async def test_a_sandbox_over_stdio(bin_path):
    c = await StdioClient.start(bin_path, env={"RUST_LOG": "warn", "PATH": "/usr/bin:/bin"})
    try:
        async with await c.sandbox() as sb:
            await sb.files.write("a.txt", "stdio")
            chunks = []
            r = await sb.run_code("print(open('a.txt').read())", on_stdout=chunks.append)
            assert r.stdout == "stdio\n" == "".join(chunks)
    finally:
        await c.close()


async def test_dispose_scope_disposes_every_sandbox_of_a_conversation(client):
    a = await client.sandbox(key=SandboxKey("tenant-s", "conv-9"))
    b = await client.sandbox(key=SandboxKey("tenant-s", "conv-9", call_id="c1"), isolation_scope="call")
    other = await client.sandbox(key=SandboxKey("tenant-s", "conv-10"))
    answer = await client.dispose_scope("tenant-s", "conv-9")
    assert answer.get("undisposed") is None, answer
    for gone in (a, b):
        with pytest.raises(NotFoundError):
            await gone.describe()
    assert (await other.describe()).sandbox_id == other.sandbox_id
    await other.dispose()


async def test_more_runs_than_the_brokers_in_flight_cap_on_one_connection(tmp_path):
    """The broker stops reading a connection with 16 session methods in flight; the client keeps
    below that, so `cancel()` and tool answers always get through."""
    from conftest import Server
    # 17 sandboxes of the default bounds may hold more than this host's default admission
    # budget (docs/server.md); they hold nothing here, so the budget is set out of the way.
    s = Server(tmp_path, extra=["--max-concurrent-runs", "32", "--ceiling-timeout", "60",
                                "--memory-budget-mb", "1048576"])
    try:
        async with await AsyncClient.connect(s.url, s.token) as c:
            ping = Tool.define(lambda: "pong", name="ping", schema={"type": "object"})
            sbs = [await c.sandbox(tools=[ping]) for _ in range(17)]
            events = [started_event() for _ in range(16)]
            runs = [asyncio.ensure_future(sb.run_code(RUNAWAY, timeout=60, on_stdout=on_out))
                    for sb, (on_out, _) in zip(sbs, events)]
            await asyncio.wait_for(asyncio.gather(*(ev.wait() for _, ev in events[:15])), 60)
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            await sbs[0].cancel()
            assert loop.time() - t0 < 5
            assert (await asyncio.wait_for(runs[0], 30)).status == RunStatus.CANCELLED
            await asyncio.wait_for(events[15][1].wait(), 30)  # the 16th run got the freed slot
            for task in runs[1:]:
                task.cancel()
            r = await asyncio.wait_for(sbs[16].run_code("print(call_tool('ping'))"), 60)
            assert r.stdout == "pong\n", r
            for sb in sbs:
                await sb.dispose()
    finally:
        s.stop()


async def test_exact_output_and_file_kinds(client):
    async with await client.sandbox() as sb:
        r = await sb.exec(["/bin/sh", "-c", r"printf 'a\377'; printf '\351' >&2"], exact_output=True)
        assert (r.stdout_data, r.stderr_data) == (b"a\xff", b"\xe9")
        assert r.stdout == "a\ufffd"
        text = await sb.exec(["/bin/sh", "-c", r"printf 'a\377'"])
        assert text.stdout_data is None and text.stdout == "a\ufffd"
        await sb.exec(["/bin/sh", "-c", "echo x > f && ln -s f link && mkdir d"])
        assert [(e.name, e.kind) for e in await sb.files.list()] == [("d", "dir"), ("f", "file"), ("link", "symlink")]
        assert (await sb.files.stat("link")).kind == "symlink"
        assert (await sb.files.stat("missing")).kind is None


async def test_a_missing_command_or_work_dir_is_not_found_not_refused(client):
    """Something the run names that is not there is the request's error (`not_found`), not a
    missing isolation layer (`refused`); nothing runs, and the sandbox stays usable."""
    async with await client.sandbox() as sb:
        r = await sb.exec(["no-such-command-xyz"])
        assert r.status == RunStatus.ERROR and r.exit_code is None, r
        assert r.error is not None and r.error.code == -32016 and "command not found" in r.error.message
        with pytest.raises(NotFoundError):  # the server checks the directory before the run
            await sb.exec(["/bin/pwd"], cwd="/work/missing")
        r = await sb.exec(["./missing.sh"])
        assert r.status == RunStatus.ERROR and r.error is not None and r.error.code == -32016, r
        await sb.files.write("there/x.txt", b"x")
        r = await sb.exec(["/bin/pwd"], cwd="/work/there")
        assert r.status == RunStatus.COMPLETED and r.stdout == "/work/there\n", r
