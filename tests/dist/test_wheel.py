"""The airlock wheel (distribution `airlock-ai`) as a new user gets it: installed into a fresh venv, with no Rust toolchain
and nothing of the repository on the path, it gives a working `airlock` command, the library
`airlock serve --zygote` loads beside it, and the SDK, whose default binary is the one the wheel
installed. As root and as the unprivileged user."""
import base64
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import zipfile

import pytest

from conftest import ZYGOTE_LIBRARY, ZYGOTE_SYMBOLS, as_user, identities, zygote_abi

MAX_BINARY_BYTES = 20 * 1024 * 1024
MAX_LIBRARY_BYTES = 2 * 1024 * 1024
LIBRARY = ZYGOTE_LIBRARY
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


# `airlock serve --stdio --zygote` from the venv (the SDK's default binary), and the zygote seen
# from outside: a process whose command line names the venv's library.
ZYGOTE_RUN = """
import json, os, sys
from airlock_client import SyncClient
library = os.path.join(os.path.dirname(sys.executable), "libairlock_zygote.so")
with SyncClient.stdio(args=["--zygote"]) as client:
    r = client.execute("print(6 * 7)")
    zygotes = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            zygotes += library.encode() in open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        except OSError:
            pass
print(json.dumps({"status": r.status.value, "stdout": r.stdout, "zygotes": zygotes}))
"""



def clean_env() -> dict:
    """No venv on PATH, no AIRLOCK_BIN, nothing of the repository importable."""
    drop = ("AIRLOCK_BIN", "PYTHONPATH", "VIRTUAL_ENV", "CARGO_TARGET_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = "/usr/bin:/bin"
    return env


def test_the_wheel_carries_a_small_stripped_binary_and_the_sdk(wheel: pathlib.Path) -> None:
    assert wheel.name.startswith("airlock_ai-0.") and "manylinux_2_" in wheel.name, wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        binary = next(n for n in names if n.endswith(".data/scripts/airlock"))
        info = zf.getinfo(binary)
        assert info.file_size <= MAX_BINARY_BYTES, info.file_size
        assert (info.external_attr >> 16) & 0o111, "the binary is not executable"
        assert "airlock_client/__init__.py" in names and "airlock_client/py.typed" in names
        assert any(n.startswith("airlock_client/adapters/") for n in names)
        assert "airlock_maf/__init__.py" in names and "airlock_maf/py.typed" in names
        assert "airlock_ray/__init__.py" in names and "airlock_ray/py.typed" in names
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    extras = [l.split(": ", 1)[1] for l in meta.splitlines() if l.startswith("Provides-Extra: ")]
    assert extras == ["langchain", "openai-agents", "smolagents", "maf", "ray"], meta
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
             "print(sorted(m.metadata('airlock-ai').get_all('Provides-Extra')))")
    r = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=clean_env(), cwd="/")
    assert r.returncode == 0, r.stderr
    assert "openai-agents" in r.stdout


def test_the_wheel_carries_the_zygote_library_beside_the_binary(wheel: pathlib.Path) -> None:
    """In the same scheme directory as the binary (pip and uv install that directory as one), a
    readable file, not a command, recorded in RECORD with its hash."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        binary = next(n for n in names if n.endswith(".data/scripts/airlock"))
        library = binary[: -len("airlock")] + LIBRARY
        info = zf.getinfo(library)
        assert info.file_size <= MAX_LIBRARY_BYTES, info.file_size
        assert (info.external_attr >> 16) & 0o777 == 0o644, oct(info.external_attr >> 16)
        data = zf.read(library)
        record = zf.read(next(n for n in names if n.endswith(".dist-info/RECORD"))).decode()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert f"{library},sha256={digest},{len(data)}" in record.splitlines(), record
    assert data[:4] == b"\x7fELF"


def test_the_library_exports_the_zygote_symbols_and_its_debug_matches(wheel: pathlib.Path,
                                                                      shared_dir: pathlib.Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        data = zf.read(next(n for n in zf.namelist() if n.endswith(f".data/scripts/{LIBRARY}")))
    shipped = shared_dir / f"shipped-{LIBRARY}"
    shipped.write_bytes(data)
    dynamic = subprocess.run(["nm", "-D", "--defined-only", str(shipped)], capture_output=True, text=True,
                             check=True).stdout
    exported = {l.split()[-1] for l in dynamic.splitlines() if " T " in l}
    assert set(ZYGOTE_SYMBOLS) <= exported, dynamic
    # Stripped like the binary: no symbol table, no DWARF; those are in the .debug beside the wheel.
    sections = subprocess.run(["readelf", "-S", "-W", str(shipped)], capture_output=True, text=True,
                              check=True).stdout
    assert ".symtab" not in sections and ".debug_info" not in sections, sections
    assert ".gnu_debuglink" in sections
    debug = wheel.parent / f"{LIBRARY}.debug"
    notes = [subprocess.run(["readelf", "-n", str(p)], capture_output=True, text=True, check=True).stdout
             for p in (shipped, debug)]
    ids = [next(l for l in n.splitlines() if "Build ID" in l) for n in notes]
    assert ids[0] == ids[1], ids


def test_pip_installs_the_library_beside_the_command(venv: pathlib.Path) -> None:
    """Where `airlock serve --zygote` looks (beside its own executable), readable by everyone and
    not executable, listed in the installed RECORD (so `pip uninstall` removes it), and built for
    this tree's zygote protocol."""
    library = venv / "bin" / LIBRARY
    assert library.is_file() and (venv / "bin" / "airlock").is_file()
    mode = library.stat().st_mode & 0o777
    assert mode & 0o444 == 0o444 and mode & 0o111 == 0, oct(mode)
    probe = ("import importlib.metadata as m, pathlib, sys; "
             "print(any((pathlib.Path(f.locate()).resolve() == pathlib.Path(sys.argv[1]).resolve()) "
             "for f in m.files('airlock-ai')))")
    python = str(venv / "bin" / "python")
    r = subprocess.run([python, "-c", probe, str(library)], capture_output=True, text=True, env=clean_env(), cwd="/")
    assert r.stdout.strip() == "True", r
    abi = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); lib.airlock_zygote_abi.restype = ctypes.c_long; "
           "print(lib.airlock_zygote_abi())")
    for who in identities():
        r = subprocess.run(as_user(who, [SYSTEM_PYTHON, "-c", abi, str(library)]), capture_output=True, text=True,
                           env=clean_env(), cwd="/")
        assert r.returncode == 0 and r.stdout.strip() == str(zygote_abi()), f"{who}: {r}"


def test_serve_zygote_from_the_installed_wheel_runs_a_program(venv: pathlib.Path) -> None:
    """`airlock serve --stdio --zygote` as the SDK starts it from the venv: the zygote starts on
    the installed library (the broker hands it its ABI number; a mismatch exits before it is
    ready) and a Python `execute` returns its output."""
    python = str(venv / "bin" / "python")
    library = str(venv / "bin" / LIBRARY)
    for who in identities():
        r = subprocess.run(as_user(who, [python, "-c", ZYGOTE_RUN]), capture_output=True, text=True,
                           env=clean_env(), cwd="/", timeout=120)
        assert r.returncode == 0, f"{who}: {r.stdout}{r.stderr}"
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["status"] == "completed" and out["stdout"].split()[0] == "42", f"{who}: {out}"
        assert out["zygotes"] == 1, f"{who}: no zygote on {library}: {out}"


def test_serve_zygote_without_the_library_says_how_to_fix_it(venv: pathlib.Path, shared_dir: pathlib.Path) -> None:
    """The binary alone (the library not beside it) refuses to start, naming what is missing."""
    alone = shared_dir / "alone"
    alone.mkdir(mode=0o755)
    shutil.copy2(venv / "bin" / "airlock", alone / "airlock")
    for who in identities():
        r = subprocess.run(as_user(who, [str(alone / "airlock"), "serve", "--stdio", "--zygote"]),
                           capture_output=True, text=True, env=clean_env(), cwd="/", stdin=subprocess.DEVNULL,
                           timeout=60)
        assert r.returncode != 0, f"{who}: {r}"
        assert f"{LIBRARY} not found beside {alone / 'airlock'}" in r.stderr, f"{who}: {r.stderr}"
