"""Starts a real `airlock serve` for the suite. Nothing is built here: the binary comes from
AIRLOCK_BIN, or the workspace's target/debug/airlock."""
import os
import pathlib
import secrets
import signal
import subprocess
import sys

import pytest

# A suite started from a background job (`bash scripts/test.sh &`, a CI runner's shell without
# job control) inherits SIGINT ignored, and an ignored signal stays ignored across exec: Python
# then never raises KeyboardInterrupt, here or in a driver it spawns, and the tests that
# interrupt a call would fail for the shell's sake. Ctrl-C gets Python's own handler back
# (a caught signal is at its default again in an exec'd child).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

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
    """`airlock serve --listen` on a free port. Its snapshots and paused sandboxes go to
    `state_dir` (a directory of the test's own, never the machine's default); `restart()` stops
    it and starts it again on the same state directory (at a new URL). `launcher`: what is run
    instead of the binary (a script that runs it as another user, say)."""

    def __init__(self, tmp: pathlib.Path, extra=(), state_dir=None, launcher=None):
        self.tmp, self.extra = tmp, list(extra)
        self.launcher = launcher
        self.state_dir = pathlib.Path(state_dir) if state_dir is not None else tmp / "state"
        self.token = secrets.token_urlsafe(24)
        (tmp / "token").write_text(self.token)
        self.audit = tmp / "audit.jsonl"
        self.start()

    def start(self):
        self.proc = subprocess.Popen(
            [self.launcher or airlock_bin(), "serve", "--listen", "127.0.0.1:0", "--token-file", str(self.tmp / "token"),
             "--audit", str(self.audit), "--state-dir", str(self.state_dir), *self.extra],
            stdout=subprocess.PIPE, stderr=open(self.tmp / "stderr", "ab"), env={**os.environ, "RUST_LOG": "warn"})
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

    def restart(self):
        assert self.stop() == 0
        self.start()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("airlock"), extra=["--ceiling-timeout", "60"])
    yield s
    assert s.stop() == 0


@pytest.fixture
def state_server(tmp_path):
    """A server of the test's own, with a state directory under `tmp_path`, that the test may
    `restart()`."""
    s = Server(tmp_path, extra=["--ceiling-timeout", "60"], state_dir=tmp_path / "state")
    yield s
    assert s.stop() == 0


@pytest.fixture
def bin_path():
    return airlock_bin()
