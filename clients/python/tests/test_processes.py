"""Background processes and terminals (`sandbox.commands`, `sandbox.pty`) against a real
`airlock serve`: output and exit, stdin, a bash terminal (prompt, echo, Ctrl-C, resize), kill,
a background server reached by a one-shot command, re-attach from a second client, listing,
refusals, and the sync twin. Every wait has a deadline; nothing sleeps to let things happen."""
import asyncio
import base64
import inspect
import threading

import pytest

from airlock_client import (DEFAULT_REQUIRES, AsyncClient, Capability, CommandResult, Commands, NotFoundError,
                            Process, Pty, RunResult, SandboxRefusedError, SyncClient, SyncCommands, SyncProcess,
                            SyncPty, SyncTerminal, Terminal)
from airlock_client._proc_route import MAX_PENDING_BYTES, ProcessTable

WITH_PROCESSES = [*DEFAULT_REQUIRES, Capability.PROCESSES]


@pytest.fixture
async def client(server):
    c = await AsyncClient.connect(server.url, server.token)
    yield c
    await c.close()


@pytest.fixture
async def sb(client):
    async with await client.sandbox(requires=WITH_PROCESSES) as s:
        yield s


async def test_a_background_process_streams_its_output_and_exits(sb):
    out, err = [], []
    p = await sb.commands.run("echo out; echo err >&2; exit 3", background=True,
                              on_stdout=out.append, on_stderr=err.append)
    assert isinstance(p, Process) and p.process_id.startswith(sb.sandbox_id + ".proc-")
    assert p.pid == p.process_id
    r = await p.wait(timeout=30)
    assert isinstance(r, CommandResult)
    assert (r.exit_code, r.signal, r.stdout, r.stderr, r.dropped_bytes) == (3, None, "out\n", "err\n", 0)
    assert not r.ok and p.exited and p.exit_code == 3
    assert "".join(out) == "out\n" and "".join(err) == "err\n"
    recent = await p.output()
    assert (recent.stdout, recent.stderr) == ("out\n", "err\n")


async def test_background_false_is_the_one_shot_exec(sb):
    r = await sb.commands.run(["/bin/echo", "once"])
    assert isinstance(r, RunResult) and r.ok and r.stdout == "once\n"
    with pytest.raises(ValueError):
        await sb.commands.run("cat", stdin=True)  # type: ignore[call-overload]


async def test_stdin_reaches_a_background_cat(sb):
    p = await sb.commands.run(["/bin/cat"], background=True, stdin=True)
    assert await p.send_stdin("hello\n") == 6
    assert await p.expect("hello\n", timeout=30) == "hello\n"
    await p.send_stdin(b"\x00bytes\n")
    await p.expect("bytes\n", timeout=30)
    await p.close_stdin()
    r = await p.wait(timeout=30)
    assert r.exit_code == 0 and r.stdout_data == b"hello\n\x00bytes\n"


async def test_a_terminal_runs_bash_with_echo_ctrl_c_and_resize(sb):
    seen = []
    t = await sb.pty.create(rows=24, cols=80, on_data=seen.append)
    assert isinstance(t, Terminal)
    await t.expect("$ ", timeout=30)                       # the prompt
    await t.send_input("echo hi\n")
    assert "echo hi" in await t.expect("hi\r\n", timeout=30)  # typed text echoed, then the output
    # `sleep 30`, interrupted by Ctrl-C: bash reports status 130 (128 + SIGINT). The child
    # prints once it is the terminal's foreground job (bash hands it the terminal before exec),
    # so the Ctrl-C cannot reach bash itself first.
    await t.send_input("sh -c 'echo sl\"\"eeping; exec sleep 30'\n")
    await t.expect("sleeping\r\n", timeout=30)
    await t.send_input("\x03")
    await t.send_input("echo rc=$?\n")
    await t.expect("rc=130", timeout=20)                   # well before the sleep's 30 s
    await t.send_input("stty size\n")
    await t.expect("24 80\r\n", timeout=30)
    await t.resize(40, 100)
    await t.send_input("stty size\n")
    await t.expect("40 100\r\n", timeout=30)
    await t.send_input("exit\n")
    info = await t.wait(timeout=30)
    assert info.state == "exited" and info.exit_code == 0 and info.pty
    assert b"".join(seen) == t.output and b"rc=130" in t.output
    assert b"".join([c async for c in t]) == t.output      # iterating an ended terminal replays it


async def test_kill_ends_a_background_process(sb):
    p = await sb.commands.run(["/bin/sleep", "60"], background=True)
    with pytest.raises(TimeoutError):
        await p.wait(timeout=0.2)
    assert [i.state for i in await sb.commands.list() if i.process_id == p.process_id] == ["running"]
    assert await p.kill() is True
    r = await p.wait(timeout=30)
    assert r.exit_code is None and r.signal == 9
    info = [i for i in await sb.commands.list() if i.process_id == p.process_id]
    assert [(i.state, i.signal, i.argv) for i in info] == [("exited", 9, ["/bin/sleep", "60"])]


async def test_signal_by_name_reaches_a_trap(sb):
    p = await sb.commands.run("trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.1; done",
                              background=True)
    await p.expect("ready", timeout=30)
    assert await p.signal("TERM") is True
    r = await p.wait(timeout=30)
    assert "got-term" in r.stdout and (r.exit_code, r.signal) in ((7, None), (None, 15))


async def test_a_one_shot_command_reaches_a_background_http_server(sb):
    await sb.files.write("index.html", "hello from the sandbox\n")
    port = 8765
    server = await sb.commands.run(["/usr/bin/python3", "-u", "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                                   background=True)
    await server.expect("Serving HTTP", timeout=30)
    fetch = f"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{port}/index.html').read().decode())"
    r = await sb.commands.run(["/usr/bin/python3", "-c", fetch], timeout=30)
    assert r.ok, r.stderr
    assert r.stdout == "hello from the sandbox\n\n"
    assert await server.kill()
    assert (await server.wait(timeout=30)).signal == 9
    assert "GET /index.html" in (await server.output()).stderr  # the server's access log


async def test_a_second_client_reattaches_and_hears_later_output(server, client):
    async with await client.sandbox(requires=WITH_PROCESSES) as sb:
        p = await sb.commands.run("echo first; while [ ! -f go ]; do sleep 0.05; done; echo later; exit 5",
                                  background=True)
        await p.expect("first", timeout=30)
        async with await AsyncClient.connect(server.url, server.token) as other:
            sb2 = await other.connect_sandbox(sb.sandbox_id)
            assert [i.process_id for i in await sb2.commands.list() if i.running] == [p.process_id]
            heard = []
            p2 = await sb2.commands.connect(p.process_id, on_stdout=heard.append)
            assert p2.argv == p.argv
            assert (await p2.output()).stdout == "first\n"        # what came before the re-attach
            await sb2.files.write("go", "")
            assert await p2.expect("later", timeout=30) == "later"
            r = await p2.wait(timeout=30)
            assert r.exit_code == 5 and "".join(heard) == "later\n"
            assert r.stdout == "first\nlater\n"                    # completed from process.output
        assert (await p.wait(timeout=30)).stdout == "first\nlater\n"   # the first client heard it all


async def test_refusals(client, sb):
    async with await client.sandbox() as plain:                # no `processes` capability
        with pytest.raises(SandboxRefusedError):
            await plain.commands.run("true", background=True)
        with pytest.raises(SandboxRefusedError):
            await plain.pty.create()
    with pytest.raises(NotFoundError):
        await sb.commands.connect(sb.sandbox_id + ".proc-999")
    with pytest.raises(NotFoundError):
        await sb.commands.kill(sb.sandbox_id + ".proc-999")


async def test_a_process_that_ended_before_the_wait_still_completes(sb):
    """The exit comes from process.wait when the notification is never heard (a handle made
    after the process ended)."""
    p = await sb.commands.run("echo done", background=True)
    await p.wait(timeout=30)
    late = await sb.commands.connect(p.process_id)
    r = await late.wait(timeout=30)
    assert (r.exit_code, r.stdout) == (0, "done\n")


def test_the_router_keeps_unclaimed_notifications_until_a_handle_registers():
    class Sink:
        def __init__(self):
            self.events = []

        def on_output(self, stream, data):
            self.events.append((stream, data))

        def on_exit(self, code, sig):
            self.events.append(("exit", code))

        def on_closed(self, err):
            self.events.append(("closed", err))

    table = ProcessTable()
    b64 = base64.b64encode(b"early").decode()
    table.output({"process_id": "sb.proc-1", "stream": "stdout", "data": b64, "encoding": "base64"})
    table.exited({"process_id": "sb.proc-1", "exit_code": 0, "signal": None})
    sink = Sink()
    table.register("sb.proc-1", sink)
    assert sink.events == [("stdout", b"early"), ("exit", 0)]
    big = base64.b64encode(b"x" * (MAX_PENDING_BYTES // 2 + 1)).decode()
    for _ in range(4):  # over the cap: the oldest unclaimed output goes
        table.output({"process_id": "sb.proc-2", "stream": "stdout", "data": big, "encoding": "base64"})
    other = Sink()
    table.register("sb.proc-2", other)
    assert len(other.events) == 1


@pytest.mark.parametrize("sync_cls, async_cls", [(SyncCommands, Commands), (SyncProcess, Process),
                                                 (SyncPty, Pty), (SyncTerminal, Terminal)])
def test_the_sync_twins_have_the_same_signatures(sync_cls, async_cls):
    names = [n for n, f in inspect.getmembers(async_cls, inspect.iscoroutinefunction) if not n.startswith("_")]
    assert names
    for name in names:
        sig = [(p.name, p.kind, p.default) for p in inspect.signature(getattr(async_cls, name)).parameters.values()]
        twin = [(p.name, p.kind, p.default) for p in inspect.signature(getattr(sync_cls, name)).parameters.values()]
        assert twin == sig, name


def test_the_sync_twin_runs_processes_and_terminals(server):
    with SyncClient.connect(server.url, server.token) as c, c.sandbox(requires=WITH_PROCESSES) as sb:
        threads = set()
        p = sb.commands.run(["/bin/cat"], background=True, stdin=True,
                            on_stdout=lambda s: threads.add(threading.current_thread().name))
        assert isinstance(p, SyncProcess)
        p.send_stdin("sync\n")
        assert p.expect("sync", timeout=30) == "sync"
        p.close_stdin()
        assert p.wait(timeout=30).stdout == "sync\n" and threads == {"airlock-client"}
        assert sb.commands.run("echo one-shot").stdout == "one-shot\n"
        t = sb.pty.create(cmd=["/bin/sh", "-c", "echo ready; read line; echo got:$line"])
        assert t.expect(b"ready", timeout=30) == b"ready"
        t.send_input("abc\n")
        assert "got:abc" in b"".join(t).decode()                # iterates to the exit
        assert t.wait(timeout=30).exit_code == 0
        assert [i.process_id for i in sb.commands.list()] == [p.process_id, t.process_id]


async def test_many_processes_on_one_connection_are_routed_apart(sb):
    procs = [await sb.commands.run(f"for i in 1 2 3; do echo p{n}-$i; done", background=True) for n in range(6)]
    results = await asyncio.gather(*(p.wait(timeout=60) for p in procs))
    for n, r in enumerate(results):
        assert r.stdout == "".join(f"p{n}-{i}\n" for i in (1, 2, 3))
