"""Starts a real `airlock serve` for the suite. Nothing is built here: the binary comes from
AIRLOCK_BIN, or the workspace's target/debug/airlock."""
import os
import pathlib
import secrets
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
SRC = pathlib.Path(__file__).resolve().parents[1] / "src"
# The package next to these tests, whatever copy is installed.
sys.path.insert(0, str(SRC))


def airlock_bin() -> str:
    path = os.environ.get("AIRLOCK_BIN") or str(REPO / "target" / "debug" / "airlock")
    if not os.access(path, os.X_OK):
        pytest.exit(f"no airlock binary at {path}; build it or set AIRLOCK_BIN", returncode=2)
    return path


class Server:
    def __init__(self, tmp: pathlib.Path, extra=()):
        self.token = secrets.token_urlsafe(24)
        (tmp / "token").write_text(self.token)
        self.audit = tmp / "audit.jsonl"
        self.proc = subprocess.Popen(
            [airlock_bin(), "serve", "--listen", "127.0.0.1:0", "--token-file", str(tmp / "token"),
             "--audit", str(self.audit), *extra],
            stdout=subprocess.PIPE, stderr=open(tmp / "stderr", "wb"), env={**os.environ, "RUST_LOG": "warn"})
        line = self.proc.stdout.readline().decode().strip()
        assert line.startswith("listening on ws://"), line
        self.url = line.removeprefix("listening on ") + "/"

    def stop(self):
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("airlock"), extra=["--ceiling-timeout", "60"])
    yield s
    assert s.stop() == 0


@pytest.fixture
def bin_path():
    return airlock_bin()
