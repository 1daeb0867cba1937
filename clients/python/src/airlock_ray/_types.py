"""What a batch carries to a node and back: picklable, no Ray."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from ._judge import TestCase, TestOutcome, Verdict


@dataclass(frozen=True)
class Limits:
    """Each run's limits (a test's own `timeout`/`memory_mb` win for that test)."""

    timeout: Optional[float] = None
    memory_mb: Optional[int] = None
    max_output_bytes: Optional[int] = None


@dataclass(frozen=True)
class Job:
    """One input of a batch: its position, its code, its tests (None: run it once, no input)."""

    index: int
    code: str
    tests: Optional[Tuple[TestCase, ...]] = None


@dataclass
class ProgramResult:
    """Exactly one per input. `verdict` is the judge's (with tests) or how the one run ended
    (`accepted` = ran to exit code 0). `stdout`/`stderr`/`exit_code` are the last run's;
    `attempts` counts the nodes it was sent to (more than one when a node was lost)."""

    index: int
    verdict: Verdict
    status: str
    stdout: str = ""
    stderr: str = ""
    exit_code: Optional[int] = None
    wall_time_ms: float = 0.0
    tests: List[TestOutcome] = field(default_factory=list)
    node_id: str = ""
    attempts: int = 1
    #: Why there is no verdict on the code (`sandbox_error`), else None.
    error: Optional[str] = None

    @property
    def accepted(self) -> bool:
        return self.verdict == Verdict.ACCEPTED
