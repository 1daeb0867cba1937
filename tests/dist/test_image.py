"""The server image (deploy/Containerfile, built by scripts/build-image.sh), run the way
deploy/kubernetes runs it: its own unprivileged user, a user-namespaced container, no
capabilities, no privilege escalation, a read-only root, and only the two settings airlock needs
(an unmasked /proc, the seccomp profile with sethostname). Inside it: `airlock doctor`, a
program using numpy, pandas and matplotlib, `airlock serve` driven by the SDK (and `airlock serve
--stdio --zygote`, on the library the image carries beside the binary), and containment checks
asserted from outside the sandbox. Each of the two settings is shown to be needed.
Needs root, podman, runc and mmdebstrap (scripts/test.sh installs them)."""
import hashlib
import json
import os
import pathlib
import secrets
import socket
import subprocess
import sys
import threading
import time
from typing import List, Optional

import pytest

from conftest import REPO, ZYGOTE_LIBRARY, ZYGOTE_SYMBOLS, is_root, script, zygote_abi

sys.path.insert(0, str(REPO / "clients" / "python" / "src"))
from airlock_client import SyncClient  # noqa: E402

SECCOMP = REPO / "deploy" / "seccomp" / "airlock.json"
PODMAN = ["podman", "--runtime", "runc"]
# Like the pod: a user namespace of its own (hostUsers: false), nothing added but the two.
HARDENING = ["--uidmap", "0:100000:65536", "--gidmap", "0:100000:65536", "--cap-drop", "ALL",
             "--security-opt", "no-new-privileges", "--read-only", "--read-only-tmpfs=false",
             # Below the caller's own limits (podman's defaults raise them, which a root without
             # CAP_SYS_RESOURCE may not do).
             "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]
UNMASK = ["--security-opt", "unmask=/proc/*"]
PROFILE = ["--security-opt", f"seccomp={SECCOMP}"]
MINIMAL = UNMASK + PROFILE

DATA_PROGRAM = """
import numpy as np, pandas as pd, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
df = pd.DataFrame({"x": np.arange(10), "y": np.arange(10) ** 2})
plt.plot(df.x, df.y); plt.savefig("plot.png")
print(int(df.y.sum()), open("plot.png", "rb").read(4) == b"\\x89PNG")
"""


BINARY = "/usr/local/bin/airlock"
LIBRARY = f"/usr/local/bin/{ZYGOTE_LIBRARY}"

# In the image (as its user): the two files, and the library's exports as the zygote loads them.
SHIPPED = f"""
import ctypes, hashlib, json, os
out = {{}}
for p in ({BINARY!r}, {LIBRARY!r}):
    st = os.stat(p)
    out[p] = {{"mode": st.st_mode & 0o7777, "uid": st.st_uid, "sha256": hashlib.sha256(open(p, "rb").read()).hexdigest()}}
lib = ctypes.CDLL({LIBRARY!r}, os.RTLD_NOW)
out["exported"] = [s for s in {ZYGOTE_SYMBOLS!r} if hasattr(lib, s)]
lib.airlock_zygote_abi.restype = ctypes.c_long
out["abi"] = lib.airlock_zygote_abi()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def image() -> str:
    if not is_root():
        pytest.fail("the image test runs rootful podman and must run as root (scripts/test.sh does)")
    return script("build-image.sh")


def podman_run(image: str, settings: List[str], argv: List[str], *, extra: Optional[List[str]] = None,
               stdin: Optional[str] = None) -> subprocess.CompletedProcess:
    cmd = [*PODMAN, "run", "--rm", "-i", "--network", "none", *HARDENING, *settings, *(extra or []),
           "--entrypoint", argv[0], image, *argv[1:]]
    r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=180)
    assert "OCI runtime" not in r.stderr, r.stderr
    return r


def run_json(image: str, settings: List[str], program: str) -> dict:
    r = podman_run(image, settings, ["airlock", "run", "--json", "-"], stdin=program)
    return json.loads(r.stdout)


def test_the_image_runs_as_an_unprivileged_user(image: str) -> None:
    inspect = subprocess.run([*PODMAN, "image", "inspect", image], capture_output=True, text=True, check=True)
    config = json.loads(inspect.stdout)[0]["Config"]
    assert config["User"] == "10001:10001", config
    assert config["Entrypoint"] == ["/usr/local/bin/airlock"] and config["Cmd"][0] == "serve", config
    r = podman_run(image, MINIMAL, ["id", "-u"])
    assert r.stdout.strip() == "10001", r


def test_doctor_passes_with_the_minimal_settings(image: str) -> None:
    r = podman_run(image, MINIMAL, ["airlock", "doctor", "--json"])
    assert r.returncode == 0, r.stdout + r.stderr
    layers = json.loads(r.stdout)
    missing = [l["layer"] for l in layers if l["required"] and not l["available"]]
    assert missing == [], layers


def test_a_data_program_runs_in_the_sandbox(image: str) -> None:
    run = run_json(image, MINIMAL, DATA_PROGRAM)
    assert run["status"] == "completed", run
    assert run["stdout"] == "285 True\n", run
    assert "sandbox_root" in run["enforcement"], run


@pytest.mark.parametrize("settings,names", [(PROFILE, "unmask"), (UNMASK, "sethostname")],
                         ids=["without-unmask", "without-the-seccomp-profile"])
def test_each_setting_is_needed(image: str, settings: List[str], names: str) -> None:
    """With only the other one, doctor fails and a run is refused, saying what is missing."""
    doctor = podman_run(image, settings, ["airlock", "doctor"])
    assert doctor.returncode == 1, doctor.stdout
    run = run_json(image, settings, "print('the program ran')")
    assert run["status"] == "refused" and run["stdout"] == "", run
    assert names in run["error"]["message"], run


class Listener:
    """A TCP listener on the host's loopback that records every connection it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.close()
            except OSError:
                continue

    def close(self) -> None:
        self.stop = True
        self.thread.join()
        self.sock.close()


@pytest.fixture(scope="module")
def served(image: str, shared_dir: pathlib.Path):
    """`airlock serve` in the image on the host's network (so the sandbox has the host's
    loopback to try), with a token from a mounted file; yields (client, container name)."""
    token = secrets.token_urlsafe(24)
    secret_dir = shared_dir / "secret"
    secret_dir.mkdir(mode=0o755)
    (secret_dir / "token").write_text(token)
    (secret_dir / "token").chmod(0o644)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    name = f"airlock-image-test-{os.getpid()}"
    cmd = [*PODMAN, "run", "-d", "--rm", "--name", name, "--network", "host", *HARDENING, *MINIMAL,
           "-v", f"{secret_dir}:/run/secrets/airlock:ro", "-e", "AIRLOCK_NODE_NAME=airlock-0", image,
           "serve", "--listen", f"127.0.0.1:{port}", "--token-file", "/run/secrets/airlock/token"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    try:
        client = None
        for _ in range(100):
            try:
                client = SyncClient.connect(f"ws://127.0.0.1:{port}/", token)
                break
            except Exception:
                time.sleep(0.1)
        assert client is not None, subprocess.run([*PODMAN, "logs", name], capture_output=True, text=True).stderr
        yield client, name, port
        client.close()
    finally:
        subprocess.run([*PODMAN, "rm", "--force", "--time", "5", name], capture_output=True)


def in_container(name: str, code: str) -> str:
    """Runs python3 in the server's container, outside any sandbox (as its root)."""
    r = subprocess.run([*PODMAN, "exec", "--user", "0", name, "python3", "-c", code],
                       capture_output=True, text=True, check=True)
    return r.stdout.strip()


def test_serve_runs_sandboxes_for_the_sdk(served) -> None:
    client, _, _ = served
    with client.sandbox() as sb:
        assert sb.sandbox_id.startswith("sb-airlock-0."), sb.sandbox_id
        r = sb.run_code(DATA_PROGRAM)
        assert r.status.value == "completed", r
        assert r.stdout == "285 True\n"
        assert sb.files.read("plot.png")[:4] == b"\x89PNG"


def test_a_sandbox_reaches_no_network(served) -> None:
    """The container shares the host's network: the host's loopback (a listener, and the server
    itself) is right there, and the sandbox reaches neither."""
    client, _, port = served
    listener = Listener()
    try:
        prog = (f"import socket\nfor p in ({listener.port}, {port}):\n"
                "    try:\n        socket.create_connection(('127.0.0.1', p), timeout=2); print('reached', p)\n"
                "    except OSError as e:\n        print(type(e).__name__)\n")
        r = client.execute(prog)
        time.sleep(0.5)
    finally:
        listener.close()
    assert r.status.value == "completed", r
    assert "reached" not in r.stdout, r.stdout
    assert listener.accepted == 0


SNAPSHOT = """
import hashlib, json, os
out = {}
for p in ("/usr/local/bin/airlock", "/usr/local/bin/libairlock_zygote.so", "/etc/passwd", "/home/airlock"):
    st = os.lstat(p)
    data = b"" if os.path.isdir(p) else open(p, "rb").read()
    out[p] = [oct(st.st_mode), st.st_uid, st.st_mtime_ns, st.st_ctime_ns, hashlib.sha256(data).hexdigest()]
out["home"] = sorted(os.listdir("/home/airlock"))
print(json.dumps(out, sort_keys=True))
"""

ATTACK = """
import errno, os
res = {}
for p in ("/usr/local/bin/airlock", "/usr/local/bin/libairlock_zygote.so", "/etc/passwd",
          "/home/airlock/planted"):
    for what, f in (("write", lambda: open(p, "a").write("x")), ("chmod", lambda: os.chmod(p, 0o777)),
                    ("utime", lambda: os.utime(p, (0, 0))), ("unlink", lambda: os.unlink(p))):
        try:
            f(); res[p + " " + what] = "ok"
        except OSError as e:
            res[p + " " + what] = errno.errorcode.get(e.errno, str(e.errno))
print(res)
"""


def test_the_containers_files_are_untouched(served) -> None:
    client, name, _ = served
    before = in_container(name, SNAPSHOT)
    r = client.execute(ATTACK)
    after = in_container(name, SNAPSHOT)
    assert r.status.value == "completed", r
    assert "'ok'" not in r.stdout, r.stdout
    assert before == after


def test_no_process_survives_its_run(served) -> None:
    client, name, _ = served
    seconds = 3000 + secrets.randbelow(1000)
    marker = b"sleep\x00" + str(seconds).encode()
    with client.sandbox() as sb:
        r = sb.exec(["/bin/sh", "-c", f"sleep {seconds} & echo started"])
        assert r.status.value == "completed" and r.stdout == "started\n", r
    time.sleep(0.5)
    survivors = in_container(name, (
        "import os\nn = 0\nfor pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try:\n        n += " + repr(marker) + " in open(f'/proc/{pid}/cmdline', 'rb').read()\n"
        "    except OSError:\n        pass\nprint(n)"))
    assert survivors == "0"



def test_the_image_carries_the_zygote_library_beside_the_binary(image: str, shared_dir: pathlib.Path) -> None:
    """Both files are the release build's (scripts/build-release.sh, cached), root's, and the
    library is readable but no command, exporting what the zygote loads, at this tree's ABI."""
    release = pathlib.Path(script("build-release.sh", str(shared_dir / "release")))
    r = podman_run(image, MINIMAL, ["python3", "-c", SHIPPED])
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    for path, mode in ((BINARY, 0o755), (LIBRARY, 0o644)):
        built = hashlib.sha256((release / pathlib.Path(path).name).read_bytes()).hexdigest()
        assert out[path] == {"mode": mode, "uid": 0, "sha256": built}, (path, out[path])
    assert out["exported"] == list(ZYGOTE_SYMBOLS), out
    assert out["abi"] == zygote_abi(), out


def test_serve_zygote_over_stdio_runs_a_program(image: str, shared_dir: pathlib.Path) -> None:
    """`airlock serve --stdio --zygote` in the image, run like the others (its own user, a user
    namespace, no capabilities, the two settings), driven by the SDK over the container's stdio:
    the zygote starts on the image's library and a Python `execute` returns its output."""
    name = f"airlock-zygote-test-{os.getpid()}"
    wrapper = shared_dir / "airlock-in-image"
    argv = [*PODMAN, "run", "--rm", "-i", "--name", name, "--network", "none", *HARDENING, *MINIMAL,
            "--entrypoint", BINARY, image]
    wrapper.write_text("#!/bin/sh\nexec " + " ".join(f"'{a}'" for a in argv) + ' "$@"\n')
    wrapper.chmod(0o755)
    try:
        with SyncClient.stdio(str(wrapper), args=["--zygote"]) as client:
            r = client.execute("import sys\nprint(6 * 7, sys.version_info[0])")
            zygotes = in_container(name, (
                "import os\nn = 0\nfor pid in filter(str.isdigit, os.listdir('/proc')):\n"
                "    try:\n        n += " + repr(LIBRARY.encode()) +
                " in open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\\0')\n"
                "    except OSError:\n        pass\nprint(n)"))
        assert r.status.value == "completed", r
        assert r.stdout == "42 3\n", r
        assert zygotes == "1", f"no zygote on {LIBRARY} in the container"
    finally:
        subprocess.run([*PODMAN, "rm", "--force", "--time", "5", name], capture_output=True)
