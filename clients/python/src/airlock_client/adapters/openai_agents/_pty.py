"""The Agents SDK's interactive exec (`exec_command` that outlives its `yield_time_ms`, then
`write_stdin {session_id, chars}`) over airlock background processes and terminals.

Served when the sandbox was made with the `processes` capability
(`AirlockSandboxClientOptions(processes=True)`): `supports_pty()` is then true, and the
SDK's shell tool starts every command with `pty_exec_start`. A command runs as a background
process (`process.start`; `tty=true`: on a terminal of its own, 24x80, so `write_stdin` can
type into it); the call returns what it printed within the yield time, and a command still
running keeps a session id the model can poll or type into. Without the capability the SDK
runs each command one-shot (`sandbox.exec`), as before.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Deque, Dict, List, Optional, Union

from agents.sandbox.errors import ExecTransportError
from agents.sandbox.session.pty_output import collect_pty_output
from agents.sandbox.session.pty_types import (PTY_PROCESSES_MAX, PtyExecUpdate, allocate_pty_process_id,
                                              clamp_pty_yield_time_ms, process_id_to_prune_from_meta,
                                              resolve_pty_write_yield_time_ms)

from ..._process import Process
from ..._pty import DEFAULT_TERMINAL_ENV, Terminal
from ...errors import AirlockError
from ...sandbox import Sandbox
from ...spec import Capability

log = logging.getLogger("airlock_client.adapters.openai_agents")

#: The yield time of `exec_command` when the call names none (the SDK's own backends' choice).
DEFAULT_START_YIELD_MS = 10_000
#: And of `write_stdin`.
DEFAULT_WRITE_YIELD_MS = 250


@dataclass(eq=False)
class _Entry:
    handle: Union[Process, Terminal]
    tty: bool
    chunks: Deque[bytes] = field(default_factory=deque)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    notify: asyncio.Event = field(default_factory=asyncio.Event)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    last_used: float = field(default_factory=time.monotonic)
    exit_code: Optional[int] = None
    waiter: Optional["asyncio.Task[None]"] = None

    def append(self, data: bytes) -> None:
        # Called on the loop, between awaits: the lock is never held across this.
        self.chunks.append(data)
        self.notify.set()


def supports_processes(sandbox: Sandbox) -> bool:
    return Capability.PROCESSES in sandbox.info.requires


class ProcessSessions:
    """The interactive-exec table of one session: SDK session ids (small ints) to airlock
    process handles."""

    def __init__(self) -> None:
        self._entries: Dict[int, _Entry] = {}
        self._lock = asyncio.Lock()

    async def start(self, sandbox: Sandbox, argv: List[str], *, cwd: str, env: Optional[Dict[str, str]],
                    timeout: Optional[float], tty: bool, yield_time_s: Optional[float],
                    max_output_tokens: Optional[int]) -> PtyExecUpdate:
        entry: Optional[_Entry] = None
        try:
            if tty:
                term_env = {**DEFAULT_TERMINAL_ENV, **(env or {})}
                pending: List[bytes] = []
                t = await sandbox.pty.create(cmd=argv, cwd=cwd, env=term_env, timeout=timeout,
                                             on_data=lambda b: (entry.append(b) if entry else pending.append(b)))
                entry = _Entry(t, True)
                for b in pending:
                    entry.append(b)
            else:
                early: List[bytes] = []

                def out(s: str) -> None:
                    (entry.append if entry else early.append)(s.encode())
                p = await sandbox.commands.run(argv, background=True, cwd=cwd, env=env, timeout=timeout,
                                               on_stdout=out, on_stderr=out)
                entry = _Entry(p, False)
                for b in early:
                    entry.append(b)
        except AirlockError as e:
            raise ExecTransportError(command=argv, context={"code": e.code, "message": e.message}, cause=e) from e
        entry.waiter = asyncio.ensure_future(self._wait(entry))
        async with self._lock:
            session_id = allocate_pty_process_id(set(self._entries))
            pruned = self._prune()
            self._entries[session_id] = entry
        if pruned is not None:
            await self._terminate(pruned)
        ms = DEFAULT_START_YIELD_MS if yield_time_s is None else int(yield_time_s * 1000)
        return await self._collect(session_id, entry, clamp_pty_yield_time_ms(ms), max_output_tokens)

    async def write(self, entry: _Entry, session_id: int, chars: str, yield_time_s: Optional[float],
                    max_output_tokens: Optional[int]) -> PtyExecUpdate:
        if chars:
            if not isinstance(entry.handle, Terminal):
                raise RuntimeError("stdin is not available for this process")  # the SDK's own words
            try:
                await entry.handle.send_input(chars)
            except AirlockError as e:
                raise ExecTransportError(command=["write_stdin"], context={"code": e.code, "message": e.message},
                                         cause=e) from e
        ms = DEFAULT_WRITE_YIELD_MS if yield_time_s is None else int(yield_time_s * 1000)
        entry.last_used = time.monotonic()
        return await self._collect(session_id, entry,
                                   resolve_pty_write_yield_time_ms(yield_time_ms=ms, input_empty=chars == ""),
                                   max_output_tokens)

    @property
    def entries(self) -> Dict[int, _Entry]:
        return self._entries

    async def terminate_all(self) -> None:
        async with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
        for entry in entries:
            await self._terminate(entry)

    @staticmethod
    async def _wait(entry: _Entry) -> None:
        try:
            if isinstance(entry.handle, Terminal):
                info = await entry.handle.wait()
                code, sig = info.exit_code, info.signal
            else:
                r = await entry.handle.wait()
                code, sig = r.exit_code, r.signal
            entry.exit_code = code if code is not None else 128 + (sig or 0)
        except (AirlockError, OSError) as e:
            log.warning("lost track of %s: %s", entry.handle.process_id, e)
            entry.exit_code = 1
        async with entry.lock:
            pass
        entry.closed.set()
        entry.notify.set()

    async def _collect(self, session_id: int, entry: _Entry, yield_ms: int,
                       max_output_tokens: Optional[int]) -> PtyExecUpdate:
        output, tokens, closed = await collect_pty_output(
            output_chunks=entry.chunks, output_lock=entry.lock, output_notify=entry.notify,
            is_done=entry.closed.is_set, yield_time_ms=yield_ms, max_output_tokens=max_output_tokens)
        exit_code = entry.exit_code if closed else None
        live: Optional[int] = session_id
        if exit_code is not None:
            async with self._lock:
                self._entries.pop(session_id, None)
            live = None
        return PtyExecUpdate(process_id=live, output=output, exit_code=exit_code, original_token_count=tokens)

    def _prune(self) -> Optional[_Entry]:
        if len(self._entries) < PTY_PROCESSES_MAX:
            return None
        meta = [(sid, e.last_used, e.closed.is_set()) for sid, e in self._entries.items()]
        sid = process_id_to_prune_from_meta(meta)
        return self._entries.pop(sid, None) if sid is not None else None

    @staticmethod
    async def _terminate(entry: _Entry) -> None:
        if entry.closed.is_set():
            return
        try:
            await entry.handle.kill()
        except (AirlockError, OSError) as e:
            log.warning("could not kill %s: %s", entry.handle.process_id, e)
        if entry.waiter is not None:
            entry.waiter.cancel()
