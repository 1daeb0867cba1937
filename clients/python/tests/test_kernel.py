"""Stateful sandboxes through the SDK: state across calls, the trailing value, rich output as
bytes, an interrupt that keeps state and a kill that says it did not; against a real server."""
import asyncio

import pytest

from airlock_client import AsyncClient, CellValue, Limits, RunStatus, SyncClient


@pytest.fixture
async def client(server):
    c = await AsyncClient.connect(server.url, server.token)
    yield c
    await c.close()


async def test_a_stateful_sandbox_keeps_state_and_returns_values(client):
    async with await client.sandbox(stateful=True, limits=Limits(timeout_s=20)) as sb:
        r = await sb.run_code("import math\nfacts = {'pi': round(math.pi, 2)}")
        assert r.ok and r.value is None and not r.kernel_restarted
        r = await sb.run_code("facts['e'] = round(math.e, 2)\nfacts")
        assert r.value == CellValue(repr="{'pi': 3.14, 'e': 2.72}", json={"pi": 3.14, "e": 2.72}, has_json=True)
        r = await sb.run_code("class P:\n    pass\nP()")
        assert r.value is not None and r.value.repr.startswith("<__main__.P object") and not r.value.has_json


async def test_an_interrupt_keeps_state_and_a_kill_says_it_did_not(client):
    async with await client.sandbox(stateful=True) as sb:
        await sb.run_code("x = 42")
        r = await sb.run_code("import time\nwhile True:\n    time.sleep(0.05)", timeout=1)
        assert r.status == RunStatus.TIMEOUT and not r.kernel_restarted
        assert r.stderr.endswith("KeyboardInterrupt\n")
        assert (await sb.run_code("x")).value == CellValue("42", 42, True)
        r = await sb.run_code("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                              "while True:\n    time.sleep(0.05)", timeout=1)
        assert r.status == RunStatus.TIMEOUT and r.kernel_restarted
        r = await sb.run_code("'x' in globals()")
        assert r.value == CellValue("False", False, True)


async def test_cancel_from_the_sdk_interrupts_a_cell(client):
    async with await client.sandbox(stateful=True) as sb:
        await sb.run_code("y = 6")
        started = asyncio.Event()
        task = asyncio.create_task(sb.run_code("import time\nprint('go', flush=True)\ntime.sleep(60)",
                                               on_stdout=lambda _c: started.set()))
        await asyncio.wait_for(started.wait(), 20)
        await sb.cancel()
        r = await task
        assert r.status == RunStatus.CANCELLED and not r.kernel_restarted
        assert (await sb.run_code("y * 7")).value == CellValue("42", 42, True)


def test_a_figure_comes_back_as_png_bytes_through_the_sync_twin(server):
    with SyncClient.connect(server.url, server.token) as client:
        with client.sandbox(stateful=True) as sb:
            r = sb.run_code("import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [3, 5])")
            assert r.ok, r.stderr
            [item] = r.display
            assert item.mime == "image/png" and item.data.startswith(b"\x89PNG\r\n\x1a\n")
            assert r.value is not None  # the BarContainer repr, as a notebook shows it
