"""`AirlockProgramChannel`: maf-sandbox's program channel over airlock's native `call_tool`.

maf-sandbox's own channel (`ExecProgramChannel` with `host_tool_calls_over_exec`) reaches host
tools through request and response files: it starts the program detached, returns from `exec`,
and polls. On airlock that cannot work, by design: every run is pid 1 of its own pid namespace
and nothing it started outlives it. So this channel runs the program with `sandbox.run_code` and
carries each host-tool call on airlock's own channel instead: the guest's `call_tool` becomes a
`call_tool` request on the wire, answered here by the run's live `HostToolPolicy` (maf-sandbox's
gates: resolution, declaration, arguments, call cap, response ceiling), and the answer goes back
on the same socket. No polling, no files, no process outliving its run.

The guest sees maf-sandbox's shared API: `import maf_host_tools as h; h.call(name, **args)`,
with `h.HostToolError` for a refusal. Every call travels as one airlock tool, `maf_host_tool`,
so that even a name the surface does not carry reaches the policy (which refuses it and records
the refusal) rather than being answered `unknown_tool` by the broker unseen.
"""
from __future__ import annotations

import asyncio
import json
import posixpath
import time
from dataclasses import dataclass
from typing import Any, Literal

from airlock_client import Tool, ToolDenied
from maf_sandbox import (Capability, ExecResult, HostToolCallResult, HostToolPolicy, ProgramRequirements,
                         Sandbox, SandboxLimits, SandboxSpec, SandboxTransferLimitsNotPermitted, TransferLimits)
from maf_sandbox._host_tools import BoundedHostToolPolicy

from . import _runs
from .sandbox import AirlockSandbox, ToolSlot

#: The one airlock tool every host-tool call travels as.
TRANSPORT_TOOL = "maf_host_tool"
#: Programs at most this long travel inside the run request; longer ones are staged as a file.
INLINE_PROGRAM_BYTES = 256 * 1024

_PROFILE_PROBE = (
    "import sys,json,math,re,types\n"
    "sys.exit(1) if sys.version_info < (3,11) or sys.implementation.name != 'cpython' else None\n"
    "print('maf-python-portable-v1')\n"
)

# The guest side: a `maf_host_tools` module over airlock's `call_tool`, then the program itself,
# compiled under its own name so its tracebacks and line numbers are its own.
_PRELUDE = '''\
import os as _os, sys as _sys, types as _types
_m = _types.ModuleType("maf_host_tools")
exec(compile(''\'
class HostToolError(RuntimeError):
    """A refusal from the host, or the host never answering. The sentence is the message."""

def call(name, **arguments):
    """Call the host tool `name` with keyword `arguments` and return its value."""
    try:
        return call_tool({tool!r}, {{"name": name, "arguments": arguments}})
    except Exception as e:
        raise HostToolError(getattr(e, "message", None) or str(e)) from None
''\', "maf_host_tools.py", "exec"), _m.__dict__)
_sys.modules["maf_host_tools"] = _m
del _m
_os.makedirs({cwd!r}, exist_ok=True)
_os.chdir({cwd!r})
_sys.argv = ["program.py"]
'''


def guest_program(code_or_path: str, cwd: str, *, staged: bool) -> str:
    """The run's source: the prelude, then the program (inline, or read from its staged file)."""
    prelude = _PRELUDE.format(tool=TRANSPORT_TOOL, cwd=cwd)
    source = f"open({code_or_path!r}, encoding='utf-8').read()" if staged else repr(code_or_path)
    return prelude + f"exec(compile({source}, 'program.py', 'exec'), {{'__name__': '__main__'}})\n"


@dataclass(frozen=True)
class AirlockProgramChannel:
    """CPython 3.11+ (the guest's `python3`), host tools over airlock's `call_tool`."""

    name: str = "airlock-call-tool"
    mode: Literal["exec", "runtime"] = "runtime"
    profiles: frozenset[str] = frozenset({"python-portable-v1"})
    host_tools: bool = True

    def required_capabilities(self, spec: SandboxSpec) -> frozenset[Capability]:
        return frozenset({Capability.RUN_CODE, Capability.FILES_IN})

    def transfer_limits(self, spec: SandboxSpec) -> SandboxLimits:
        """The spec's own caps, plus one staged program file when a program may be too long to
        travel inside the run request. Host-tool traffic moves no file at all."""
        if spec.program is None:
            raise SandboxTransferLimitsNotPermitted("a program channel requires program requirements")
        files_in = spec.files_in if Capability.FILES_IN in spec.requires else TransferLimits(0, 0, 0)
        files_out = spec.files_out if Capability.FILES_OUT in spec.requires else TransferLimits(0, 0, 0)
        program = spec.program.max_program_bytes
        if program <= INLINE_PROGRAM_BYTES:
            return SandboxLimits(files_in=files_in, files_out=files_out)
        staged = TransferLimits(max(files_in.max_bytes_per_file, program),
                                files_in.max_total_bytes + program, files_in.max_files + 1)
        return SandboxLimits(files_in=staged, files_out=files_out)

    def guest_working_directory(self, guest_call_path: str, *, host_tools: bool = False) -> str:
        return guest_call_path

    async def prepare(self, sandbox: Sandbox, requirements: ProgramRequirements) -> None:
        if requirements.profile not in self.profiles:
            raise ValueError("unsupported Python execution profile")
        result = await sandbox.run_code(_PROFILE_PROBE, timeout=30)
        if result.exit_code != 0 or result.stdout.strip() != "maf-python-portable-v1":
            raise ValueError("the guest does not satisfy python-portable-v1")

    async def run(self, sandbox: Sandbox, code: str, *, requirements: ProgramRequirements,
                  guest_call_path: str, timeout: float, policy: HostToolPolicy | None = None) -> ExecResult:
        try:
            if not isinstance(sandbox, AirlockSandbox):
                raise TypeError("the airlock program channel runs only in an airlock sandbox")
            if requirements.profile not in self.profiles:
                raise ValueError("unsupported Python execution profile")
            if len(code.encode("utf-8")) > requirements.max_program_bytes:
                raise ValueError("the program exceeds its declared byte limit")
            deadline = time.monotonic() + timeout
            bounded = None if policy is None else BoundedHostToolPolicy(
                policy, sandbox, deadline=deadline, timeout=requirements.host_tool_timeout_seconds)
            return await _run(sandbox, code, guest_call_path, deadline, bounded)
        finally:
            if policy is not None:
                policy.close()


async def _run(sandbox: AirlockSandbox, code: str, guest_call_path: str, deadline: float,
               policy: BoundedHostToolPolicy | None) -> ExecResult:
    cwd = sandbox._wd(guest_call_path)  # noqa: SLF001 - the channel belongs to this backend
    staged = len(code.encode("utf-8")) > INLINE_PROGRAM_BYTES
    if staged:
        await sandbox.write_file("program.py", code, working_directory=cwd)
    source = guest_program(posixpath.join(cwd, "program.py") if staged else code, cwd, staged=staged)
    caller = asyncio.get_running_loop()

    async def answer(name: str, arguments: dict[str, Any]) -> Any:
        if policy is None:
            raise ToolDenied("Error: no host tools are served to this program")
        published: list[HostToolCallResult] = []

        async def publish(result: HostToolCallResult) -> None:
            published.append(result)

        future = asyncio.run_coroutine_threadsafe(policy.call(name, arguments, publish=publish), caller)
        result = await asyncio.wrap_future(future)
        if result.refusal is not None:
            raise ToolDenied(result.refusal)
        return json.loads(result.value_json or "null")

    return await sandbox._on_loop(_program_run(sandbox, source, deadline, answer))  # noqa: SLF001


async def _program_run(sandbox: AirlockSandbox, source: str, deadline: float, answer: Any) -> ExecResult:
    instance = sandbox._i  # noqa: SLF001
    await _runs.queued(instance.run_lock, deadline)
    instance.slot.policy_call = answer
    try:
        result = await _runs.with_a_slot(
            lambda left: instance.wire.run_code(source, timeout=left, env=_runs.GUEST_ENV, exact_output=True),
            deadline)
    finally:
        instance.slot.policy_call = None
        instance.run_lock.release()
    return _runs.exec_result(result)


def transport_tool(slot: ToolSlot) -> Tool:
    """The `maf_host_tool` declaration, answered by whatever run of the sandbox is in flight.

    Its schema only shapes the envelope; what a call may do is the policy's to decide."""

    async def handler(name: object = None, arguments: object = None) -> Any:
        answer = slot.policy_call
        if answer is None:
            raise ToolDenied("Error: no program run of this sandbox serves host tools now")
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise ToolDenied("Error: a host-tool call names a tool and passes keyword arguments")
        return await answer(name, arguments)

    schema = {"type": "object", "required": ["name", "arguments"],
              "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
              "additionalProperties": False}
    return Tool.define(handler, schema=schema, name=TRANSPORT_TOOL,
                       description="maf-sandbox host-tool calls, gated host-side by the run's policy",
                       source="maf-host-tools", sink="maf-host-tools")
