"""What the distribution tests share: the artifacts under test, built by the repository's own
scripts (the release build and the image are cached between runs: scripts/build-release.sh,
scripts/build-image.sh), and running things as the unprivileged user too."""
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
from typing import Iterator, List

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
TEST_USER = "airlock-test"
# The library `airlock serve --zygote` loads from beside the binary, and what it must export.
ZYGOTE_LIBRARY = "libairlock_zygote.so"
ZYGOTE_SYMBOLS = ("airlock_zygote_abi", "airlock_zygote_wait", "airlock_zygote_fork")


def is_root() -> bool:
    return os.geteuid() == 0


def identities() -> List[str]:
    """Whom a run must work for: the invoking user, and as root also the unprivileged one."""
    return ["me", TEST_USER] if is_root() else ["me"]


def as_user(who: str, argv: List[str]) -> List[str]:
    if who == "me":
        return argv
    return [shutil.which("runuser") or "/usr/sbin/runuser", "-u", who, "--", "env", "-i", "PATH=/usr/bin:/bin",
            f"HOME=/home/{who}", *argv]


def zygote_abi() -> int:
    """This tree's zygote protocol number: the broker passes it, and a library whose
    airlock_zygote_abi() differs is refused at start."""
    src = (REPO / "crates" / "airlock-executor" / "src" / "zygote.rs").read_text()
    match = re.search(r"pub const ABI: i64 = (\d+);", src)
    assert match, "no ABI constant in airlock-executor's zygote.rs"
    return int(match.group(1))


def script(name: str, *args: str) -> str:
    """Runs scripts/NAME; its last line of stdout (what each build script prints)."""
    r = subprocess.run(["bash", str(REPO / "scripts" / name), *args], capture_output=True, text=True)
    assert r.returncode == 0, f"scripts/{name} failed:\n{r.stderr[-4000:]}"
    return r.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def shared_dir() -> Iterator[pathlib.Path]:
    """A directory every identity can read (the unprivileged user cannot enter pytest's)."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="airlock-dist-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def wheel(shared_dir: pathlib.Path) -> pathlib.Path:
    return pathlib.Path(script("build-wheel.sh", str(shared_dir / "wheels")))
