"""LangChain tools over an airlock sandbox (`pip install 'airlock-ai[langchain]'`).

`AirlockPythonTool` runs Python in one sandbox kept across calls (files persist between calls;
each call is a fresh process). `AirlockToolkit` adds `write_file`, `read_file` and
`list_files`. Every tool answers in LangChain's `content_and_artifact` form: the model sees one
short text (a run's stdout and stderr once each), or, for an image read with `read_file`, an
image content block; the artifact keeps the machine detail (the `RunResult`, the file's bytes)
out of the model's context.

Give the tools a `SyncSandbox` to call them with `invoke` and `ainvoke`, or an async `Sandbox`
for `ainvoke` only. The sandbox stays yours: the tools never dispose of it.
"""
from __future__ import annotations

import base64
from typing import Any, List, Optional, Tuple, Type, Union

try:
    from langchain_core.messages.content import create_image_block, create_text_block
    from langchain_core.tools import BaseTool, BaseToolkit, ToolException
    from pydantic import BaseModel, ConfigDict, Field
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError("airlock_client.adapters.langchain needs langchain-core: "
                      "pip install 'airlock-ai[langchain]'") from e

from .._runs import OutputCallback
from ..errors import AirlockError, NotFoundError
from ..models import FileEntry, FileStat
from ..result import RunResult
from ._bridge import AnySandbox, SandboxBridge
from ._text import DEFAULT_MAX_CHARS, as_text, clip, describe_run, image_media_type

__all__ = ["AirlockListFilesTool", "AirlockPythonTool", "AirlockReadFileTool", "AirlockToolkit",
           "AirlockWriteFileTool"]

Content = Union[str, List[Any]]


def _refusal(e: AirlockError) -> ToolException:
    return ToolException(f"{type(e).__name__}: {e.message}")


class _SandboxTool(BaseTool):
    """What the airlock tools share: the sandbox, the answer form, errors shown to the model."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    sandbox: AnySandbox
    """The sandbox the tool works in (a `SyncSandbox` or an async `Sandbox`)."""
    max_output_chars: int = DEFAULT_MAX_CHARS
    """Most characters of text the model is shown per call."""
    response_format: Any = "content_and_artifact"
    handle_tool_error: Any = True  # an airlock refusal reaches the model as the tool's answer

    @property
    def _bridge(self) -> SandboxBridge:
        return SandboxBridge(self.sandbox)


class RunPythonInput(BaseModel):
    code: str = Field(description="Python source to run; print what you need to see.")
    timeout_s: Optional[float] = Field(default=None, description="Seconds before the run is stopped.")


class AirlockPythonTool(_SandboxTool):
    """Runs Python in the sandbox. The answer is the run's stdout, then its stderr, then how it
    ended if it did not complete; the artifact is the `RunResult`."""

    name: str = "run_python"
    description: str = (
        "Run Python 3 code in an isolated sandbox with no network. The working directory /work "
        "keeps its files across calls, but each call is a fresh process: variables do not "
        "persist, so save what you need to files. Print the values you want to see.")
    args_schema: Any = RunPythonInput
    timeout: Optional[float] = None
    """Each run's time limit when the model gives none (None: the sandbox's own)."""
    on_stdout: Optional[OutputCallback] = None
    """Receives stdout as the run produces it (on the client's loop thread: keep it quick)."""
    on_stderr: Optional[OutputCallback] = None

    def _answer(self, result: RunResult) -> Tuple[str, RunResult]:
        return describe_run(result, max_chars=self.max_output_chars), result

    def _run(self, code: str, timeout_s: Optional[float] = None, **_: Any) -> Tuple[str, RunResult]:
        try:
            return self._answer(self._bridge.run_code(code, timeout_s or self.timeout, self.on_stdout,
                                                      self.on_stderr))
        except AirlockError as e:
            raise _refusal(e) from e

    async def _arun(self, code: str, timeout_s: Optional[float] = None, **_: Any) -> Tuple[str, RunResult]:
        try:
            return self._answer(await self._bridge.arun_code(code, timeout_s or self.timeout, self.on_stdout,
                                                             self.on_stderr))
        except AirlockError as e:
            raise _refusal(e) from e


class WriteFileInput(BaseModel):
    path: str = Field(description="Path relative to /work; missing directories are created.")
    content: str = Field(description="The file's whole text.")


class AirlockWriteFileTool(_SandboxTool):
    """Creates or replaces a text file in the sandbox's /work; the artifact is its `FileStat`."""

    name: str = "write_file"
    description: str = "Create or replace a text file in the sandbox (path relative to /work)."
    args_schema: Any = WriteFileInput

    def _run(self, path: str, content: str, **_: Any) -> Tuple[str, FileStat]:
        try:
            st = self._bridge.write(path, content)
        except AirlockError as e:
            raise _refusal(e) from e
        return f"wrote {st.size} bytes to {path}", st

    async def _arun(self, path: str, content: str, **_: Any) -> Tuple[str, FileStat]:
        try:
            st = await self._bridge.awrite(path, content)
        except AirlockError as e:
            raise _refusal(e) from e
        return f"wrote {st.size} bytes to {path}", st


class ReadFileInput(BaseModel):
    path: str = Field(description="Path relative to /work.")


class AirlockReadFileTool(_SandboxTool):
    """Reads a file from the sandbox: text comes back as text, an image (PNG, JPEG, GIF, WebP)
    as an image content block the model can see, other bytes as a one-line description. The
    artifact is the file's bytes."""

    name: str = "read_file"
    description: str = ("Read a file from the sandbox (path relative to /work). Text files come back as "
                        "text; images (PNG, JPEG, GIF, WebP) come back as an image you can look at.")
    args_schema: Any = ReadFileInput

    def _answer(self, path: str, data: bytes) -> Tuple[Content, bytes]:
        media_type = image_media_type(data)
        if media_type is not None:
            return [create_text_block(f"{path}: {media_type}, {len(data)} bytes"),
                    create_image_block(base64=base64.b64encode(data).decode("ascii"), mime_type=media_type)], data
        text = as_text(data)
        if text is not None:
            return clip(text, self.max_output_chars), data
        return f"{path}: {len(data)} bytes of binary data (not text, not an image)", data

    def _run(self, path: str, **_: Any) -> Tuple[Content, bytes]:
        try:
            return self._answer(path, self._bridge.read(path))
        except NotFoundError as e:
            raise ToolException(f"no such file: {path}") from e
        except AirlockError as e:
            raise _refusal(e) from e

    async def _arun(self, path: str, **_: Any) -> Tuple[Content, bytes]:
        try:
            return self._answer(path, await self._bridge.aread(path))
        except NotFoundError as e:
            raise ToolException(f"no such file: {path}") from e
        except AirlockError as e:
            raise _refusal(e) from e


class ListFilesInput(BaseModel):
    path: Optional[str] = Field(default=None, description="Directory relative to /work (default: /work).")


def _listing(entries: List[FileEntry]) -> str:
    lines = [f"{e.name}/" if e.is_dir else f"{e.name}\t{e.size if e.size is not None else '?'} bytes"
             for e in entries]
    return "\n".join(lines) if lines else "(empty directory)"


class AirlockListFilesTool(_SandboxTool):
    """Lists a directory of the sandbox: one entry a line, directories ending in `/`."""

    name: str = "list_files"
    description: str = "List a directory of the sandbox (relative to /work; default /work itself)."
    args_schema: Any = ListFilesInput

    def _run(self, path: Optional[str] = None, **_: Any) -> Tuple[str, List[FileEntry]]:
        try:
            entries = self._bridge.list(path or None)
        except AirlockError as e:
            raise _refusal(e) from e
        return clip(_listing(entries), self.max_output_chars), entries

    async def _arun(self, path: Optional[str] = None, **_: Any) -> Tuple[str, List[FileEntry]]:
        try:
            entries = await self._bridge.alist(path or None)
        except AirlockError as e:
            raise _refusal(e) from e
        return clip(_listing(entries), self.max_output_chars), entries


class AirlockToolkit(BaseToolkit):
    """`run_python`, `write_file`, `read_file` and `list_files` over one sandbox."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    sandbox: AnySandbox
    timeout: Optional[float] = None
    """`run_python`'s time limit when the model gives none."""
    max_output_chars: int = DEFAULT_MAX_CHARS
    on_stdout: Optional[OutputCallback] = None
    """`run_python`'s streamed stdout, as produced."""
    on_stderr: Optional[OutputCallback] = None

    def get_tools(self) -> List[BaseTool]:
        common: dict[str, Any] = {"sandbox": self.sandbox, "max_output_chars": self.max_output_chars}
        tools: List[Type[_SandboxTool]] = [AirlockWriteFileTool, AirlockReadFileTool, AirlockListFilesTool]
        python = AirlockPythonTool(timeout=self.timeout, on_stdout=self.on_stdout, on_stderr=self.on_stderr, **common)
        return [python, *(t(**common) for t in tools)]
