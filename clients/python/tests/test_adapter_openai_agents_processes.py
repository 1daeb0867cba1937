"""The OpenAI Agents adapter's interactive exec over airlock background processes
(`AirlockSandboxClientOptions(processes=True)`): the SDK's `exec_command` returns a session id
for a command still running, `write_stdin` types into a terminal, and a server started by
one call answers the next. Driven by the SDK's Runner and scripted model, against the real
binary."""
import asyncio
import re

try:
    from agents import RunConfig, Runner
    from agents.sandbox import SandboxAgent, SandboxRunConfig
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
except ImportError as e:  # fail, never skip: scripts/test.sh installs it
    raise ImportError("the OpenAI Agents SDK is missing: pip install 'airlock-ai[openai-agents]' "
                      "(scripts/test.sh installs it)") from e

from airlock_client import AsyncClient, Capability
from airlock_client.adapters.openai_agents import AirlockSandboxClient, AirlockSandboxClientOptions


def outputs(call):
    return {item["call_id"]: item["output"] for item in call.input
            if isinstance(item, dict) and item.get("type") == "function_call_output"}


def session_id(output):
    m = re.search(r"Process running with session ID (\d+)", output)
    assert m, output
    return int(m.group(1))


def test_exec_command_keeps_a_running_command_and_write_stdin_types_into_it(server):
    fetch = ("python3 -c \"import urllib.request as u; "
             "print(u.urlopen('http://127.0.0.1:8124/').status)\"")

    def type_into_c1(call):
        sid = session_id(outputs(call)["c1"])
        return [function_call("write_stdin", {"session_id": sid, "chars": "abc\n", "yield_time_ms": 5000},
                              call_id="c2")]

    async def main():
        async with await AsyncClient.connect(server.url, server.token) as client:
            options = AirlockSandboxClientOptions(processes=True)
            async with await AirlockSandboxClient(client).create(options=options) as session:
                inner = session._inner
                assert Capability.PROCESSES in inner.sandbox.info.requires and inner.supports_pty()
                model = ScriptedModel([
                    [function_call("exec_command", {"cmd": "echo started; read line; echo got:$line",
                                                    "tty": True, "yield_time_ms": 1000}, call_id="c1")],
                    ModelStep.respond(type_into_c1),
                    [function_call("exec_command", {"cmd": "python3 -u -m http.server 8124 --bind 127.0.0.1",
                                                    "yield_time_ms": 1500}, call_id="c3")],
                    [function_call("exec_command", {"cmd": fetch, "yield_time_ms": 10000}, call_id="c4")],
                    [assistant_message("done")],
                ])
                agent = SandboxAgent(name="dev", model=model, instructions="Work in the sandbox.")
                config = RunConfig(sandbox=SandboxRunConfig(session=session), tracing_disabled=True)
                result = await Runner.run(agent, "go", run_config=config)
                assert result.final_output == "done"
                model.assert_complete()
                assert {t.name for t in model.calls[0].tools} >= {"exec_command", "write_stdin"}
                first = outputs(model.calls[1])["c1"]
                assert "started" in first and "Process exited" not in first, first
                typed = outputs(model.calls[2])["c2"]
                assert "got:abc" in typed and "Process exited with code 0" in typed, typed
                served = outputs(model.calls[3])["c3"]
                assert "Serving HTTP" in served and "Process running with session ID" in served, served
                fetched = outputs(model.calls[4])["c4"]
                assert "200" in fetched and "Process exited with code 0" in fetched, fetched
                running = [p for p in await inner.sandbox.commands.list() if p.running]
                assert [p.argv[-1] for p in running] == ["python3 -u -m http.server 8124 --bind 127.0.0.1"]
                await inner.pty_terminate_all()
                deadline = asyncio.get_running_loop().time() + 30
                while any(p.running for p in await inner.sandbox.commands.list()):
                    assert asyncio.get_running_loop().time() < deadline
                    await asyncio.sleep(0.05)
    asyncio.run(main())
