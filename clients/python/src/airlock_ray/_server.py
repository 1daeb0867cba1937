"""Starting `airlock serve` from an actor so that it dies with the actor, cleanly.

`airlock serve --listen 127.0.0.1:0` with a random token (the binary the wheel installed, or
$AIRLOCK_BIN), in a session of its own, under a keeper (see `_supervised`): when the actor's
process dies for any reason — SIGKILL, its raylet lost, the driver gone — the server gets
SIGTERM, disposes every sandbox it holds and exits, leaving no process and no cgroup behind.
"""
from __future__ import annotations

import asyncio
import os
import secrets
import shutil
from dataclasses import dataclass
from typing import Optional, Sequence

from airlock_client import find_airlock_bin

#: The first line `airlock serve --listen` prints.
_LISTENING = "listening on "


@dataclass
class Server:
    proc: asyncio.subprocess.Process
    url: str
    token: str

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.terminate()
            await self.proc.wait()


#: The keeper: forwards SIGTERM to the server and waits for it to finish.
_KEEPER = 'trap \'kill -TERM "$c" 2>/dev/null; wait "$c"; exit 0\' TERM INT; "$@" & c=$!; wait "$c"'


def _supervised(server: Sequence[str]) -> Sequence[str]:
    """`server` under a keeper shell: the actor's process -> keeper -> server. The keeper dies
    with the actor's process (parent-death SIGKILL) and Ray kills a dying worker's children
    with SIGKILL; the server, a grandchild, is not killed but gets SIGTERM when its keeper
    dies (its own parent-death signal): it disposes every sandbox, removes every cgroup, exits."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise RuntimeError("airlock_ray needs setpriv (util-linux) to tie each server's life to its actor")
    return [setpriv, "--pdeathsig", "KILL", "/bin/sh", "-c", _KEEPER, "airlock-keeper",
            setpriv, "--pdeathsig", "TERM", *server]


async def start_server(binary: Optional[str], args: Sequence[str], where: str) -> Server:
    token = secrets.token_urlsafe(32)
    argv = _supervised([binary or find_airlock_bin(), "serve", "--listen", "127.0.0.1:0", *args])
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "AIRLOCK_TOKEN": token, "RUST_LOG": os.environ.get("AIRLOCK_RAY_SERVER_LOG", "warn")},
        start_new_session=True)
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip()
    if not line.startswith(_LISTENING):
        proc.kill()
        await proc.wait()
        raise RuntimeError(f"airlock serve did not start on {where}: {line or 'no output'!r}")
    return Server(proc, line[len(_LISTENING):] + "/", token)
