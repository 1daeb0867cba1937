"""The whole coding-agent loop through the SDK, on a Debian image with git and python3 imported
into the server's store (scripts/image-fixture.sh): put a small repo in, `git init/commit`,
create a venv, install a package from a local wheel directory, run the repo's tests, start
`python3 -m http.server` in the background, fetch a page through `expose` from the host, drive
`bash` on a terminal (type a command, read the prompt, Ctrl-C a running program), kill the
server, dispose — and nothing of the sandbox is left on the host (no process in its machine's
pid namespace, the exposure gone). As root and, rootless, as the unprivileged `airlock-test`."""
import base64
import hashlib
import io
import os
import pathlib
import pwd
import secrets
import subprocess
import time
import urllib.error
import urllib.request
import zipfile

import pytest

from airlock_client import DEFAULT_REQUIRES, AsyncClient, Capability
from test_images import USER, Identity, fixture_dir

REPO_FILES = {
    "repo/calc_user.py": "from tinycalc import add\n\n\ndef double(x):\n    return add(x, x)\n",
    "repo/test_calc.py": ("import unittest\n\nfrom calc_user import double\n\n\n"
                          "class T(unittest.TestCase):\n    def test_double(self):\n"
                          "        self.assertEqual(double(21), 42)\n"),
    "repo/index.html": "<h1>agent loop</h1>\n",
}
GIT_ENV = {"HOME": "/work", "PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "agent",
           "GIT_AUTHOR_EMAIL": "agent@example.invalid", "GIT_COMMITTER_NAME": "agent",
           "GIT_COMMITTER_EMAIL": "agent@example.invalid"}


def wheel() -> bytes:
    """A pure-Python wheel of `tinycalc` (a zip with its dist-info and RECORD)."""
    files = {
        "tinycalc/__init__.py": b"def add(a, b):\n    return a + b\n",
        "tinycalc-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinycalc\nVersion: 1.0\n",
        "tinycalc-1.0.dist-info/WHEEL": (b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                         b"Tag: py3-none-any\n"),
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("tinycalc-1.0.dist-info/RECORD,,")
    files["tinycalc-1.0.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return out.getvalue()


class ListeningServer:
    """`airlock serve --listen` run by `ident` (root or the test user) over its image store."""

    def __init__(self, ident: Identity):
        self.token = secrets.token_urlsafe(24)
        token_file = ident.dir / "token"
        token_file.write_text(self.token)
        os.chmod(token_file, 0o644)
        self.stderr = open(ident.dir / "stderr", "wb")
        self.proc = subprocess.Popen(
            [ident.launcher, "serve", "--listen", "127.0.0.1:0", "--token-file", str(token_file),
             "--image-dir", str(ident.store)],
            stdout=subprocess.PIPE, stderr=self.stderr)
        line = self.proc.stdout.readline().decode().strip()
        assert line.startswith("listening on ws://"), line
        self.url = line.removeprefix("listening on ") + "/"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.stderr.close()


@pytest.fixture(scope="module", params=["root", USER])
def identity(request):
    fixture = fixture_dir()
    if request.param != "root":
        try:
            pwd.getpwnam(request.param)
        except KeyError:
            pytest.fail(f"create the user {USER} (scripts/test.sh does): the rootless path must be tested")
    ident = Identity(request.param)
    done = ident.run("image", "--image-dir", str(ident.store), "import", str(fixture / "root.tar"),
                     "--name", "debian")
    assert done.returncode == 0, done.stderr
    yield ident
    ident.close()


def host_pids_with(needle: str) -> list[int]:
    pids = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def in_pid_namespace(ns: str) -> list[int]:
    """Every host process whose pid namespace is `ns` (`pid:[inode]`)."""
    pids = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "ns" / "pid") == ns:
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return int(r.status), r.read()
    except urllib.error.HTTPError as e:
        return int(e.code), b""


async def test_the_coding_agent_loop_on_a_debian_image(identity):
    server = ListeningServer(identity)
    client = await AsyncClient.connect(server.url, server.token)
    try:
        sb = await client.sandbox(image="debian", requires=[*DEFAULT_REQUIRES, Capability.PROCESSES,
                                                          Capability.PORTS])
        for path, text in REPO_FILES.items():
            await sb.files.write(path, text)
        await sb.files.write("wheels/tinycalc-1.0-py3-none-any.whl", wheel())

        async def sh(cmd: str) -> str:
            r = await sb.exec(["/bin/sh", "-c", cmd], cwd="/work/repo", env=GIT_ENV, timeout=120)
            assert r.ok, (cmd, r)
            return r.stdout

        assert "init" in await sh("git init -q . && git add -A && git commit -qm init && git log --oneline")
        out = await sh("python3 -m venv /work/venv && "
                       "/work/venv/bin/pip install --no-index --find-links /work/wheels tinycalc 2>&1")
        assert "Successfully installed tinycalc-1.0" in out, out
        assert "OK" in await sh("/work/venv/bin/python -m unittest -v test_calc 2>&1")

        # A dev server in the background, reached from the host through the server's listener.
        port = 20000 + secrets.randbelow(20000)
        web = await sb.commands.run(f"exec python3 -u -m http.server {port} --bind 127.0.0.1",
                                    background=True, cwd="/work/repo")
        await web.expect("Serving HTTP", timeout=30, stream="stdout")
        url = await sb.expose(port)
        status, body = fetch(url + "index.html")
        assert (status, body) == (200, b"<h1>agent loop</h1>\n"), (status, body)
        host = host_pids_with(f"http.server {port}")
        assert len(host) == 1, host
        machine_ns = os.readlink(f"/proc/{host[0]}/ns/pid")

        # bash on a terminal: a command and its prompt, then Ctrl-C of a running program.
        term = await sb.pty.create(rows=24, cols=80)
        await term.expect("$ ", timeout=30)
        await term.send_input("echo sum=$((40 + 2))\n")
        await term.expect("sum=42", timeout=30)
        # The program says it holds the terminal in words its own command line does not carry
        # (the echo of the line must not count), so Ctrl-C reaches it, not the shell.
        await term.send_input("python3 -c 'import time; print(\"hold\" + \"ing\", flush=True); time.sleep(60)'\n")
        await term.expect("holding", timeout=30)
        await term.send_input("\x03")
        await term.send_input("echo rc=$?\n")
        await term.expect("rc=130", timeout=30)
        await term.send_input("exit\n")
        info = await term.wait(timeout=30)
        assert info.exit_code == 0, info

        # Kill the dev server, then dispose: nothing of the sandbox is left on the host.
        assert await web.kill()
        result = await web.wait(timeout=30)
        assert result.signal == 9, result
        assert in_pid_namespace(machine_ns), "the machine's init should still hold its namespace"
        disposal = await sb.dispose()
        assert disposal.ok, disposal
        assert in_pid_namespace(machine_ns) == [], in_pid_namespace(machine_ns)
        assert host_pids_with(f"http.server {port}") == []
        assert fetch(url + "index.html")[0] == 404
    finally:
        await client.close()
        server.stop()
