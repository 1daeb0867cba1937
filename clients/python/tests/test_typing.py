"""Types: `mypy --strict` is clean on the package and on a small user program; a misspelt
keyword is a mypy error and a TypeError at call time; the user program runs."""
import asyncio
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

from airlock_client import AsyncClient, SyncClient
import typed_user_program

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE.parent / "src"
EXAMPLES = HERE.parents[2] / "examples"


def mypy(tmp_path, *targets):
    if importlib.util.find_spec("mypy") is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "mypy"],
                       check=True)
    env = {**os.environ, "MYPYPATH": str(SRC)}
    # The package's own configuration (its overrides for untyped frameworks) from pyproject.toml.
    config = SRC.parent / "pyproject.toml"
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--config-file", str(config),
                           "--cache-dir", str(tmp_path / "cache"), *map(str, targets)], capture_output=True, text=True, env=env, cwd=tmp_path)


def test_mypy_strict_is_clean_on_the_package_and_a_user_program(tmp_path):
    """The package includes the adapters (so both frameworks must be installed); the adapter
    examples are user programs too."""
    assert (SRC / "airlock_client" / "py.typed").exists()
    examples = [EXAMPLES / "langchain_agent.py", EXAMPLES / "openai_agents_sandbox.py", EXAMPLES / "ray_code_reward.py"]
    r = mypy(tmp_path, SRC / "airlock_client", SRC / "airlock_ray", HERE / "typed_user_program.py", *examples)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_misspelt_keyword_is_a_mypy_error(tmp_path):
    prog = tmp_path / "typo.py"
    prog.write_text("from airlock_client import Sandbox, SyncClient\n"
                    "async def f(sb: Sandbox) -> None:\n    await sb.run_code('1', timout=5)\n"
                    "def g(c: SyncClient) -> None:\n    c.execute('1', timout=5)\n")
    r = mypy(tmp_path, prog)
    assert r.returncode == 1
    assert r.stdout.count('Unexpected keyword argument "timout"') == 2, r.stdout


def test_a_misspelt_keyword_is_a_type_error_at_call_time(server):
    async def main():
        async with await AsyncClient.connect(server.url, server.token) as c:
            with pytest.raises(TypeError):
                await c.execute("1", timout=5)
            with pytest.raises(TypeError):
                await c.sandbox(idle_timout=5)
            async with await c.sandbox() as sb:
                with pytest.raises(TypeError):
                    await sb.run_code("1", timout=5)
                with pytest.raises(TypeError):
                    await sb.exec("/bin/true")  # a str is not an argv
                with pytest.raises(TypeError):
                    await sb.files.write("a", b"", offset=3)
    asyncio.run(main())
    with SyncClient.connect(server.url, server.token) as c:
        with pytest.raises(TypeError):
            c.execute("1", timout=5)


def test_the_typed_user_program_runs(server):
    lines = asyncio.run(typed_user_program.demo(server.url, server.token))
    assert lines == ["ok\n", "answer.txt", "in.txt", "42", "SandboxKeySpecMismatch"]
    assert typed_user_program.demo_sync(server.url, server.token) == "hi 2 typed 120"
