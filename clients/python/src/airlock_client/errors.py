"""Typed errors: one class per airlock error code an orchestrator can receive."""
from __future__ import annotations

from typing import Any, Optional


class ErrorCode:
    """The wire numbers (see docs/protocol.md); never renumbered."""

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


class AirlockError(Exception):
    """An error response from the broker (or a local failure with the same meaning)."""

    code: int = ErrorCode.INTERNAL_ERROR

    def __init__(self, message: str, code: Optional[int] = None, data: Any = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.data = data

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r})"


class BusyError(AirlockError):
    """A run is already in flight on this connection."""

    code = ErrorCode.BUSY


class ProgramTooLargeError(AirlockError):
    """The program does not fit one message under the broker's cap."""

    code = ErrorCode.PROGRAM_TOO_LARGE


class UnauthorizedError(AirlockError):
    """Missing or wrong bearer token."""

    code = ErrorCode.UNAUTHORIZED


class InvalidParamsError(AirlockError):
    """The execute request was malformed or asked above a server ceiling."""

    code = ErrorCode.INVALID_PARAMS


class ShutdownError(AirlockError):
    """The broker is shutting down; the run never started."""

    code = ErrorCode.SHUTDOWN


class MethodNotFoundError(AirlockError):
    """The broker serves no such method."""

    code = ErrorCode.METHOD_NOT_FOUND


class ProtocolError(AirlockError):
    """A framing or message-shape violation (either side)."""

    code = ErrorCode.PROTOCOL_VIOLATION


class ConnectionClosedError(AirlockError):
    """The connection ended before the terminal response."""

    code = ErrorCode.INTERNAL_ERROR


class ToolDenied(Exception):
    """Raise from a tool callback to answer `tool_denied` (policy says no) instead of a tool error."""


_BY_CODE = {
    cls.code: cls
    for cls in (BusyError, ProgramTooLargeError, UnauthorizedError, InvalidParamsError, ShutdownError,
                MethodNotFoundError, ProtocolError)
}
_BY_CODE[ErrorCode.PARSE_ERROR] = ProtocolError
_BY_CODE[ErrorCode.INVALID_REQUEST] = ProtocolError


def error_from_wire(err: Any) -> AirlockError:
    """Build the typed error for a JSON-RPC error object."""
    if not isinstance(err, dict):
        return AirlockError(f"malformed error object: {err!r}")
    code = err.get("code")
    message = str(err.get("message", ""))
    cls = _BY_CODE.get(code, AirlockError)
    return cls(message, code if isinstance(code, int) else None, err.get("data"))
