"""The policy vocabulary of a sandbox spec (docs/policy.md, docs/server.md `sandbox.create`) as
enums and dataclasses, each with the one wire spelling the broker accepts."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Dict, FrozenSet, Iterable, Mapping, Optional, Union


class WireEnum(str, Enum):
    """A `str` enum whose members print as their wire spelling."""

    def __str__(self) -> str:
        return str(self.value)


class Capability(WireEnum):
    """What a sandbox may be used for; every method is checked against its spec's list."""

    RUN_CODE = "run_code"
    EXEC = "exec"
    FILES_IN = "files_in"
    FILES_OUT = "files_out"
    FILES_LIST = "files_list"
    FILES_DELETE = "files_delete"
    HOST_TOOLS = "host_tools"
    SNAPSHOT = "snapshot"
    ATTACHED_IDENTITY = "attached_identity"
    #: `sandbox.expose`: a port of the sandbox's own loopback served on the server's listener.
    #: Never in the default: a spec must ask for it.
    PORTS = "ports"
    PROCESSES = "processes"  # background processes and terminals (not in DEFAULT_REQUIRES)


#: What the broker gives a spec that names no `requires`: everything but host tools.
DEFAULT_REQUIRES: FrozenSet[Capability] = frozenset({
    Capability.RUN_CODE, Capability.EXEC, Capability.FILES_IN, Capability.FILES_OUT,
    Capability.FILES_LIST, Capability.FILES_DELETE})


class Egress(WireEnum):
    """Network reach: `closed` (none) or `allowlist` (the hosts of `egress_allow`)."""

    CLOSED = "closed"
    ALLOWLIST = "allowlist"
    UNRESTRICTED = "unrestricted"  # part of the vocabulary; the broker never serves it


class IsolationScope(WireEnum):
    """`conversation` (one sandbox per key) or `call` (one per call id)."""

    CONVERSATION = "conversation"
    CALL = "call"


class Isolation(WireEnum):
    """Isolation rungs, weakest to strongest."""

    NONE = "none"
    RUNTIME = "runtime"
    OS_PROCESS = "os_process"
    CONTAINER = "container"
    HARDENED_CONTAINER = "hardened_container"
    MICROVM = "microvm"
    VM = "vm"


class IdleAction(WireEnum):
    """What the broker does with a sandbox left idle past its timeout: `dispose` (the default)
    or `pause` (snapshot it to the state directory and free it; needs `Capability.SNAPSHOT`)."""

    DISPOSE = "dispose"
    PAUSE = "pause"


class Identity(WireEnum):
    """The authority a host tool acts with."""

    APP = "app"
    USER = "user"


@dataclass(frozen=True)
class Limits:
    """Per-run limits; `None` takes the server default. Above a server ceiling is refused."""

    timeout_s: Optional[float] = None
    memory_mb: Optional[int] = None
    max_tool_calls: Optional[int] = None
    max_output_bytes: Optional[int] = None

    def to_wire(self) -> Dict[str, Any]:
        return {k: v for k, v in (("timeout_s", self.timeout_s), ("memory_mb", self.memory_mb),
                                  ("max_tool_calls", self.max_tool_calls),
                                  ("max_output_bytes", self.max_output_bytes)) if v is not None}


@dataclass(frozen=True)
class TransferLimits:
    """Caps on one direction of file transfer; all three hold together (default 8 MiB / 32 MiB / 32)."""

    max_bytes_per_file: int = 8 * 1024 * 1024
    max_total_bytes: int = 32 * 1024 * 1024
    max_files: int = 32

    def to_wire(self) -> Dict[str, int]:
        return {"max_bytes_per_file": self.max_bytes_per_file, "max_total_bytes": self.max_total_bytes,
                "max_files": self.max_files}


@dataclass(frozen=True)
class ToolDeclaration:
    """A tool the orchestrator answers, declared like a host tool: every call is checked against
    `schema` (JSON Schema of the arguments) before it reaches you. `source`/`sink` name the
    data the tool reads or writes (`None`: it plays no part in that role)."""

    name: str
    schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})
    description: str = ""
    source: Optional[str] = None
    sink: Optional[str] = None
    identity: Optional[Identity] = None

    def to_wire(self) -> Dict[str, Any]:
        return {"name": self.name, "description": self.description, "schema": dict(self.schema),
                "source": self.source, "sink": self.sink,
                "identity": self.identity.value if self.identity is not None else None}


@dataclass(frozen=True)
class DeclaredOutput:
    """A file `collect_outputs` returns: `path` under /work, its media type, the artifact name
    (default: the path), and whether its absence is an error."""

    path: str
    media_type: str = "application/octet-stream"
    name: Optional[str] = None
    required: bool = True

    def to_wire(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"path": self.path, "media_type": self.media_type, "required": self.required}
        if self.name is not None:
            out["name"] = self.name
        return out


@dataclass(frozen=True)
class SandboxKey:
    """The orchestrator's name for a sandbox: the same key with an equal spec returns the same one."""

    scope: str
    thread_id: str
    call_id: Optional[str] = None

    def to_wire(self) -> Dict[str, str]:
        out = {"scope": self.scope, "thread_id": self.thread_id}
        if self.call_id is not None:
            out["call_id"] = self.call_id
        return out


CapabilityLike = Union[Capability, str]


def capabilities(items: Iterable[CapabilityLike]) -> FrozenSet[Capability]:
    """Validate capability names eagerly (an unknown spelling is a ValueError here, not a refusal later)."""
    return frozenset(Capability(c) for c in items)


@dataclass(frozen=True)
class Tool:
    """A declared tool and the Python callable that answers it (sync callables run on worker
    threads; async ones on the client's loop). Raise `ToolDenied` to answer `tool_denied`."""

    declaration: ToolDeclaration
    handler: Callable[..., Any]

    @classmethod
    def define(cls, handler: Callable[..., Any], *, schema: Mapping[str, Any], name: Optional[str] = None,
               description: Optional[str] = None, source: Optional[str] = None, sink: Optional[str] = None,
               identity: Optional[Identity] = None) -> "Tool":
        """A tool named after `handler` (unless `name`), described by its docstring (unless `description`)."""
        decl = ToolDeclaration(name=name or str(getattr(handler, "__name__", "")), schema=schema,
                               description=description if description is not None else (handler.__doc__ or "").strip(),
                               source=source, sink=sink, identity=identity)
        return cls(decl, handler)
