"""Typed errors: one class per wire error code (docs/protocol.md, "Error codes"), all under
`AirlockError`, plus the local failures of a connection."""
from __future__ import annotations

import builtins
from enum import IntEnum
from typing import Any, Dict, Optional, Type


class ErrorCode(IntEnum):
    """The wire numbers (docs/protocol.md); never renumbered."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    TOOL_ERROR = -32001
    TIMEOUT = -32002
    MEMORY_LIMIT = -32003
    OUTPUT_LIMIT = -32004
    PROTOCOL_VIOLATION = -32005
    BUSY = -32006
    SANDBOX_REFUSED = -32007
    PROGRAM_TOO_LARGE = -32008
    TOOL_CALL_LIMIT = -32009
    EXECUTOR_CRASHED = -32010
    UNAUTHORIZED = -32011
    SHUTDOWN = -32012
    UNKNOWN_TOOL = -32013
    TOOL_DENIED = -32014
    PROGRAM_ERROR = -32015
    NOT_FOUND = -32016
    FILE_REFUSED = -32017
    OVER_CAPACITY = -32018


class AirlockError(Exception):
    """An error response from the broker (or a local failure with the same meaning)."""

    code: int = ErrorCode.INTERNAL_ERROR

    def __init__(self, message: str, code: Optional[int] = None, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.data = data

    @property
    def kind(self) -> Optional[str]:
        """`data.kind` when the broker sent one: the rule that refused (e.g.
        `SandboxKeySpecMismatch`, `SandboxOutputMissing`)."""
        kind = self.data.get("kind") if isinstance(self.data, dict) else None
        return kind if isinstance(kind, str) else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r})"


class ParseError(AirlockError):
    """-32700: the body was not UTF-8 JSON."""

    code = ErrorCode.PARSE_ERROR


class InvalidRequestError(AirlockError):
    """-32600: JSON, but not an acceptable JSON-RPC message."""

    code = ErrorCode.INVALID_REQUEST


class MethodNotFoundError(AirlockError):
    """-32601: the broker serves no such method (e.g. session methods on a server without sandboxes)."""

    code = ErrorCode.METHOD_NOT_FOUND


class InvalidParamsError(AirlockError):
    """-32602: a malformed request, a bad path, or a limit above a server ceiling."""

    code = ErrorCode.INVALID_PARAMS


class InternalError(AirlockError):
    """-32603: an unexpected failure inside the broker."""

    code = ErrorCode.INTERNAL_ERROR


class ToolError(AirlockError):
    """-32001: a host tool ran and failed. Raise it from a tool callback to answer with this message."""

    code = ErrorCode.TOOL_ERROR


class RunTimeoutError(AirlockError):
    """-32002: the run went over its wall-clock budget (found in `RunResult.error`)."""

    code = ErrorCode.TIMEOUT


class MemoryLimitError(AirlockError):
    """-32003: the run went over its memory ceiling."""

    code = ErrorCode.MEMORY_LIMIT


class OutputLimitError(AirlockError):
    """-32004: an output, tool response or disk cap was exceeded."""

    code = ErrorCode.OUTPUT_LIMIT


class ProtocolError(AirlockError):
    """-32005: a framing or message-shape violation (either side)."""

    code = ErrorCode.PROTOCOL_VIOLATION


class BusyError(AirlockError):
    """-32006: a run is already in flight on this connection (`execute`) or in this sandbox."""

    code = ErrorCode.BUSY


class SandboxRefusedError(AirlockError):
    """-32007: the policy or the host refused; `.kind` names the rule (e.g. `SandboxCapabilityDenied`)."""

    code = ErrorCode.SANDBOX_REFUSED


class ProgramTooLargeError(AirlockError):
    """-32008: the request does not fit one message under the broker's cap."""

    code = ErrorCode.PROGRAM_TOO_LARGE


class ToolCallLimitError(AirlockError):
    """-32009: the run made as many tool calls as it may."""

    code = ErrorCode.TOOL_CALL_LIMIT


class ExecutorCrashedError(AirlockError):
    """-32010: the executor died without a terminal response."""

    code = ErrorCode.EXECUTOR_CRASHED


class UnauthorizedError(AirlockError):
    """-32011: missing or wrong bearer token."""

    code = ErrorCode.UNAUTHORIZED


class ShutdownError(AirlockError):
    """-32012: the broker is shutting down."""

    code = ErrorCode.SHUTDOWN


class UnknownToolError(AirlockError):
    """-32013: no tool of that name is served."""

    code = ErrorCode.UNKNOWN_TOOL


class ToolDeniedError(AirlockError):
    """-32014: the tool exists, but policy denies this call."""

    code = ErrorCode.TOOL_DENIED


class ProgramError(AirlockError):
    """-32015: the program itself failed."""

    code = ErrorCode.PROGRAM_ERROR


class NotFoundError(AirlockError):
    """-32016: no such sandbox, run or file (never created, disposed, idled out, finished)."""

    code = ErrorCode.NOT_FOUND


class FileRefusedError(AirlockError):
    """-32017: a file operation was refused; nothing changed. `.kind` names the rule when sent."""

    code = ErrorCode.FILE_REFUSED


class OverCapacityError(AirlockError):
    """-32018: over a server ceiling (live sandboxes, run slots); retry later."""

    code = ErrorCode.OVER_CAPACITY


class ConnectionError(AirlockError, builtins.ConnectionError):
    """The broker could not be reached (refused, unreachable, timed out, bad URL, missing binary).

    Also a builtin `ConnectionError`, so generic network handlers catch it too."""

    code = ErrorCode.INTERNAL_ERROR


class ConnectionClosedError(ConnectionError):
    """The connection ended before the response (the request's outcome is unknown)."""


class ToolDenied(Exception):
    """Raise from a tool callback to answer `tool_denied` (policy says no) instead of a tool error."""


_CLASSES = (ParseError, InvalidRequestError, MethodNotFoundError, InvalidParamsError, InternalError,
            ToolError, RunTimeoutError, MemoryLimitError, OutputLimitError, ProtocolError, BusyError,
            SandboxRefusedError, ProgramTooLargeError, ToolCallLimitError, ExecutorCrashedError,
            UnauthorizedError, ShutdownError, UnknownToolError, ToolDeniedError, ProgramError,
            NotFoundError, FileRefusedError, OverCapacityError)
_BY_CODE: Dict[int, Type[AirlockError]] = {int(cls.code): cls for cls in _CLASSES}


def error_class(code: int) -> Type[AirlockError]:
    """The class for a wire code (`AirlockError` for a code this client does not know)."""
    return _BY_CODE.get(code, AirlockError)


def error_from_wire(err: Any) -> AirlockError:
    """Build the typed error for a JSON-RPC error object."""
    if not isinstance(err, dict):
        return ProtocolError(f"malformed error object: {err!r}")
    code = err.get("code")
    message = str(err.get("message", ""))
    if not isinstance(code, int) or isinstance(code, bool):
        return ProtocolError(f"malformed error code {code!r}: {message}", data=err.get("data"))
    return error_class(code)(message, code, err.get("data"))
