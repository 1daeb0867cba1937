"""Orchestrator-side client for the airlock broker (`airlock serve`).

Connect, send a program, answer its `call_tool` requests with Python functions, get one
typed `RunResult` (or a typed `AirlockError` for a request refused before the run).
"""
from ._session import MAX_MESSAGE_BYTES
from .client import AsyncClient, Client, StdioClient
from .errors import (AirlockError, BusyError, ConnectionClosedError, ErrorCode, InvalidParamsError,
                     MethodNotFoundError, ProgramTooLargeError, ProtocolError, ShutdownError, ToolDenied,
                     UnauthorizedError)
from .result import RunError, RunResult

__all__ = [
    "AirlockError", "AsyncClient", "BusyError", "Client", "ConnectionClosedError", "ErrorCode",
    "InvalidParamsError", "MAX_MESSAGE_BYTES", "MethodNotFoundError", "ProgramTooLargeError",
    "ProtocolError", "RunError", "RunResult", "ShutdownError", "StdioClient", "ToolDenied",
    "UnauthorizedError",
]
