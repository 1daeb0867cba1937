"""The typed result of a run (the broker's RunResult, every member the wire sends)."""
from __future__ import annotations

import base64
import json as _json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union

from .rich import Rich, decode_bundle
from .spec import WireEnum


class RunStatus(WireEnum):
    """How a run ended. A `str` enum: `result.status == "completed"` holds too."""

    COMPLETED = "completed"
    ERROR = "error"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    DISK_LIMIT = "disk_limit"
    KILLED = "killed"
    PROTOCOL_ERROR = "protocol_error"
    REFUSED = "refused"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"  # a status this client does not know (a newer broker)

    @classmethod
    def parse(cls, v: Any) -> "RunStatus":
        try:
            return cls(v)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True)
class RunError:
    """Why a run did not complete: an error code from the protocol table and a message; when
    the program raised, the exception's class `name`, its text `value` and its `traceback`
    (lines as Python's `traceback.format` makes them: joined, the traceback on stderr)."""

    code: int
    message: str
    name: Optional[str] = None
    value: Optional[str] = None
    traceback: List[str] = field(default_factory=list)

    @classmethod
    def from_wire(cls, v: Mapping[str, Any]) -> "RunError":
        name, value, tb = v.get("name"), v.get("value"), v.get("traceback")
        return cls(int(v.get("code", 0)), str(v.get("message", "")),
                   name=str(name) if name is not None else None,
                   value=str(value) if value is not None else None,
                   traceback=[str(line) for line in tb] if isinstance(tb, list) else [])


@dataclass(frozen=True)
class EgressDecision:
    """One allow or deny of the egress proxy (allowlist egress)."""

    host: str
    port: int
    method: str
    decision: str
    reason: str
    message: str
    address: Optional[str]

    @classmethod
    def from_wire(cls, v: Any) -> "EgressDecision":
        d: Mapping[str, Any] = v if isinstance(v, dict) else {}
        addr = d.get("address")
        return cls(host=str(d.get("host", "")), port=int(d.get("port", 0)), method=str(d.get("method", "")),
                   decision=str(d.get("decision", "")), reason=str(d.get("reason", "")),
                   message=str(d.get("message", "")), address=str(addr) if addr is not None else None)


@dataclass(frozen=True)
class CellValue(Rich):
    """A stateful sandbox's cell value (its trailing expression), the main result: `repr` text,
    the value itself as JSON data when it is plain data (`has_json`; the `json` field), and its
    rich representations (`bundle`: media type → bytes, e.g. a DataFrame's text/html).
    `.text/.html/.markdown/.svg/.latex/.png/.jpeg` read them (None when absent); `formats()`
    has them all, text/plain (the repr) included. Note `json` is the value, not
    application/json: that one is `formats().get("application/json")`."""

    repr: str
    json: Any = None
    has_json: bool = False
    bundle: Dict[str, bytes] = field(default_factory=dict, compare=False)

    def formats(self) -> Mapping[str, bytes]:
        return {**self.bundle, "text/plain": self.repr.encode()}

    @classmethod
    def from_wire(cls, v: Any) -> Optional["CellValue"]:
        if not isinstance(v, dict):
            return None
        return cls(repr=str(v.get("repr", "")), json=v.get("json"), has_json="json" in v,
                   bundle=decode_bundle(v.get("bundle")))


@dataclass(frozen=True)
class DisplayItem(Rich):
    """Rich output of a cell (`display()`, a matplotlib figure), as a notebook's display_data:
    its richest representation (`mime`, `data`) and every one it has (`formats()`), read with
    `.text/.html/.markdown/.svg/.latex/.json/.png/.jpeg` (None when absent)."""

    mime: str
    data: bytes
    bundle: Dict[str, bytes] = field(default_factory=dict, compare=False)

    def formats(self) -> Mapping[str, bytes]:
        return {**self.bundle, self.mime: self.data}

    @classmethod
    def from_wire(cls, v: Any) -> "DisplayItem":
        d: Mapping[str, Any] = v if isinstance(v, dict) else {}
        return cls(mime=str(d.get("mime", "")), data=base64.b64decode(str(d.get("data", ""))),
                   bundle=decode_bundle(d.get("bundle")))


#: One rich result of a run: a displayed object or the cell's value.
Result = Union[DisplayItem, CellValue]


def _b64(text: str) -> bytes:
    """Decode a stream sent as base64; a stream cut to fit the message keeps its whole quanta."""
    return base64.b64decode(text[: len(text) // 4 * 4])


def _opt_int(v: Any) -> Optional[int]:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@dataclass(frozen=True)
class RunResult:
    """Everything the orchestrator learns about a finished run. `raw` is the result object as
    received, for members a newer broker adds."""

    status: RunStatus
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
    warm: bool = False
    #: How the run's process came to be: "exec", "zygote", "pool" or "kernel".
    via: str = "exec"
    #: How long the run waited for a run slot before it started (counted in its timeout).
    queued_ms: float = 0.0
    egress: List[EgressDecision] = field(default_factory=list)
    sandbox_id: Optional[str] = None
    output_dropped_bytes: Optional[int] = None
    value: Optional[CellValue] = None
    display: List[DisplayItem] = field(default_factory=list)
    display_dropped: int = 0
    kernel_restarted: bool = False
    #: The exact bytes of each stream (up to its cap), when the run asked for them
    #: (`exact_output=True`); `stdout`/`stderr` are then these decoded, invalid UTF-8 replaced.
    stdout_data: Optional[bytes] = None
    stderr_data: Optional[bytes] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """True when the program ran to the end and exited 0."""
        return self.status == RunStatus.COMPLETED

    @property
    def results(self) -> List[Result]:
        """Every rich result in order: each displayed object, then the cell's value."""
        out: List[Result] = list(self.display)
        if self.value is not None:
            out.append(self.value)
        return out

    # The main result's representations (the cell's value's; None when it has none).
    @property
    def text(self) -> Optional[str]:
        return self.value.text if self.value is not None else None

    @property
    def html(self) -> Optional[str]:
        return self.value.html if self.value is not None else None

    @property
    def markdown(self) -> Optional[str]:
        return self.value.markdown if self.value is not None else None

    @property
    def svg(self) -> Optional[str]:
        return self.value.svg if self.value is not None else None

    @property
    def latex(self) -> Optional[str]:
        return self.value.latex if self.value is not None else None

    @property
    def json(self) -> Any:
        """The main result's application/json, parsed (the value itself is `value.json`)."""
        data = self.value.formats().get("application/json") if self.value is not None else None
        return _json.loads(data) if data is not None else None

    @property
    def png(self) -> Optional[bytes]:
        return self.value.png if self.value is not None else None

    @property
    def jpeg(self) -> Optional[bytes]:
        return self.value.jpeg if self.value is not None else None

    @classmethod
    def from_wire(cls, v: Any) -> "RunResult":
        if not isinstance(v, dict):
            raise ValueError(f"run result is not an object: {v!r}")
        err = v.get("error")
        sid = v.get("sandbox_id")
        out, err_text = str(v.get("stdout", "")), str(v.get("stderr", ""))
        out_data = err_data = None
        if v.get("output_encoding") == "base64":
            out_data, err_data = _b64(out), _b64(err_text)
            out, err_text = out_data.decode("utf-8", "replace"), err_data.decode("utf-8", "replace")
        return cls(
            status=RunStatus.parse(v.get("status")),
            stdout=out,
            stderr=err_text,
            exit_code=_opt_int(v.get("exit_code")),
            signal=_opt_int(v.get("signal")),
            error=RunError.from_wire(err) if isinstance(err, dict) else None,
            stdout_truncated=bool(v.get("stdout_truncated", False)),
            stderr_truncated=bool(v.get("stderr_truncated", False)),
            stdout_bytes=int(v.get("stdout_bytes", 0)),
            stderr_bytes=int(v.get("stderr_bytes", 0)),
            wall_time_ms=float(v.get("wall_time_ms", 0.0)),
            peak_rss_bytes=int(v.get("peak_rss_bytes", 0)),
            tool_calls=int(v.get("tool_calls", 0)),
            run_id=str(v.get("run_id", "")),
            enforcement=[str(e) for e in v.get("enforcement") or []],
            warm=bool(v.get("warm", False)),
            via=str(v.get("via", "exec")),
            queued_ms=float(v.get("queued_ms", 0.0)),
            egress=[EgressDecision.from_wire(d) for d in v.get("egress") or []],
            sandbox_id=str(sid) if sid is not None else None,
            output_dropped_bytes=_opt_int(v.get("output_dropped_bytes")),
            value=CellValue.from_wire(v.get("value")),
            display=[DisplayItem.from_wire(d) for d in v.get("display") or []],
            display_dropped=int(v.get("display_dropped", 0)),
            kernel_restarted=bool(v.get("kernel_restarted", False)),
            stdout_data=out_data,
            stderr_data=err_data,
            raw=dict(v),
        )
