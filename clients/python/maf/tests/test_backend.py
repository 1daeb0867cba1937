"""The backend beyond maf-sandbox's suites: driving a running server, queueing concurrent runs
on one sandbox, run_code, the typed surface, and the runnable example."""
from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from maf_sandbox import Capability, ExecResult, SandboxKey, SandboxRouter, SandboxSpec, TransferLimits

from airlock_maf import AirlockSandboxBackend

from .conftest import airlock_binary

ROOT = Path(__file__).resolve().parents[4]
LIMITS = TransferLimits(8 * 1024 * 1024, 32 * 1024 * 1024, 32)
SPEC = SandboxSpec(kind="k", work_dir=None, files_in=LIMITS, files_out=LIMITS,
                   requires=frozenset({Capability.EXEC, Capability.RUN_CODE, Capability.FILES_IN}))


async def test_connect_drives_a_running_server(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(secrets.token_hex(16))
    server = subprocess.Popen([airlock_binary(), "serve", "--listen", "127.0.0.1:0", "--token-file", str(token),
                               "--state-dir", str(tmp_path / "state")],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split()[-1]
        backend = await asyncio.to_thread(AirlockSandboxBackend.connect, url, token.read_text())
        try:
            router = SandboxRouter([backend], min_isolation=backend.isolation)
            sandbox = await router.acquire(SandboxKey("remote", "t", "a"), SPEC)
            # Not this backend's own broker: it cannot prove a sandbox new, so it never says so.
            assert getattr(sandbox, "freshly_created", None) is False
            result = await sandbox.exec(["echo", "over the websocket"], working_directory=".", timeout=30)
            assert result.stdout == "over the websocket\n"
            # A shared server: nothing proves a sandbox new, so no baseline could be taken before
            # input, and SNAPSHOT (so RESET) is not declared even though this server snapshots.
            assert Capability.SNAPSHOT not in backend.declarations.capabilities
            with pytest.raises(NotImplementedError):
                await sandbox.reset(timeout=30)
            assert (await router.dispose_scope("remote", "t")).undisposed is None
        finally:
            await asyncio.to_thread(backend.close)
    finally:
        server.terminate()
        server.wait(timeout=30)


async def test_concurrent_runs_on_one_sandbox_queue_instead_of_busy(backend: AirlockSandboxBackend,
                                                                   unique: str) -> None:
    router = SandboxRouter([backend], min_isolation=backend.isolation)
    sandbox = await router.acquire(SandboxKey("queue", unique, "a"), SPEC)
    try:
        started = time.monotonic()
        results = await asyncio.gather(*(sandbox.exec(["sh", "-c", f"sleep 0.3; echo {i}"], working_directory=".",
                                                      timeout=30) for i in range(3)))
        assert [r.stdout for r in results] == ["0\n", "1\n", "2\n"]
        assert time.monotonic() - started >= 0.9, "airlock runs one at a time per sandbox"
        code: ExecResult = await sandbox.run_code("import sys; print('out'); print('err', file=sys.stderr)",
                                                  timeout=30)
        assert (code.exit_code, code.stdout, code.stderr) == (0, "out\n", "err\n")
    finally:
        assert (await router.dispose_scope("queue", unique)).undisposed is None


def test_mypy_strict_is_clean(tmp_path: Path) -> None:
    src = ROOT / "clients" / "python" / "maf"
    env = {**os.environ, "MYPYPATH": str(ROOT / "clients" / "python" / "src")}
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
                           str(src / "airlock_maf")], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_example_agent_runs() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "maf_agent.py")], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "AIRLOCK_BIN": airlock_binary()})
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "The sandbox says: Paris: sunny" in done.stdout


async def test_a_spec_image_runs_on_that_image(tmp_path: Path, unique: str) -> None:
    fixtures = sorted(Path("/var/cache/airlock-test/images").glob("*/oci.tar"))
    if not fixtures:
        import pytest
        pytest.skip("no image fixture (scripts/image-fixture.sh builds it; scripts/test.sh runs that)")
    store = tmp_path / "store"
    subprocess.run([airlock_binary(), "image", "--image-dir", str(store), "import", str(fixtures[-1]),
                    "--name", "pandas"], check=True, capture_output=True)
    backend = await asyncio.to_thread(AirlockSandboxBackend, binary=airlock_binary(),
                                      args=["--image-dir", str(store)])
    try:
        router = SandboxRouter([backend], min_isolation=backend.isolation)
        spec = SandboxSpec(kind="pandas", image="pandas", work_dir=None, files_in=LIMITS, files_out=LIMITS,
                           requires=frozenset({Capability.EXEC, Capability.RUN_CODE}))
        sandbox = await router.acquire(SandboxKey("images", unique, "a"), spec)
        code = await sandbox.run_code("import pandas as pd; print(pd.Series([1, 2, 3]).sum())", timeout=60)
        assert code.stdout == "6\n", code
        assert (await router.dispose_scope("images", unique)).undisposed is None
    finally:
        await asyncio.to_thread(backend.close)
