"""Every code block of README.md and docs/*.md, as a user would meet it (docs/README: blocks.py
says how a block is marked).

A file's blocks run in order, as one session: in a temporary directory that holds the
repository's top-level entries (so `examples/...` and `clients/python` resolve) and whatever the
blocks write; what a shell block exports reaches the later blocks; what it leaves running in the
background is killed when the file ends. On PATH: `airlock` is the debug binary; `pip install`
does not install (tests/dist/test_names.py resolves every documented install line offline
against the built wheel) and the SDK is importable instead; `cargo run -p airlock-cli -- ARGS`
runs `airlock ARGS` and `cargo build -p airlock-cli|airlock-zygote` is the debug build already
there (a release build takes minutes). toml and json blocks are parsed; text blocks are not
run. Skipped blocks and their reasons are printed."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import tomllib
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

from blocks import Block, blocks

REPO = pathlib.Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCK_TIMEOUT = 180

PIP = """#!/bin/sh
# doc-test's pip: `pip install` lines are resolved offline by tests/dist/test_names.py; here the
# SDK is importable already (PYTHONPATH), so nothing is installed.
if [ "$1" = install ]; then echo "doc-test: not installing: $*" >&2; exit 0; fi
exec python3 -m pip "$@"
"""

CARGO = """#!/bin/sh
# doc-test's cargo: the debug build of airlock-cli (and airlock-zygote's library beside it)
# stands in for a build; `cargo run -p airlock-cli -- ARGS` runs it with ARGS.
cmd="$1"; shift
pkgs=""
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case "$1" in
        -p) pkgs="$pkgs $2"; shift 2 ;;
        --release) shift ;;
        *) echo "doc-test: cargo $cmd: option $1 is not supported here" >&2; exit 2 ;;
    esac
done
for p in $pkgs; do
    case "$p" in airlock-cli|airlock-zygote) ;; *) echo "doc-test: cargo -p $p is not built here" >&2; exit 2 ;; esac
done
case "$cmd" in
    build) echo "doc-test: the debug build stands in for cargo build -p$pkgs" >&2; exit 0 ;;
    run) [ "$1" = -- ] && shift; exec airlock "$@" ;;
    *) echo "doc-test: cargo $cmd is not run here" >&2; exit 2 ;;
esac
"""


def airlock_binary() -> pathlib.Path:
    env = os.environ.get("AIRLOCK_BIN")
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    binary = pathlib.Path(env) if env else target / "debug" / "airlock"
    assert binary.is_file(), f"no airlock binary at {binary}: cargo build --workspace --all-targets"
    return binary


def maf_python() -> Optional[Tuple[str, Dict[str, str]]]:
    r = subprocess.run(["bash", str(REPO / "scripts" / "maf-python.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    python, libpath = r.stdout.split()
    return python, {"LD_LIBRARY_PATH": libpath}


class Session:
    """One file's blocks: a working directory, PATH with the stand-ins, the environment the
    shell blocks exported, and the process groups they left behind."""

    def __init__(self, root: pathlib.Path) -> None:
        self.cwd = root / "work"
        self.cwd.mkdir()
        for entry in REPO.iterdir():
            if entry.name not in (".git", "target"):
                (self.cwd / entry.name).symlink_to(entry)
        bin_dir = root / "bin"
        bin_dir.mkdir()
        (bin_dir / "airlock").symlink_to(airlock_binary())
        for name, text in (("pip", PIP), ("pip3", PIP), ("cargo", CARGO)):
            (bin_dir / name).write_text(text)
            (bin_dir / name).chmod(0o755)
        drop = ("AIRLOCK_BIN", "AIRLOCK_TOKEN", "PYTHONPATH", "VIRTUAL_ENV", "CARGO_TARGET_DIR")
        self.env = {k: v for k, v in os.environ.items() if k not in drop}
        self.env["PATH"] = f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"
        self.env["PYTHONPATH"] = f"{REPO / 'clients/python/src'}:{REPO / 'clients/python/maf'}"
        self.env["PYTHONDONTWRITEBYTECODE"] = "1"
        # The blocks' images, snapshots and paused sandboxes stay in the session's directory,
        # never the machine's stores.
        for var, name in (("AIRLOCK_IMAGE_DIR", "images"), ("AIRLOCK_STATE_DIR", "state")):
            (root / name).mkdir()
            self.env[var] = str(root / name)
        self.groups: List[int] = []
        self.n = 0

    def run(self, argv: List[str], env: Dict[str, str]) -> Tuple[int, str, str]:
        self.n += 1
        out, err = self.cwd.parent / f"out-{self.n}", self.cwd.parent / f"err-{self.n}"
        # Files, not pipes: a background process a block starts must not hold the run open.
        with open(out, "w") as o, open(err, "w") as e:
            proc = subprocess.Popen(argv, cwd=self.cwd, env=env, stdout=o, stderr=e, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            self.groups.append(proc.pid)
            try:
                code = proc.wait(timeout=BLOCK_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
        return code, out.read_text(), err.read_text()

    def shell(self, block: Block) -> Tuple[int, str, str]:
        script, env_out = self.cwd.parent / f"block-{self.n + 1}.sh", self.cwd.parent / f"env-{self.n + 1}"
        script.write_text(block.code)
        code, out, err = self.run(["bash", "-e", "-o", "pipefail", "-c",
                                   'source "$1"; env -0 > "$2"', "doc-test", str(script), str(env_out)], self.env)
        if code == 0:
            pairs = [item.split("=", 1) for item in env_out.read_text().split("\0") if "=" in item]
            self.env = {k: v for k, v in pairs if k not in ("_", "SHLVL", "PWD", "OLDPWD")}
        return code, out, err

    def python(self, block: Block, interpreter: str, extra_env: Dict[str, str]) -> Tuple[int, str, str]:
        program = self.cwd.parent / f"block-{self.n + 1}.py"
        program.write_text(block.code)
        return self.run([interpreter, str(program)], {**self.env, **extra_env})

    def close(self) -> None:
        for group in self.groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass


def parse_json(block: Block) -> None:
    """One JSON value or several (JSON lines); a line starting `→ ` is a response, parsed too."""
    text = "\n".join(line[2:] if line.startswith("→ ") else line for line in block.code.splitlines())
    decoder, i = json.JSONDecoder(), 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        _, i = decoder.raw_decode(text, i)


def expect_output(block: Block, previous: Optional[str]) -> None:
    assert previous is not None, f"{block.where}: an output block follows no block that ran"
    printed = iter(previous.splitlines())
    for want in filter(None, block.code.splitlines()):
        assert any(line.rstrip() == want.rstrip() for line in printed), \
            f"{block.where}: {want!r} not printed (in this order); the block printed:\n{previous}"


def fail(block: Block, what: str, code: int, out: str, err: str) -> str:
    return f"{block.where}: {what} exited {code}\n--- block\n{block.code}--- stdout\n{out[-3000:]}\n--- stderr\n{err[-3000:]}"


@pytest.fixture
def session() -> Iterator[Session]:
    root = pathlib.Path(tempfile.mkdtemp(prefix="airlock-doc-"))
    s = Session(root)
    try:
        yield s
    finally:
        s.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_block_runs_as_written_or_says_why_not(doc: pathlib.Path, session: Session) -> None:
    previous: Optional[str] = None
    for block in blocks(doc):
        reason = block.skip_reason
        if reason:
            print(f"skipped {block.where}: {reason}")
            continue
        if block.lang == "toml":
            tomllib.loads(block.code)
        elif block.lang == "json":
            parse_json(block)
        elif block.marker == "output":
            expect_output(block, previous)
        elif block.lang in ("sh", "bash"):
            code, previous, err = session.shell(block)
            assert code == 0, fail(block, "the shell block", code, previous, err)
            print(f"ran {block.where}: {previous.strip()[-200:]!r}")
        elif block.lang == "python":
            interpreter, extra = sys.executable, {}
            if block.marker == "maf-python":
                found = maf_python()
                if found is None:
                    pytest.skip(f"{block.where}: no Python >= 3.12 with maf-sandbox (scripts/maf-python.sh)")
                interpreter, extra = found
            code, previous, err = session.python(block, interpreter, extra)
            assert code == 0, fail(block, "the python block", code, previous, err)
            print(f"ran {block.where} ({interpreter}): {previous.strip()[-200:]!r}")


def test_every_block_is_labelled_and_every_skip_gives_a_reason() -> None:
    """blocks() refuses an unlabelled block, an unknown language or marker; a skip has a reason."""
    for doc in DOCS:
        for block in blocks(doc):
            if block.marker and block.marker.startswith("skip"):
                assert block.skip_reason and len(block.skip_reason) > 10, block.where


SKIPPED = [b for doc in DOCS for b in blocks(doc) if b.skip_reason]


@pytest.mark.parametrize("block", SKIPPED, ids=[b.where for b in SKIPPED])
def test_skipped_block(block: Block) -> None:
    """One skip per block not run, with its reason (listed by `pytest -rs`)."""
    pytest.skip(f"{block.where}: {block.skip_reason}")
