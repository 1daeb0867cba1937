"""Orchestrator-side SDK for the airlock broker (`airlock serve`).

One-shot runs (`execute`) and sandboxes that persist across runs (`client.sandbox(...)`): run
code and commands, move files in and out, stream output, cancel, collect declared outputs,
answer the program's `call_tool` requests with Python functions. Async (`AsyncClient`,
`StdioClient`, `Sandbox`) and blocking twins (`SyncClient`, `SyncSandbox`). Every refusal is a
typed `AirlockError` subclass, one per wire error code. Reference: docs/sdk.md.
"""
from ._binary import find_airlock_bin
from ._files import CHUNK_BYTES, Files
from ._process import (SIGNALS, CommandResult, Commands, DataCallback, Process, ProcessInfo,
                       RecentOutput)
from ._process_sync import SyncCommands, SyncProcess, SyncPty, SyncTerminal
from ._pty import DEFAULT_TERMINAL_ENV, Pty, Terminal
from ._route import sandbox_node, sandbox_url
from ._runs import OutputCallback, ToolFn
from ._session import MAX_MESSAGE_BYTES
from .client import AsyncClient, BaseClient, SnapshotLike, StdioClient
from .errors import (AirlockError, BusyError, ConnectionClosedError, ConnectionError, ErrorCode,
                     ExecutorCrashedError, FileRefusedError, InternalError, InvalidParamsError,
                     InvalidRequestError, MemoryLimitError, MethodNotFoundError, NotFoundError,
                     OutputLimitError, OverCapacityError, ParseError, ProgramError, ProgramTooLargeError,
                     ProtocolError, RunTimeoutError, SandboxRefusedError, ShutdownError, ToolCallLimitError,
                     ToolDenied, ToolDeniedError, ToolError, UnauthorizedError, UnknownToolError, error_class)
from .models import (Artifact, CollectedOutputs, Disposal, FileEntry, FileStat, KernelReport, SandboxInfo,
                     SandboxRecord, SandboxState, SnapshotInfo, SnapshotRecord)
from .result import CellValue, DisplayItem, EgressDecision, Result, RunError, RunResult, RunStatus
from .rich import MIME_TYPES, ErrorCallback, ResultCallback, Rich
from .sandbox import Sandbox
from .spec import (DEFAULT_REQUIRES, Capability, DeclaredOutput, Egress, Identity, IdleAction, Isolation,
                   IsolationScope, Limits, SandboxKey, Tool, ToolDeclaration, TransferLimits)
from .sync import Client, SyncClient, SyncFiles, SyncSandbox

__all__ = [
    "AirlockError", "Artifact", "AsyncClient", "BaseClient", "BusyError", "CHUNK_BYTES", "Capability", "CellValue",
    "Client",
    "CollectedOutputs", "ConnectionClosedError", "ConnectionError", "DEFAULT_REQUIRES", "DeclaredOutput",
    "Disposal", "DisplayItem", "EgressDecision", "Egress", "ErrorCode", "ExecutorCrashedError", "FileEntry",
    "FileRefusedError", "FileStat", "Files", "Identity", "InternalError", "InvalidParamsError",
    "InvalidRequestError", "Isolation", "IsolationScope", "Limits", "MAX_MESSAGE_BYTES", "MemoryLimitError",
    "MethodNotFoundError", "NotFoundError", "OutputCallback", "OutputLimitError", "OverCapacityError",
    "ParseError", "ProgramError", "ProgramTooLargeError", "ProtocolError", "RunError", "RunResult",
    "RunStatus", "RunTimeoutError", "Sandbox", "SandboxInfo", "SandboxKey", "SandboxRecord", "SandboxRefusedError",
    "ShutdownError", "StdioClient", "SyncClient", "SyncFiles", "SyncSandbox", "Tool", "ToolCallLimitError",
    "ToolDeclaration", "ToolDenied", "ToolDeniedError", "ToolError", "ToolFn", "TransferLimits",
    "UnauthorizedError", "UnknownToolError", "error_class", "find_airlock_bin",
    "sandbox_node", "sandbox_url",
    # background processes and terminals
    "CommandResult", "Commands", "DataCallback", "DEFAULT_TERMINAL_ENV", "Process", "ProcessInfo", "Pty",
    "RecentOutput", "SIGNALS", "SyncCommands", "SyncProcess", "SyncPty", "SyncTerminal", "Terminal",
    # rich results
    "ErrorCallback", "MIME_TYPES", "Result", "ResultCallback", "Rich",
    # snapshots, pause and fork
    "IdleAction", "KernelReport", "SandboxState", "SnapshotInfo", "SnapshotLike", "SnapshotRecord",
]
