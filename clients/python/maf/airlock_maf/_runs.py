"""One run in an airlock sandbox as maf-sandbox's `ExecResult`, under maf-sandbox's timeout
contract: the caller's `timeout` is wall-clock from the call (time queued behind another run of
the same sandbox counts), a `TimeoutError` means that bound expired and nothing else, and a run
that never started because the bound expired while queued is `SandboxQueuedTimeout`.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from airlock_client import OverCapacityError, RunResult, RunStatus
from maf_sandbox import ExecResult, SandboxQueuedTimeout

#: What a command sees for an environment (airlock passes a run nothing it was not given).
GUEST_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/work",
    "LANG": "C.UTF-8",
}

#: Pause between retries of a run the broker refused for want of a run slot (it never queues).
_SLOT_RETRY = 0.05


class AirlockRunError(RuntimeError):
    """A run that airlock did not let end on its own terms (refused, broke the protocol,
    cancelled by the broker), carried as an error rather than as an exit code it never had."""

    def __init__(self, result: RunResult) -> None:
        why = result.error.message if result.error is not None else str(result.status)
        super().__init__(f"the airlock run ended {result.status}: {why}")
        self.result = result


def remaining(deadline: float) -> float:
    return deadline - time.monotonic()


async def queued(lock: asyncio.Lock, deadline: float) -> None:
    """Take the sandbox's run lock before `deadline`, or raise SandboxQueuedTimeout."""
    try:
        await asyncio.wait_for(lock.acquire(), max(remaining(deadline), 0.0))
    except TimeoutError:
        raise SandboxQueuedTimeout("the deadline expired while queued behind another run") from None


async def with_a_slot(start: Callable[[float], Awaitable[RunResult]], deadline: float) -> RunResult:
    """Start a run with what is left of the bound, retrying while the server's run slots are
    all taken (`over_capacity`: the broker refuses rather than queues)."""
    while True:
        left = remaining(deadline)
        if left <= 0:
            raise SandboxQueuedTimeout("the deadline expired waiting for a run slot")
        try:
            return await start(left)
        except OverCapacityError:
            await asyncio.sleep(min(_SLOT_RETRY, max(remaining(deadline), 0.0)))


def exec_result(result: RunResult) -> ExecResult:
    """The exact bytes of both streams and the exit status; a signal death is `128 + signal`
    (what a shell reports); the bound expiring is `TimeoutError`."""
    if result.status == RunStatus.TIMEOUT:
        raise TimeoutError("the command overran its timeout and was stopped")
    if result.status in (RunStatus.REFUSED, RunStatus.PROTOCOL_ERROR, RunStatus.CANCELLED, RunStatus.UNKNOWN):
        raise AirlockRunError(result)
    stdout = result.stdout_data if result.stdout_data is not None else result.stdout.encode("utf-8")
    stderr = result.stderr_data if result.stderr_data is not None else result.stderr.encode("utf-8")
    if result.exit_code is not None:
        code = result.exit_code
    elif result.signal is not None:
        code = 128 + result.signal
    else:
        code = 1
    return ExecResult(exit_code=code, stdout_bytes=stdout, stderr_bytes=stderr)
