"""The real broker for every test: `AirlockSandboxBackend` launching `$AIRLOCK_BIN serve --stdio`.

The whole module runs once per identity (scripts/test.sh runs it as root, then as the
unprivileged `airlock-test`): the backend, its broker and every sandbox run as whoever runs
pytest, and the rung each identity gets is the one the broker probes for it.
"""
from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from airlock_maf import AirlockSandboxBackend


def airlock_binary() -> str:
    binary = os.environ.get("AIRLOCK_BIN") or shutil.which("airlock")
    if not binary or not Path(binary).is_file():
        pytest.fail("set AIRLOCK_BIN to the airlock binary (cargo build -p airlock-cli)", pytrace=False)
    return binary


@pytest.fixture(scope="session")
def backend() -> Iterator[AirlockSandboxBackend]:
    # An egress test server on loopback is reachable only through --allow-private (airlock's
    # proxy refuses loopback and other special ranges by default).
    args = ["--allow-private", "127.0.0.0/8"] if os.environ.get("AIRLOCK_MAF_EGRESS_URL") else []
    b = AirlockSandboxBackend(binary=airlock_binary(), args=args)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:12]
