"""A smolagents executor whose state lives in an airlock sandbox (`pip install 'airlock-ai[smolagents]'`).

`CodeAgent(tools=..., model=..., executor=AirlockExecutor(client))` runs every code action of
the agent as a cell of one stateful sandbox: variables, imports and functions persist from one
step to the next in the sandbox's own interpreter, with no state replayed through glue. The
agent's tools run host-side: in the sandbox each is a function that calls the host through
airlock's `call_tool` channel, where this executor invokes the real smolagents tool.
`final_answer(...)` is native: the answer goes to the host as a tool call and the cell stops.
The value of a code action's last expression is its output, as in smolagents' own executor.

Figures come back to the model: pass `step_callbacks=[executor.show_figures]` to the agent and
every PNG a step displayed (matplotlib figures left open, `display(...)`) is attached to that
step's observation as an image, which the model sees on its next call.

The executor holds one sandbox per agent; `cleanup()` (or `agent.cleanup()`) disposes it.
"""
from __future__ import annotations

import json
import threading
from typing import Any, Dict, List, Mapping, Optional

try:
    from smolagents.local_python_executor import CodeOutput, PythonExecutor
    from smolagents.monitoring import AgentLogger, LogLevel
    from smolagents.tools import Tool as SmolTool
    from smolagents.utils import AgentError
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError("airlock_client.adapters.smolagents needs smolagents: "
                      "pip install 'airlock-ai[smolagents]'") from e

from ..result import RunResult
from ..spec import Limits, Tool
from ..sync import SyncClient, SyncSandbox

__all__ = ["AirlockExecutor"]

#: The schema every tool is declared with: positional and keyword arguments, as JSON.
_CALL_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"args": {"type": "array"}, "kwargs": {"type": "object"}},
    "additionalProperties": False,
}
_ANSWER_SCHEMA: Mapping[str, Any] = {
    "type": "object", "properties": {"answer": {}}, "required": ["answer"], "additionalProperties": False,
}

#: Defines, in the sandbox, one function per host tool and the native `final_answer`.
_PRELUDE = '''
class FinalAnswerException(BaseException):
    """Raised by final_answer() to end the code action (not an Exception: `except Exception` keeps it)."""

def _airlock_tool(name, doc):
    def tool(*args, **kwargs):
        return call_tool(name, {"args": list(args), "kwargs": kwargs})
    tool.__name__ = name
    tool.__doc__ = doc
    return tool

def final_answer(answer):
    try:
        call_tool("final_answer", {"answer": answer})
    except TypeError:
        call_tool("final_answer", {"answer": repr(answer)})
    raise FinalAnswerException()
'''


class AirlockExecutor(PythonExecutor):
    """A smolagents `PythonExecutor` over one stateful airlock sandbox.

    `client`: a connected `SyncClient`. `limits`: each code action's limits (its `timeout_s`
    bounds one step). `max_print_outputs_length`: logs longer than this are cut for the model.
    """

    def __init__(self, client: SyncClient, *, limits: Optional[Limits] = None,
                 max_print_outputs_length: int = 50_000) -> None:
        self._client = client
        self._limits = limits
        self._max_logs = max_print_outputs_length
        self._sandbox: Optional[SyncSandbox] = None
        self._tool_names: List[str] = []
        self._pending: Dict[str, Any] = {}
        self._answer: List[Any] = []
        self._figures: List[bytes] = []
        self._lock = threading.Lock()
        self.logger = AgentLogger(level=LogLevel.OFF)

    @property
    def sandbox(self) -> Optional[SyncSandbox]:
        """The sandbox the agent's state lives in (None before the first run)."""
        return self._sandbox

    def send_tools(self, tools: Dict[str, Any]) -> None:
        names = sorted(n for n in tools if n != "final_answer")
        if self._sandbox is not None and names != self._tool_names:
            self.cleanup()  # a different tool set needs a sandbox declared with it
        if self._sandbox is None:
            self._sandbox = self._create(tools, names)
            self._tool_names = names
        defs = "".join(f"{n} = _airlock_tool({n!r}, {_doc(tools[n])!r})\n" for n in names)
        self._run_or_raise(_PRELUDE + defs)
        if self._pending:
            variables, self._pending = self._pending, {}
            self.send_variables(variables)

    def send_variables(self, variables: Dict[str, Any]) -> None:
        if not variables:
            return
        if self._sandbox is None:
            self._pending.update(variables)
            return
        try:
            payload = json.dumps(variables)
        except (TypeError, ValueError) as e:
            raise AgentError(f"variables for the sandbox must be JSON data: {e}", self.logger) from e
        self._run_or_raise(f"import json as _json\nglobals().update(_json.loads({payload!r}))\ndel _json")

    def __call__(self, code_action: str) -> CodeOutput:
        if self._sandbox is None:
            self.send_tools({})
        with self._lock:
            self._answer.clear()
        result = self._run(code_action)
        self._figures = [d.data for d in result.display if d.mime in ("image/png", "image/jpeg")]
        logs = _logs(result, self._max_logs)
        with self._lock:
            answered = list(self._answer)
        if answered:
            return CodeOutput(output=answered[0], logs=logs, is_final_answer=True)
        if not result.ok:
            detail = result.stderr.strip() or (result.error.message if result.error else result.status.value)
            lost = ("\n(the sandbox's Python state was lost: variables and imports are gone)"
                    if result.kernel_restarted else "")
            raise AgentError(f"{logs}\nExecuting code yielded an error:\n{detail}{lost}", self.logger)
        output: Any = None
        if result.value is not None:
            output = result.value.json if result.value.has_json else result.value.repr
        return CodeOutput(output=output, logs=logs, is_final_answer=False)

    def show_figures(self, memory_step: Any, agent: Any = None) -> None:
        """A step callback: attach the images the step displayed to its observation, so the
        model sees them (`CodeAgent(..., step_callbacks=[executor.show_figures])`)."""
        figures, self._figures = self._figures, []
        if not figures or not hasattr(memory_step, "observations_images"):
            return
        from io import BytesIO

        from PIL import Image

        images = [Image.open(BytesIO(data)) for data in figures]
        memory_step.observations_images = list(memory_step.observations_images or []) + images

    def cleanup(self) -> None:
        """Dispose the sandbox (its interpreter and files)."""
        sb, self._sandbox = self._sandbox, None
        if sb is not None:
            sb.dispose()

    def _create(self, tools: Dict[str, Any], names: List[str]) -> SyncSandbox:
        declared = [Tool.define(self._host_tool(tools[n]), schema=_CALL_SCHEMA, name=n,
                                description=_doc(tools[n])[:1000]) for n in names]
        declared.append(Tool.define(self._final_answer, schema=_ANSWER_SCHEMA, name="final_answer",
                                    description="The agent's final answer."))
        return self._client.sandbox(stateful=True, tools=declared, limits=self._limits)

    def _host_tool(self, tool: Any) -> Any:
        def call(args: Optional[List[Any]] = None, kwargs: Optional[Dict[str, Any]] = None) -> Any:
            value = tool(*(args or []), **(kwargs or {}))
            try:
                json.dumps(value)
                return value
            except (TypeError, ValueError):
                return str(value)
        return call

    def _final_answer(self, answer: Any) -> None:
        with self._lock:
            self._answer.append(answer)

    def _run(self, code: str) -> RunResult:
        assert self._sandbox is not None
        return self._sandbox.run_code(code)

    def _run_or_raise(self, code: str) -> None:
        r = self._run(code)
        if not r.ok:
            raise AgentError(f"setting up the sandbox failed: {r.stderr or r.status.value}", self.logger)


def _doc(tool: Any) -> str:
    if isinstance(tool, SmolTool):
        return str(tool.description)
    return str(getattr(tool, "__doc__", "") or "")


def _logs(result: RunResult, limit: int) -> str:
    text = result.stdout
    if len(text) > limit:
        text = text[:limit] + f"\n[output cut at {limit} characters of {len(result.stdout)}]"
    return text
