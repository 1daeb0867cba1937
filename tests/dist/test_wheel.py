"""The `airlock` wheel as a new user gets it: installed into a fresh venv, with no Rust toolchain
and nothing of the repository on the path, it gives a working `airlock` command and the SDK,
whose default binary is the one the wheel installed. As root and as the unprivileged user."""
import json
import os
import pathlib
import subprocess
import zipfile

import pytest

from conftest import REPO, as_user, identities

MAX_BINARY_BYTES = 20 * 1024 * 1024
SYSTEM_PYTHON = "/usr/bin/python3"

SDK_RUN = """
import json
from airlock_client import SyncClient, find_airlock_bin
with SyncClient.stdio() as client:
    r = client.execute("import socket, sys\\n"
                       "try:\\n    socket.create_connection(('1.1.1.1', 53), timeout=2); net = 'reached'\\n"
                       "except OSError as e:\\n    net = type(e).__name__\\n"
                       "print(6 * 7, net, sys.version_info[0])")
print(json.dumps({"bin": find_airlock_bin(), "status": r.status.value, "stdout": r.stdout}))
"""


@pytest.fixture(scope="module")
def venv(wheel: pathlib.Path, shared_dir: pathlib.Path) -> pathlib.Path:
    """A fresh venv (no system site packages) with the wheel installed."""
    env_dir = shared_dir / "venv"
    # The system's interpreter: the unprivileged user can reach it (not a pyenv under /root).
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(env_dir)], check=True)
    pip = [str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, str(wheel)], check=True, cwd="/")
    return env_dir


def clean_env() -> dict:
    """No venv on PATH, no AIRLOCK_BIN, nothing of the repository importable."""
    drop = ("AIRLOCK_BIN", "PYTHONPATH", "VIRTUAL_ENV", "CARGO_TARGET_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = "/usr/bin:/bin"
    return env


def test_the_wheel_carries_a_small_stripped_binary_and_the_sdk(wheel: pathlib.Path) -> None:
    assert wheel.name.startswith("airlock-0.") and "manylinux_2_" in wheel.name, wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        binary = next(n for n in names if n.endswith(".data/scripts/airlock"))
        info = zf.getinfo(binary)
        assert info.file_size <= MAX_BINARY_BYTES, info.file_size
        assert (info.external_attr >> 16) & 0o111, "the binary is not executable"
        assert "airlock_client/__init__.py" in names and "airlock_client/py.typed" in names
        assert any(n.startswith("airlock_client/adapters/") for n in names)
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    extras = [l.split(": ", 1)[1] for l in meta.splitlines() if l.startswith("Provides-Extra: ")]
    assert extras == ["langchain", "openai-agents", "smolagents"], meta
    assert "Requires-Dist: websockets" in meta


def test_the_symbols_are_beside_it_and_match_its_build_id(wheel: pathlib.Path, shared_dir: pathlib.Path) -> None:
    debug = wheel.parent / "airlock.debug"
    with zipfile.ZipFile(wheel) as zf:
        data = zf.read(next(n for n in zf.namelist() if n.endswith(".data/scripts/airlock")))
    shipped = shared_dir / "shipped-airlock"
    shipped.write_bytes(data)

    def build_id(path: pathlib.Path) -> str:
        out = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True, check=True).stdout
        return next(l.split(":", 1)[1].strip() for l in out.splitlines() if "Build ID" in l)

    def sections(path: pathlib.Path) -> str:
        return subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True, check=True).stdout

    assert build_id(shipped) == build_id(debug)
    assert ".debug_info" not in sections(shipped) and ".gnu_debuglink" in sections(shipped)
    assert ".debug_info" in sections(debug)


def test_pip_install_gives_the_command_and_the_sdk(venv: pathlib.Path) -> None:
    airlock = str(venv / "bin" / "airlock")
    version = subprocess.run([airlock, "--version"], capture_output=True, text=True, env=clean_env())
    assert version.returncode == 0 and version.stdout.strip() == "airlock 0.1.0", version
    for who in identities():
        doctor = subprocess.run(as_user(who, [airlock, "doctor"]), capture_output=True, text=True,
                                env=clean_env(), cwd="/")
        assert doctor.returncode == 0, f"{who}: {doctor.stdout}{doctor.stderr}"
        assert "every required layer is available" in doctor.stdout, doctor.stdout


def test_a_sandboxed_run_through_the_sdk_uses_the_installed_binary(venv: pathlib.Path) -> None:
    python = str(venv / "bin" / "python")
    for who in identities():
        r = subprocess.run(as_user(who, [python, "-c", SDK_RUN]), capture_output=True, text=True,
                           env=clean_env(), cwd="/", timeout=120)
        assert r.returncode == 0, f"{who}: {r.stdout}{r.stderr}"
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["bin"] == str(venv / "bin" / "airlock"), out
        assert out["status"] == "completed", out
        # The program ran, in a sandbox without a network.
        assert out["stdout"].split()[0] == "42" and out["stdout"].split()[1] != "reached", out


def test_the_adapters_are_extras(venv: pathlib.Path) -> None:
    python = str(venv / "bin" / "python")
    probe = ("import importlib.metadata as m, airlock_client.adapters as a; "
             "print(sorted(m.metadata('airlock').get_all('Provides-Extra')))")
    r = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=clean_env(), cwd="/")
    assert r.returncode == 0, r.stderr
    assert "openai-agents" in r.stdout
