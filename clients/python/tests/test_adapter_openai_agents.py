"""The OpenAI Agents SDK adapter against a real `airlock serve`: a `SandboxAgent` driven by the
SDK's own `Runner` and its scripted model (`agents.testing.ScriptedModel`, a `Model`), its
shell and `view_image` tools running in an airlock sandbox. No API key, no network model."""
import asyncio
import base64
import json
import tarfile
import time

try:
    from agents import RunConfig, Runner
    from agents.sandbox import LocalSnapshotSpec, SandboxAgent, SandboxRunConfig
    from agents.testing import ScriptedModel, assistant_message, function_call
except ImportError as e:  # fail, never skip: scripts/test.sh installs it
    raise ImportError("the OpenAI Agents SDK is missing: pip install 'airlock-ai[openai-agents]' "
                      "(scripts/test.sh installs it)") from e

import pytest

from adapter_support import WRITE_NOTES_AND_PNG, png_size, run_example
from airlock_client import AsyncClient, NotFoundError
from airlock_client.adapters.openai_agents import (AirlockSandboxClient, AirlockSandboxClientOptions,
                                                   AirlockSandboxSession)


def shell(cmd, call_id, **extra):
    return [function_call("exec_command", {"cmd": cmd, **extra}, call_id=call_id)]


def run_config(**sandbox):
    return RunConfig(sandbox=SandboxRunConfig(**sandbox), tracing_disabled=True)


def outputs(call):
    """The function-call outputs a model call was given, by call id."""
    return {item["call_id"]: item["output"] for item in call.input
            if isinstance(item, dict) and item.get("type") == "function_call_output"}


def image_from(output):
    """The bytes of the one image in a tool output the model received."""
    images = [part for part in output if part.get("type") == "input_image"]
    assert len(images) == 1, output
    prefix = "data:image/png;base64,"
    assert images[0]["image_url"].startswith(prefix)
    return base64.b64decode(images[0]["image_url"][len(prefix):])


def agent_with(model):
    return SandboxAgent(name="analyst", model=model, instructions="Work in the sandbox.")


def test_a_sandbox_agent_keeps_its_sandbox_across_turns_and_sees_a_png(server):
    async def main():
        async with await AsyncClient.connect(server.url, server.token) as client:
            sandboxes = AirlockSandboxClient(client)
            session = await sandboxes.create(options=AirlockSandboxClientOptions(timeout_s=30))
            async with session:
                inner = session._inner
                assert isinstance(inner, AirlockSandboxSession)
                model = ScriptedModel([
                    shell(f"python3 - <<'EOF'\n{WRITE_NOTES_AND_PNG}\nEOF", "c1"),
                    [function_call("view_image", {"path": "chart.png"}, call_id="c2")],
                    [assistant_message("I made a red chart.")],
                    shell("cat notes.txt; pwd", "c3"),
                    [assistant_message("The notes say 42.")],
                ])
                agent = agent_with(model)
                first = await Runner.run(agent, "Make a chart.", run_config=run_config(session=session))
                assert first.final_output == "I made a red chart."
                second = await Runner.run(agent, first.to_input_list() + [{"role": "user", "content": "Notes?"}],
                                          run_config=run_config(session=session))
                assert second.final_output == "The notes say 42."
                model.assert_complete()
                assert {t.name for t in model.calls[0].tools} >= {"exec_command", "view_image"}

                made = outputs(model.calls[1])["c1"]
                assert "Process exited with code 0" in made and made.count("saved") == 1, made
                seen = image_from(outputs(model.calls[2])["c2"])
                assert png_size(seen) == (4, 3)
                assert seen == await inner.sandbox.files.read("chart.png")  # the sandbox's own bytes
                later = outputs(model.calls[4])["c3"]
                assert "the answer is 42" in later and "/work" in later, later
                sandbox_id = inner.sandbox.sandbox_id
            with pytest.raises(NotFoundError):  # leaving `async with` disposed of it
                await client.connect_sandbox(sandbox_id)
    asyncio.run(main())


def test_a_runaway_command_times_out_and_the_sandbox_goes_on(server):
    async def main():
        async with await AsyncClient.connect(server.url, server.token) as client:
            async with await AirlockSandboxClient(client).create() as session:
                model = ScriptedModel([
                    shell("echo started; sleep 120", "c1", yield_time_ms=1500),
                    shell("echo still here", "c2"),
                    [assistant_message("ok")],
                ])
                t0 = time.monotonic()
                await Runner.run(agent_with(model), "go", run_config=run_config(session=session))
                assert time.monotonic() - t0 < 30
                assert "Command timed out after 1.500 seconds." in outputs(model.calls[1])["c1"]
                assert "still here" in outputs(model.calls[2])["c2"]
    asyncio.run(main())


def test_the_runner_makes_and_disposes_of_its_own_sandbox(server):
    made = []

    class Recording(AirlockSandboxClient):
        async def create(self, **kwargs):
            session = await super().create(**kwargs)
            made.append(session.state.sandbox_id)
            return session

    async def main():
        async with await AsyncClient.connect(server.url, server.token) as client:
            model = ScriptedModel([shell("echo hi from $PWD", "c1"), [assistant_message("done")]])
            await Runner.run(agent_with(model), "go",
                             run_config=run_config(client=Recording(client), options=AirlockSandboxClientOptions()))
            assert "hi from /work" in outputs(model.calls[1])["c1"]
            assert len(made) == 1
            with pytest.raises(NotFoundError):
                await client.connect_sandbox(made[0])
    asyncio.run(main())


def test_the_workspace_persists_and_hydrates_into_a_new_sandbox(server, tmp_path):
    async def main():
        async with await AsyncClient.connect(server.url, server.token) as client:
            sandboxes = AirlockSandboxClient(client)
            session = await sandboxes.create(snapshot=LocalSnapshotSpec(base_path=tmp_path))
            async with session:
                model = ScriptedModel([shell("mkdir -p sub && echo kept > sub/notes.txt", "c1"),
                                       [assistant_message("saved")]])
                await Runner.run(agent_with(model), "save", run_config=run_config(session=session))
                first_id = session.state.sandbox_id
            # Leaving `async with` persisted the workspace (a tar in tmp_path) and disposed of it.
            [archive] = list(tmp_path.glob("*.tar"))
            with tarfile.open(archive) as tar:
                assert "./sub/notes.txt" in tar.getnames()
                assert not any(".airlock-" in n for n in tar.getnames())
            payload = json.loads(json.dumps(sandboxes.serialize_session_state(session.state)))
            resumed = await sandboxes.resume(sandboxes.deserialize_session_state(payload))
            async with resumed:
                assert resumed.state.sandbox_id != first_id
                model = ScriptedModel([shell("cat sub/notes.txt", "c1"), [assistant_message("read")]])
                await Runner.run(agent_with(model), "read", run_config=run_config(session=resumed))
                assert "kept" in outputs(model.calls[1])["c1"]
    asyncio.run(main())


def test_resume_reattaches_to_a_sandbox_that_still_lives(server):
    async def main():
        async with await AsyncClient.connect(server.url, server.token) as client:
            sandboxes = AirlockSandboxClient(client)
            options = AirlockSandboxClientOptions(dispose_on_shutdown=False, idle_timeout_s=120)
            async with await sandboxes.create(options=options) as session:
                await session.exec("echo live > live.txt")
                state = session.state
            resumed = await sandboxes.resume(state)
            async with resumed:
                assert resumed.state.sandbox_id == state.sandbox_id
                assert (await resumed.exec("cat live.txt")).stdout == b"live\n"
                inner = resumed._inner
                assert isinstance(inner, AirlockSandboxSession)
                await inner.dispose()
    asyncio.run(main())


def test_manifest_files_and_patches_go_through_the_airlock_files_api(server):
    from agents.sandbox import Manifest
    from agents.sandbox.entries import File
    from agents.sandbox.errors import InvalidManifestPathError

    async def main():
        async with await AsyncClient.connect(server.url, server.token) as client:
            manifest = Manifest(entries={"data/in.txt": File(content=b"one\ntwo\n")})
            async with await AirlockSandboxClient(client).create(manifest=manifest) as session:
                assert session.state.manifest.root == "/work"  # the SDK's default root, moved
                inner = session._inner
                files = inner.sandbox.files
                assert await files.read("data/in.txt") == b"one\ntwo\n"
                await session.apply_patch([{"type": "update_file", "path": "data/in.txt", "diff": "@@\n one\n-two\n+three\n"},
                                           {"type": "create_file", "path": "new.txt", "diff": "+fresh\n"}])
                assert await files.read("data/in.txt") == b"one\nthree\n"
                assert await files.read("new.txt") == b"fresh"  # the SDK's create_file
                assert [e.path for e in await session.ls("data")] == ["/work/data/in.txt"]
                with pytest.raises(InvalidManifestPathError):  # the SDK's workspace policy, before airlock
                    await session.read("../etc/passwd")
    asyncio.run(main())


def test_the_example_runs(bin_path):
    out = run_example("openai_agents_sandbox.py", bin_path)
    assert "weather.csv" in out and out.count("tool -> hottest: Cairo (31 C)") == 2, out
