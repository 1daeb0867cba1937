"""A Microsoft Agent Framework agent whose sandboxed tool runs on airlock, through maf-sandbox.

    pip install -e './clients/python[maf]'      # Python >= 3.12; pulls maf-sandbox
    AIRLOCK_BIN=target/debug/airlock python examples/maf_agent.py

Offline: a scripted chat client stands in for the model. It asks for the `run_python` tool twice
(the second call reads a file the first wrote: one conversation, one sandbox), then answers with
what the tool returned. The tool is maf-sandbox's `sandboxed_tool`: the router (floor opted down
to the rung airlock probed on this machine) acquires the conversation's airlock sandbox, keyed
by the host's scope and thread (never by the model), and the program runs through the backend's
program channel, whose host tool (`lookup`) travels on airlock's own `call_tool`.

Prints the agent's final answer; exits non-zero if the transcript is not what the script expects.
"""
from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from agent_framework import Agent, BaseChatClient, ChatResponse, Content, FunctionInvocationLayer, Message
from maf_sandbox import (Capability, Cleanup, HostToolRegistry, HostToolRun, IsolationScope, ListedFile, ProgramRequirements,
                         SandboxRouter, SandboxSpec, TransferLimits, sandbox_tool)
from maf_sandbox.maf import SandboxToolSession, make_caller_context, sandboxed_tool

from airlock_maf import AirlockSandboxBackend

LIMITS = TransferLimits(8 * 1024 * 1024, 16 * 1024 * 1024, 16)


@sandbox_tool(source=None, sink=None, identity=None)
def lookup(city: str) -> str:
    """Today's weather for a city (a host function the sandboxed program may call)."""
    return {"Paris": "sunny", "Oslo": "snow"}.get(city, "unknown")


def registry() -> HostToolRegistry:
    tools = HostToolRegistry(response_limits=TransferLimits(4096, 16384, 8), max_host_tool_calls_per_run=8)
    tools.register(lookup)
    return tools


SPEC = SandboxSpec(
    kind="python",
    work_dir="/work/agent",
    requires=frozenset({Capability.RUN_CODE, Capability.FILES_IN, Capability.EXEC, Capability.HOST_TOOLS}),
    files_in=LIMITS,
    files_out=LIMITS,
    isolation_scope=IsolationScope.CONVERSATION,
    program=ProgramRequirements(max_program_bytes=64 * 1024),
    host_tools=registry().aggregate(),
)


def build(session: SandboxToolSession) -> Callable[..., Awaitable[str]]:
    async def run_python(code: str) -> str:
        """Run Python in the conversation's sandbox; `maf_host_tools.call("lookup", city=...)` is
        available. Files persist between calls; the output is what the program printed."""
        key = session.key()
        if isinstance(key, str):
            return key
        sandbox = await session.acquire(key)
        if isinstance(sandbox, str):
            return sandbox
        channel = session.program_channel(key, sandbox)
        assert SPEC.program is not None
        result = await channel.run(sandbox, code, requirements=SPEC.program, guest_call_path=".", timeout=30,
                                   policy=HostToolRun(registry()))
        return result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr else "")

    return run_python


class ScriptedChatClient(FunctionInvocationLayer[Any], BaseChatClient[Any]):
    """The model, offline: two tool calls, then an answer quoting the last tool result."""

    def __init__(self) -> None:
        super().__init__()
        self.turn = 0

    async def _reply(self, messages: Sequence[Message]) -> ChatResponse[Any]:
        self.turn += 1
        programs = [
            "import maf_host_tools as h\n"
            "open('report.txt', 'w').write('Paris: ' + h.call('lookup', city='Paris'))\nprint('written')",
            "print(open('report.txt').read())",
        ]
        if self.turn <= len(programs):
            call = Content.from_function_call(f"call-{self.turn}", "run_python",
                                              arguments={"code": programs[self.turn - 1]})
            return ChatResponse(messages=[Message(role="assistant", contents=[call])])
        results = [c for m in messages for c in m.contents if c.type == "function_result"]
        last = str(results[-1].result) if results else "(no tool result)"
        return ChatResponse(messages=[Message(role="assistant", contents=[f"The sandbox says: {last.strip()}"])])

    def _inner_get_response(self, *, messages: Sequence[Message], stream: bool, options: Mapping[str, Any],
                            **kwargs: Any) -> Any:
        if stream:
            raise NotImplementedError("this scripted client does not stream")
        return self._reply(messages)


async def no_files(_store: object) -> list[ListedFile]:
    return []


async def main(binary: str) -> str:
    backend = AirlockSandboxBackend(binary=binary)
    try:
        # Reuse across calls is the host's to allow (maf-sandbox disposes after every call by
        # default); RECLAIM keeps the conversation's sandbox and removes each call's own path.
        router = SandboxRouter([backend], min_isolation=backend.isolation, min_cleanup=Cleanup.RECLAIM,
                               program_channel_preference=("runtime", "exec"))
        context = make_caller_context(no_files, lambda: "example-tenant", lambda: "conversation-1")
        tools = sandboxed_tool(build, router=router, context=context, agent_id="analyst", spec=SPEC, name="run_python")
        agent = Agent(ScriptedChatClient(), instructions="Use run_python for anything computed.", tools=tools)
        try:
            response = await agent.run("What is the weather in Paris, according to the sandbox?")
        finally:
            await router.dispose_scope("example-tenant", "conversation-1")
        return response.text
    finally:
        backend.close()


if __name__ == "__main__":
    answer = asyncio.run(main(os.environ.get("AIRLOCK_BIN", "airlock")))
    print(answer)
    sys.exit(0 if "Paris: sunny" in answer else 1)
