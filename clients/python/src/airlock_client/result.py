"""The typed result of a run (the broker's RunResult)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional


@dataclass(frozen=True)
class RunError:
    """Why a run did not complete: an error code from the protocol table and a message."""

    code: int
    message: str


@dataclass(frozen=True)
class RunResult:
    """Everything the orchestrator learns about a finished run."""

    status: str
    stdout: str
    stderr: str
    exit_code: Optional[int]
    signal: Optional[int]
    error: Optional[RunError]
    stdout_truncated: bool
    stderr_truncated: bool
    stdout_bytes: int
    stderr_bytes: int
    wall_time_ms: float
    peak_rss_bytes: int
    tool_calls: int
    run_id: str
    enforcement: List[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the program ran to the end and exited 0."""
        return self.status == "completed"

    @classmethod
    def from_wire(cls, v: Any) -> "RunResult":
        if not isinstance(v, dict):
            raise ValueError(f"run result is not an object: {v!r}")
        err = v.get("error")
        return cls(
            status=str(v.get("status", "")),
            stdout=str(v.get("stdout", "")),
            stderr=str(v.get("stderr", "")),
            exit_code=v.get("exit_code"),
            signal=v.get("signal"),
            error=RunError(int(err.get("code", 0)), str(err.get("message", ""))) if isinstance(err, dict) else None,
            stdout_truncated=bool(v.get("stdout_truncated", False)),
            stderr_truncated=bool(v.get("stderr_truncated", False)),
            stdout_bytes=int(v.get("stdout_bytes", 0)),
            stderr_bytes=int(v.get("stderr_bytes", 0)),
            wall_time_ms=float(v.get("wall_time_ms", 0.0)),
            peak_rss_bytes=int(v.get("peak_rss_bytes", 0)),
            tool_calls=int(v.get("tool_calls", 0)),
            run_id=str(v.get("run_id", "")),
            enforcement=list(v.get("enforcement", [])),
        )
