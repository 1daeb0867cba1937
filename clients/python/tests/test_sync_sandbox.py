"""The blocking twins (`SyncClient`, `SyncSandbox`) against a real `airlock serve`."""
import inspect
import signal
import threading
import time

import pytest

from airlock_client import (AsyncClient, BusyError, Client, NotFoundError, RunStatus, Sandbox, SyncClient,
                            SyncFiles, SyncSandbox, Tool)
from airlock_client._files import Files

RUNAWAY = "import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.05)\n"


def test_the_sync_twin_covers_the_sandbox(server):
    assert Client is SyncClient
    with SyncClient.connect(server.url, server.token) as c:
        tools = [Tool.define(lambda n: n * 2, name="twice", schema={"type": "object"})]
        with c.sandbox(tools=tools, idle_timeout=60) as sb:
            assert isinstance(sb, SyncSandbox)
            blob = bytes(range(256)) * 5000  # over one chunk
            assert sb.files.write("b.bin", blob).size == len(blob)
            sb.files.write("t.txt", "text")
            chunks = []
            r = sb.run_code("print(call_tool('twice', {'n': 21}))\nprint(open('t.txt').read())",
                            on_stdout=chunks.append)
            assert r.ok and r.stdout == "42\ntext\n" == "".join(chunks), r
            assert sb.exec(["/bin/cat", "t.txt"]).stdout == "text"
            assert sb.files.read("b.bin") == blob and sb.files.read_text("t.txt") == "text"
            assert [e.name for e in sb.files.list()] == ["b.bin", "t.txt"]
            assert sb.files.stat("t.txt").size == 4 and sb.files.exists("t.txt")
            sb.files.remove("t.txt")
            assert not sb.files.exists("t.txt")
            assert sb.describe().sandbox_id == sb.sandbox_id
            assert sb.collect_outputs().artifacts == []
            again = SyncSandbox.connect(c, sb.sandbox_id)
            assert again.files.read("b.bin") == blob
        with pytest.raises(NotFoundError):  # leaving `with` disposed it
            c.connect_sandbox(sb.sandbox_id)


def test_sync_cancel_from_another_thread(server):
    with SyncClient.connect(server.url, server.token) as c, c.sandbox() as sb:
        started = threading.Event()
        out = {}

        def run():
            out["r"] = sb.run_code(RUNAWAY, timeout=60, on_stdout=lambda s: started.set())
        t = threading.Thread(target=run)
        t.start()
        assert started.wait(30)
        with pytest.raises(BusyError):
            sb.run_code("1")
        t0 = time.monotonic()
        sb.cancel()
        t.join(30)
        assert out["r"].status == RunStatus.CANCELLED and time.monotonic() - t0 < 20
        assert sb.run_code("print(2)").stdout == "2\n"


def _params(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("sync_cls, async_cls", [(SyncClient, AsyncClient), (SyncSandbox, Sandbox),
                                                 (SyncFiles, Files)])
def test_the_twins_have_the_same_signatures(sync_cls, async_cls):
    names = [n for n, f in inspect.getmembers(async_cls, inspect.iscoroutinefunction)
             if not n.startswith("_") and n not in ("close",)]
    assert names
    for name in names:
        if name == "connect" and async_cls is AsyncClient:
            continue  # the transports differ; checked below
        assert _params(getattr(sync_cls, name)) == _params(getattr(async_cls, name)), name
    assert _params(SyncClient.connect) == _params(AsyncClient.connect)


def test_an_interrupted_sync_call_cancels_the_run_on_the_broker(server):
    main = threading.get_ident()
    with SyncClient.connect(server.url, server.token) as c, c.sandbox() as sb:
        started = threading.Event()

        def interrupt():
            if started.wait(30):
                signal.pthread_kill(main, signal.SIGINT)  # Ctrl-C, delivered to the blocked thread
        threading.Thread(target=interrupt).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            sb.run_code(RUNAWAY, timeout=60, on_stdout=lambda s: started.set())
        # The next run waits for the cancelled one to be gone, long before its 60 s budget.
        assert sb.run_code("print(3)").stdout == "3\n" and time.monotonic() - t0 < 20
