"""The LangChain adapter against a real `airlock serve`: an agent loop over langchain-core's
own pieces (a chat model with bound tools, `tool.invoke(tool_call)` -> `ToolMessage`), the
model being LangChain's `GenericFakeChatModel` scripted with tool calls. No network model."""
import asyncio
import base64
import threading
import time

try:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.utils.function_calling import convert_to_openai_tool
except ImportError as e:  # fail, never skip: scripts/test.sh installs it
    raise ImportError("langchain-core is missing: pip install 'airlock-ai[langchain]' "
                      "(scripts/test.sh installs it)") from e

import pytest

from adapter_support import WRITE_NOTES_AND_PNG, png_size, run_example
from airlock_client import AsyncClient, RunResult, SyncClient
from airlock_client.adapters.langchain import AirlockPythonTool, AirlockToolkit


class ScriptedChatModel(GenericFakeChatModel):
    """GenericFakeChatModel that accepts tools (recording their schemas, as a provider would
    receive them) and remembers the messages of every call."""

    seen: list = []
    bound: list = []

    def bind_tools(self, tools, **kwargs):
        self.bound = [convert_to_openai_tool(t) for t in tools]
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def call(name, args, call_id):
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


def agent_turn(model, tools, messages):
    """One turn of a tool-calling agent: ask the model, run the tools it calls, until it answers."""
    by_name = {t.name: t for t in tools}
    bound = model.bind_tools(tools)
    while True:
        reply = bound.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return reply
        messages.extend(by_name[tc["name"]].invoke(tc) for tc in reply.tool_calls)


async def agent_turn_async(model, tools, messages):
    by_name = {t.name: t for t in tools}
    bound = model.bind_tools(tools)
    while True:
        reply = await bound.ainvoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return reply
        for tc in reply.tool_calls:
            messages.append(await by_name[tc["name"]].ainvoke(tc))


def tool_message(messages, call_id):
    [m] = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id]
    return m


def test_an_agent_keeps_its_sandbox_across_turns_and_sees_a_png(server):
    with SyncClient.connect(server.url, server.token) as client, client.sandbox() as sb:
        tools = AirlockToolkit(sandbox=sb, timeout=30).get_tools()
        model = ScriptedChatModel(messages=iter([
            call("run_python", {"code": WRITE_NOTES_AND_PNG}, "c1"),
            call("read_file", {"path": "chart.png"}, "c2"),
            AIMessage(content="I made a red chart."),
            call("run_python", {"code": "print(open('notes.txt').read(), end='')"}, "c3"),
            call("list_files", {}, "c4"),
            AIMessage(content="The notes say 42."),
        ]))
        messages = [HumanMessage("Make a chart.")]
        assert agent_turn(model, tools, messages).content == "I made a red chart."
        assert {t["function"]["name"] for t in model.bound} == {"run_python", "write_file", "read_file",
                                                               "list_files"}

        ran = tool_message(messages, "c1")
        assert ran.status == "success" and ran.content == "saved 73", ran.content  # stdout once, nothing else
        assert isinstance(ran.artifact, RunResult) and ran.artifact.ok and ran.artifact.stdout == "saved 73\n"
        png = sb.files.read("chart.png")
        shown = tool_message(messages, "c2")
        [text, image] = shown.content
        assert text["type"] == "text" and "image/png" in text["text"]
        assert image["type"] == "image" and image["mime_type"] == "image/png"
        assert base64.b64decode(image["base64"]) == png == shown.artifact
        assert png_size(png) == (4, 3)
        assert shown in model.seen[2]  # the model's next call was given the image

        messages.append(HumanMessage("What do the notes say?"))
        assert agent_turn(model, tools, messages).content == "The notes say 42."
        assert tool_message(messages, "c3").content == "the answer is 42"  # written in the first turn
        listing = tool_message(messages, "c4").content
        assert "chart.png\t73 bytes" in listing and "notes.txt\t17 bytes" in listing


def test_the_file_tools_write_read_list_and_refuse(server):
    with SyncClient.connect(server.url, server.token) as client, client.sandbox() as sb:
        write, read, ls = AirlockToolkit(sandbox=sb).get_tools()[1:]
        assert write.invoke({"path": "sub/a.txt", "content": "héllo"}) == "wrote 6 bytes to sub/a.txt"
        assert sb.files.read_text("sub/a.txt") == "héllo"
        assert read.invoke({"path": "sub/a.txt"}) == "héllo"
        assert ls.invoke({"path": "sub"}) == "a.txt\t6 bytes"
        assert ls.invoke({}) == "sub/"
        sb.files.write("blob.bin", bytes(range(256)))
        assert read.invoke({"path": "blob.bin"}) == "blob.bin: 256 bytes of binary data (not text, not an image)"
        missing = read.invoke({"name": "read_file", "args": {"path": "nope.txt"}, "id": "x", "type": "tool_call"})
        assert missing.status == "error" and missing.content == "no such file: nope.txt"
        escape = read.invoke({"path": "../etc/passwd"})
        assert escape.startswith("InvalidParamsError:"), escape


def test_a_runaway_run_times_out_and_errors_come_back_once(server):
    with SyncClient.connect(server.url, server.token) as client, client.sandbox() as sb:
        streamed = []
        tool = AirlockPythonTool(sandbox=sb, on_stdout=streamed.append)
        t0 = time.monotonic()
        out = tool.invoke({"code": "print('spinning', flush=True)\nwhile True: pass", "timeout_s": 1})
        assert time.monotonic() - t0 < 20
        assert out == "spinning\n[timeout: the run exceeded its time limit]", out
        assert "".join(streamed) == "spinning\n"  # as it ran
        failed = tool.invoke({"code": "print('before')\nraise ValueError('bad input')"})
        assert failed.startswith("before\nstderr:\nTraceback"), failed
        assert failed.count("ValueError: bad input") == 1 and failed.endswith("[error: exit status 1]"), failed


def test_the_async_path_with_an_async_sandbox(server):
    async def main():
        async with await AsyncClient.connect(server.url, server.token) as client:
            async with await client.sandbox() as sb:
                tools = AirlockToolkit(sandbox=sb).get_tools()
                model = ScriptedChatModel(messages=iter([
                    call("write_file", {"path": "x.py", "content": "print(6 * 7)"}, "c1"),
                    call("run_python", {"code": "exec(open('x.py').read())"}, "c2"),
                    AIMessage(content="42"),
                ]))
                messages = [HumanMessage("compute")]
                assert (await agent_turn_async(model, tools, messages)).content == "42"
                assert tool_message(messages, "c2").content == "42"
                with pytest.raises(RuntimeError, match="async airlock Sandbox"):
                    tools[0].invoke({"code": "print(1)"})  # a sync call cannot use the async sandbox
    asyncio.run(main())


def test_cancelling_the_async_tool_on_a_sync_sandbox_cancels_the_run(server):
    with SyncClient.connect(server.url, server.token) as client, client.sandbox() as sb:
        started = threading.Event()
        tool = AirlockPythonTool(sandbox=sb, on_stdout=lambda chunk: started.set())

        async def main():
            code = "import time\nprint('started', flush=True)\nwhile True: time.sleep(0.1)"
            task = asyncio.create_task(tool.ainvoke({"code": code, "timeout_s": 50}))
            assert await asyncio.to_thread(started.wait, 30)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        t0 = time.monotonic()
        asyncio.run(main())
        assert sb.run_code("print('free')").stdout == "free\n"  # not busy: the runaway was cancelled
        assert time.monotonic() - t0 < 30


def test_the_example_runs(bin_path):
    out = run_example("langchain_agent.py", bin_path)
    assert "run_python -> sum of squares: 285" in out
    assert "read_file -> gradient.png: image/png" in out and "[image: image/png]" in out
    assert "run_python -> 0 1 4 9 16 25 36 49 64 81" in out  # the second turn saw the first's file
