"""The test-case form of a program: stdin in, expected stdout out, a judge's verdict.

Pure functions, no Ray: what code-reward loops call a judge. Each test runs as its own program
in a fresh sandbox; its input reaches the program as `sys.stdin` (a harness around the code:
the one-shot run has no stdin of its own), and its output is compared like a judge compares:
line by line, trailing whitespace and trailing blank lines ignored.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional, Sequence

from airlock_client import ErrorCode, RunResult, RunStatus

#: Errors that say the sandbox, not the program, failed: no verdict on the code. Only what a
#: program cannot bring about itself: a program that crashes its interpreter, is killed by
#: the seccomp filter or trips a broker error during its run gets `runtime_error`, never a
#: way out of its verdict.
SANDBOX_FAULTS = frozenset({ErrorCode.SANDBOX_REFUSED, ErrorCode.SHUTDOWN, ErrorCode.OVER_CAPACITY,
                            ErrorCode.BUSY, ErrorCode.NOT_FOUND})


class Verdict(str, enum.Enum):
    """How a program fared against its tests. A `str` enum (`v == "accepted"` holds)."""

    ACCEPTED = "accepted"
    WRONG_ANSWER = "wrong_answer"
    TIME_LIMIT = "time_limit"
    MEMORY_LIMIT = "memory_limit"
    RUNTIME_ERROR = "runtime_error"
    #: The sandbox could not run the program at all (refused before it started, its server
    #: gone, its node lost for good): no verdict on its code. `ProgramResult.error` says why.
    #: Nothing a program does can bring this about (a crash or a kill is `runtime_error`).
    SANDBOX_ERROR = "sandbox_error"


@dataclass(frozen=True)
class TestCase:
    """One test: `stdin` fed to the program, `expected` compared with its stdout. `timeout`
    (seconds) and `memory_mb` override the batch's limits for this test."""

    stdin: str = ""
    expected: Optional[str] = None
    timeout: Optional[float] = None
    memory_mb: Optional[int] = None

    __test__ = False  # not a pytest class


@dataclass(frozen=True)
class TestOutcome:
    """One test's verdict and what it cost."""

    verdict: Verdict
    wall_time_ms: float
    peak_rss_bytes: int
    exit_code: Optional[int]
    stdout: str
    stderr: str

    __test__ = False


_HARNESS = """\
import builtins as _airlock_b, io as _airlock_io, sys as _airlock_sys
_airlock_sys.stdin = _airlock_io.TextIOWrapper(_airlock_io.BytesIO({data!r}), encoding="utf-8")
def _airlock_input(prompt=""):
    if prompt:
        _airlock_sys.stdout.write(str(prompt))
    line = _airlock_sys.stdin.readline()
    if not line:
        raise EOFError("EOF when reading a line")
    return line[:-1] if line.endswith("\\n") else line
_airlock_b.input = _airlock_input
_airlock_code = {code!r}
del _airlock_b, _airlock_io, _airlock_input
exec(compile(_airlock_code, "solution.py", "exec"), {{"__name__": "__main__", "__builtins__": __builtins__}})
"""


def with_stdin(code: str, stdin: str) -> str:
    """`code` wrapped so that it reads `stdin` from `sys.stdin` and runs as `__main__` in a
    namespace of its own, its tracebacks naming `solution.py`."""
    return _HARNESS.format(data=stdin.encode(), code=code)


def same_output(got: str, expected: str) -> bool:
    """A judge's comparison: lines equal after their trailing whitespace, trailing blank lines
    ignored on both sides."""
    def lines(text: str) -> Sequence[str]:
        out = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
        while out and not out[-1]:
            out.pop()
        return out
    return lines(got) == lines(expected)


def verdict_of(result: RunResult, expected: Optional[str]) -> Verdict:
    """The verdict a judge gives one run: by how it ended, then by its output."""
    status = result.status
    if status == RunStatus.TIMEOUT:
        return Verdict.TIME_LIMIT
    if status == RunStatus.MEMORY_LIMIT:
        return Verdict.MEMORY_LIMIT
    if status in (RunStatus.REFUSED, RunStatus.CANCELLED, RunStatus.UNKNOWN) or (
            result.error is not None and result.error.code in SANDBOX_FAULTS):
        return Verdict.SANDBOX_ERROR
    if status != RunStatus.COMPLETED or result.exit_code not in (0, None):
        return Verdict.RUNTIME_ERROR
    if expected is None:
        return Verdict.ACCEPTED
    if result.stdout_truncated or not same_output(result.stdout, expected):
        return Verdict.WRONG_ANSWER
    return Verdict.ACCEPTED
