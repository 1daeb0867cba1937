"""Typed answers of the session methods: a sandbox's description, file facts, collected
outputs, a disposal, snapshots."""
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
    #: When its lifetime ends (ms since the epoch); None without one (`lifetime=`).
    ends_at_ms: Optional[int] = None

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
                   metadata=_metadata(d.get("metadata")),
                   ends_at_ms=d["ends_at_ms"] if isinstance(d.get("ends_at_ms"), int) else None)


def _opt_ms(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _when(ms: Optional[int]) -> Optional[datetime]:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc) if ms is not None else None


def _key(v: Any) -> Optional[SandboxKey]:
    if not isinstance(v, dict):
        return None
    call_id = v.get("call_id")
    return SandboxKey(str(v.get("scope", "")), str(v.get("thread_id", "")),
                      str(call_id) if call_id is not None else None)


#: A listed sandbox's state: `running` (a run in flight), `idle`, or `paused` (in the server's
#: state directory; any call on it resumes it).
SandboxState = Literal["idle", "running", "paused"]


@dataclass(frozen=True)
class SandboxRecord:
    """One entry of `sandbox.list` (`client.list_sandboxes()`): a sandbox the server holds.

    `key` is None for a sandbox made without one. Times are milliseconds since the Unix epoch
    (`created_at`/`last_used_at`/`paused_at` give them as aware datetimes); `last_used_at_ms`
    moves with every call the sandbox serves and with the end of each run. `state` is
    `running` while a run is in flight, `paused` for a paused sandbox, else `idle`.

    A live sandbox (`idle`/`running`) has `created_at_ms`, `last_used_at_ms` and
    `idle_timeout_s`, and no `paused_at_ms`/`snapshot_id`; a paused one has only
    `paused_at_ms` (whole seconds) and `snapshot_id`, the snapshot it is kept in."""

    sandbox_id: str
    key: Optional[SandboxKey]
    metadata: Dict[str, str]
    created_at_ms: Optional[int]
    last_used_at_ms: Optional[int]
    idle_timeout_s: Optional[float]
    state: SandboxState
    paused_at_ms: Optional[int] = None
    snapshot_id: Optional[str] = None

    @property
    def paused(self) -> bool:
        return self.state == "paused"

    @property
    def created_at(self) -> Optional[datetime]:
        return _when(self.created_at_ms)

    @property
    def last_used_at(self) -> Optional[datetime]:
        return _when(self.last_used_at_ms)

    @property
    def paused_at(self) -> Optional[datetime]:
        return _when(self.paused_at_ms)

    @classmethod
    def from_wire(cls, v: Any) -> "SandboxRecord":
        d = _obj(v)
        raw_state = d.get("state")
        state: SandboxState = ("running" if raw_state == "running" else
                               "paused" if raw_state == "paused" else "idle")
        idle = d.get("idle_timeout_s")
        snapshot_id = d.get("snapshot_id")
        return cls(sandbox_id=str(d.get("sandbox_id", "")), key=_key(d.get("key")),
                   metadata=_metadata(d.get("metadata")),
                   created_at_ms=_opt_ms(d.get("created_at_ms")), last_used_at_ms=_opt_ms(d.get("last_used_at_ms")),
                   idle_timeout_s=float(idle) if isinstance(idle, (int, float)) and not isinstance(idle, bool)
                   else None,
                   state=state, paused_at_ms=_opt_ms(d.get("paused_at_ms")),
                   snapshot_id=snapshot_id if isinstance(snapshot_id, str) else None)


@dataclass(frozen=True)
class KernelReport:
    """What a snapshot kept of a stateful sandbox's interpreter. `carried` says how: "image"
    (the interpreter's process image: every variable as it was) or "pickle" (an interpreter
    holding an open file or socket, a thread or a shared mapping: picklable values; functions
    and classes defined in cells, by value; modules, as names re-imported on restore).
    `saved` names the variables carried, `not_saved` maps each one left behind to why (an open
    file, a socket, a thread, a generator, ...; always empty for an image); `bytes` is the size
    of the saved state."""

    saved: List[str]
    not_saved: Dict[str, str]
    bytes: int
    carried: str = "pickle"

    @classmethod
    def from_wire(cls, v: Any) -> Optional["KernelReport"]:
        if not isinstance(v, dict):
            return None
        return cls(saved=[str(n) for n in v.get("saved") or []],
                   not_saved={str(k): str(w) for k, w in _obj(v.get("not_saved")).items()},
                   bytes=_ms(v.get("bytes")),
                   carried=str(v.get("carried") or "pickle"))


@dataclass(frozen=True)
class SnapshotInfo:
    """`sandbox.snapshot` / `sandbox.pause` / `sandbox.fork`'s snapshot: the sandbox's files (its
    /work, /tmp and /dev/shm) and, for a stateful sandbox, its interpreter's state.

    `snapshot_id` names it for `client.sandbox(from_snapshot=...)` and
    `client.remove_snapshot()`; `bytes` is its stored size; `kernel` is None when no
    interpreter state was taken (a sandbox that is not stateful, or whose interpreter had not
    started). `paused` is True for the answer of `pause()`."""

    sandbox_id: str
    snapshot_id: str
    bytes: int
    kernel: Optional[KernelReport]
    paused: bool = False

    @classmethod
    def from_wire(cls, v: Any) -> "SnapshotInfo":
        d = _obj(v)
        return cls(sandbox_id=str(d.get("sandbox_id", "")), snapshot_id=str(d.get("snapshot_id", "")),
                   bytes=_ms(d.get("bytes")), kernel=KernelReport.from_wire(d.get("kernel")),
                   paused=d.get("state") == "paused")


@dataclass(frozen=True)
class SnapshotRecord:
    """One entry of `snapshot.list` (`client.list_snapshots()`): a snapshot in the server's state
    directory. `kept`: made by `snapshot()` (kept until `remove_snapshot`); a snapshot that only
    holds paused sandboxes (`paused_sandboxes`, their ids) goes when they are resumed or
    disposed of. `made_unix` is in whole seconds since the epoch."""

    snapshot_id: str
    bytes: int
    made_unix: int
    kept: bool
    paused_sandboxes: List[str]

    @property
    def made_at(self) -> datetime:
        return datetime.fromtimestamp(self.made_unix, tz=timezone.utc)

    @classmethod
    def from_wire(cls, v: Any) -> "SnapshotRecord":
        d = _obj(v)
        return cls(snapshot_id=str(d.get("snapshot_id", "")), bytes=_ms(d.get("bytes")),
                   made_unix=_ms(d.get("made_unix")), kept=bool(d.get("kept", False)),
                   paused_sandboxes=[str(i) for i in d.get("paused_sandboxes") or []])


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
    #: Permission, set-id and sticky bits (`0o640`); None when the broker does not say.
    mode: Optional[int] = None
    #: As `ls -l` writes them (`rw-r-----`).
    permissions: Optional[str] = None
    #: Last modified, milliseconds since the epoch.
    modified_ms: Optional[int] = None

    @classmethod
    def from_wire(cls, v: Any) -> "FileStat":
        d = _obj(v)
        size, kind, mode = d.get("size"), d.get("kind"), d.get("mode")
        perms, modified = d.get("permissions"), d.get("modified_ms")
        return cls(path=str(d.get("path", "")), exists=bool(d.get("exists", False)),
                   size=int(size) if isinstance(size, int) else None, is_dir=bool(d.get("is_dir", False)),
                   kind=kind if isinstance(kind, str) else None,
                   mode=mode if isinstance(mode, int) else None,
                   permissions=perms if isinstance(perms, str) else None,
                   modified_ms=modified if isinstance(modified, int) else None)


@dataclass(frozen=True)
class FileEntry:
    """One entry of `files.list`."""

    name: str
    size: Optional[int]
    is_dir: bool
    #: As `FileStat.kind`.
    kind: Optional[str] = None
    #: As `FileStat.mode`, `FileStat.permissions` and `FileStat.modified_ms`.
    mode: Optional[int] = None
    permissions: Optional[str] = None
    modified_ms: Optional[int] = None

    @classmethod
    def from_wire(cls, v: Any) -> "FileEntry":
        d = _obj(v)
        s = FileStat.from_wire(d)
        return cls(name=str(d.get("name", "")), size=s.size, is_dir=s.is_dir, kind=s.kind, mode=s.mode,
                   permissions=s.permissions, modified_ms=s.modified_ms)


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
