"""Typed answers of the session methods: a sandbox's description, file facts, collected
outputs, a disposal."""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Literal, Mapping, Optional

from .spec import Capability, Egress, IsolationScope, SandboxKey


def _obj(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, dict) else {}


def _metadata(v: Any) -> Dict[str, str]:
    return {str(k): str(x) for k, x in _obj(v).items()}


def _ms(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


@dataclass(frozen=True)
class SandboxInfo:
    """What `sandbox.create` / `sandbox.connect` say about a sandbox."""

    sandbox_id: str
    isolation: str
    isolation_scope: IsolationScope
    egress: Egress
    requires: List[Capability]
    work_dir: str
    idle_timeout_s: float
    #: The orchestrator's labels from `sandbox.create` (`metadata=`), as the sandbox was made.
    metadata: Dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_wire(cls, v: Any) -> "SandboxInfo":
        d = _obj(v)
        requires = []
        for c in d.get("requires") or []:
            try:
                requires.append(Capability(c))
            except ValueError:  # a capability this client does not know
                continue
        return cls(sandbox_id=str(d.get("sandbox_id", "")), isolation=str(d.get("isolation", "")),
                   isolation_scope=IsolationScope(d.get("isolation_scope", "conversation")),
                   egress=Egress(d.get("egress", "closed")), requires=requires,
                   work_dir=str(d.get("work_dir", "/work")),
                   idle_timeout_s=float(d.get("idle_timeout_s", 0.0)),
                   metadata=_metadata(d.get("metadata")))


@dataclass(frozen=True)
class SandboxRecord:
    """One entry of `sandbox.list` (`client.list_sandboxes()`): a sandbox the server holds.

    `key` is None for a sandbox made without one. Times are milliseconds since the Unix epoch
    (`created_at`/`last_used_at` give them as aware datetimes); `last_used_at_ms` moves with
    every call the sandbox serves and with the end of each run. `state` is `running` while a
    run is in flight, else `idle`."""

    sandbox_id: str
    key: Optional[SandboxKey]
    metadata: Dict[str, str]
    created_at_ms: int
    last_used_at_ms: int
    idle_timeout_s: float
    state: Literal["idle", "running"]

    @property
    def created_at(self) -> datetime:
        return datetime.fromtimestamp(self.created_at_ms / 1000, tz=timezone.utc)

    @property
    def last_used_at(self) -> datetime:
        return datetime.fromtimestamp(self.last_used_at_ms / 1000, tz=timezone.utc)

    @classmethod
    def from_wire(cls, v: Any) -> "SandboxRecord":
        d = _obj(v)
        k = d.get("key")
        key = None
        if isinstance(k, dict):
            call_id = k.get("call_id")
            key = SandboxKey(str(k.get("scope", "")), str(k.get("thread_id", "")),
                             str(call_id) if call_id is not None else None)
        state: Literal["idle", "running"] = "running" if d.get("state") == "running" else "idle"
        return cls(sandbox_id=str(d.get("sandbox_id", "")), key=key, metadata=_metadata(d.get("metadata")),
                   created_at_ms=_ms(d.get("created_at_ms")), last_used_at_ms=_ms(d.get("last_used_at_ms")),
                   idle_timeout_s=float(d.get("idle_timeout_s", 0.0)), state=state)


@dataclass(frozen=True)
class FileStat:
    """`files.stat` (and what `files.write` reports): `size` is None for anything `files.read`
    would refuse, and for a missing path."""

    path: str
    exists: bool
    size: Optional[int]
    is_dir: bool
    #: `file`, `dir`, `symlink` or `other` (lstat-like: a link is named, never followed); None
    #: when the broker does not say (or nothing is there).
    kind: Optional[str] = None

    @classmethod
    def from_wire(cls, v: Any) -> "FileStat":
        d = _obj(v)
        size, kind = d.get("size"), d.get("kind")
        return cls(path=str(d.get("path", "")), exists=bool(d.get("exists", False)),
                   size=int(size) if isinstance(size, int) else None, is_dir=bool(d.get("is_dir", False)),
                   kind=kind if isinstance(kind, str) else None)


@dataclass(frozen=True)
class FileEntry:
    """One entry of `files.list`."""

    name: str
    size: Optional[int]
    is_dir: bool
    #: As `FileStat.kind`.
    kind: Optional[str] = None

    @classmethod
    def from_wire(cls, v: Any) -> "FileEntry":
        d = _obj(v)
        size, kind = d.get("size"), d.get("kind")
        return cls(name=str(d.get("name", "")), size=int(size) if isinstance(size, int) else None,
                   is_dir=bool(d.get("is_dir", False)), kind=kind if isinstance(kind, str) else None)


@dataclass(frozen=True)
class Artifact:
    """One collected output, with its bytes."""

    name: str
    media_type: str
    size: int
    data: bytes = field(repr=False)

    def text(self, encoding: str = "utf-8") -> str:
        return self.data.decode(encoding)

    @classmethod
    def from_wire(cls, v: Any) -> "Artifact":
        d = _obj(v)
        return cls(name=str(d.get("name", "")), media_type=str(d.get("media_type", "")),
                   size=int(d.get("size", 0)), data=base64.b64decode(str(d.get("data", ""))))


@dataclass(frozen=True)
class CollectedOutputs:
    """`outputs.collect`: the artifacts read, and the optional outputs that were absent."""

    artifacts: List[Artifact]
    absent: List[str]

    def get(self, name: str) -> Optional[Artifact]:
        return next((a for a in self.artifacts if a.name == name), None)

    @classmethod
    def from_wire(cls, v: Any) -> "CollectedOutputs":
        d = _obj(v)
        return cls(artifacts=[Artifact.from_wire(a) for a in d.get("artifacts") or []],
                   absent=[str(n) for n in d.get("absent") or []])


@dataclass(frozen=True)
class Disposal:
    """`sandbox.dispose`: `failure` is None when everything was freed, else the disposal code and
    message (the key stays refused until a disposal lands)."""

    sandbox_id: str
    failure_code: Optional[str] = None
    failure_message: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.failure_code is None

    @classmethod
    def from_wire(cls, v: Any) -> "Disposal":
        d = _obj(v)
        f = d.get("disposal")
        if isinstance(f, dict):
            return cls(str(d.get("sandbox_id", "")), str(f.get("code", "")), str(f.get("message", "")))
        return cls(str(d.get("sandbox_id", "")))
