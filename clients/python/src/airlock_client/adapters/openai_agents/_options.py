"""The airlock backend's client options and persisted session state (JSON round-trips)."""
from __future__ import annotations

from typing import Any, Dict, Literal, Optional, Tuple

from agents.sandbox.session.sandbox_client import BaseSandboxClientOptions
from agents.sandbox.session.sandbox_session_state import SandboxSessionState
from pydantic import Field

from ...spec import DEFAULT_REQUIRES, Capability, Limits, TransferLimits

#: The work dir of every airlock sandbox, and so the workspace root of its sessions.
WORK_DIR = "/work"


class AirlockSandboxClientOptions(BaseSandboxClientOptions):
    """What a new airlock sandbox is made with (`sandbox.create`). `None` takes the server's
    default; a value above a server ceiling is refused, never clamped."""

    type: Literal["airlock"] = "airlock"
    timeout_s: Optional[float] = None
    """Each command's time limit when the tool call gives none."""
    memory_mb: Optional[int] = None
    max_output_bytes: Optional[int] = None
    egress_allow: Tuple[str, ...] = ()
    """`host[:port]` the sandbox may reach (allowlist egress); empty: no network at all."""
    idle_timeout_s: Optional[float] = None
    """The broker disposes of the sandbox after this long without a call."""
    max_file_bytes: Optional[int] = None
    """Per-file cap of file transfers both ways, workspace archives included (default 8 MiB)."""
    env: Optional[Dict[str, str]] = None
    """Environment of every command (the manifest's environment is added over it)."""
    dispose_on_shutdown: bool = True
    """Dispose of the airlock sandbox when the session shuts down. False leaves it to its idle
    timeout, so `client.resume(state)` re-attaches to it with its files."""
    processes: bool = False
    """Make the sandbox with the `processes` capability, so the shell tool's commands run as
    background processes (and terminals with `tty=true`) that outlive the call and take
    `write_stdin`. Needs closed egress (no `egress_allow`)."""

    def __init__(self, *, timeout_s: Optional[float] = None, memory_mb: Optional[int] = None,
                 max_output_bytes: Optional[int] = None, egress_allow: Tuple[str, ...] = (),
                 idle_timeout_s: Optional[float] = None, max_file_bytes: Optional[int] = None,
                 env: Optional[Dict[str, str]] = None, dispose_on_shutdown: bool = True,
                 processes: bool = False, type: Literal["airlock"] = "airlock") -> None:
        super().__init__(type=type, timeout_s=timeout_s, memory_mb=memory_mb, max_output_bytes=max_output_bytes,
                         egress_allow=tuple(egress_allow), idle_timeout_s=idle_timeout_s,
                         max_file_bytes=max_file_bytes, env=env, dispose_on_shutdown=dispose_on_shutdown,
                         processes=processes)

    def sandbox_kwargs(self) -> Dict[str, Any]:
        """Keyword arguments of `client.sandbox(...)` for these options."""
        kwargs: Dict[str, Any] = {"egress_allow": list(self.egress_allow), "idle_timeout": self.idle_timeout_s}
        limits = Limits(timeout_s=self.timeout_s, memory_mb=self.memory_mb, max_output_bytes=self.max_output_bytes)
        if limits.to_wire():
            kwargs["limits"] = limits
        if self.max_file_bytes is not None:
            default = TransferLimits()
            caps = TransferLimits(max_bytes_per_file=self.max_file_bytes,
                                  max_total_bytes=max(default.max_total_bytes, self.max_file_bytes))
            kwargs["files_in"] = kwargs["files_out"] = caps
        if self.processes:
            kwargs["requires"] = sorted({*DEFAULT_REQUIRES, Capability.PROCESSES})
        return kwargs


class AirlockSandboxSessionState(SandboxSessionState):
    """A session's state: the airlock sandbox it drives, and the options to make another."""

    type: Literal["airlock"] = "airlock"
    sandbox_id: str
    options: AirlockSandboxClientOptions = Field(default_factory=AirlockSandboxClientOptions)
