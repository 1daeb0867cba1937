"""An OpenAI Agents SDK `SandboxAgent` running on airlock, over two turns of one sandbox.

    pip install -e 'clients/python[openai-agents]'
    AIRLOCK_BIN=target/debug/airlock python3 examples/openai_agents_sandbox.py

It starts `airlock serve --stdio` ($AIRLOCK_BIN, else `airlock` on PATH), or connects to
$AIRLOCK_URL with $AIRLOCK_TOKEN. With OPENAI_API_KEY set the agent uses the SDK's default
model; without it, the SDK's scripted model (`agents.testing.ScriptedModel`) plays the model's
part, so the example runs offline.
"""
import asyncio
import os
from typing import List, Optional

from agents import RunConfig, Runner, TResponseInputItem
from agents.models.interface import Model
from agents.sandbox import Manifest, SandboxAgent, SandboxRunConfig
from agents.sandbox.entries import File
from agents.testing import ScriptedModel, assistant_message, function_call

from airlock_client import AsyncClient, BaseClient, StdioClient
from airlock_client.adapters.openai_agents import AirlockSandboxClient, AirlockSandboxClientOptions

CSV = b"city,temp\nParis,18\nOslo,9\nCairo,31\n"
SUMMARY = (
    "python3 - <<'EOF'\n"
    "import csv\n"
    "rows = list(csv.DictReader(open('data/weather.csv')))\n"
    "hot = max(rows, key=lambda r: int(r['temp']))\n"
    "open('summary.txt', 'w').write(f\"hottest: {hot['city']} ({hot['temp']} C)\\n\")\n"
    "print(open('summary.txt').read(), end='')\n"
    "EOF"
)


def model() -> Optional[Model]:
    if os.environ.get("OPENAI_API_KEY"):
        return None  # the SDK's default model
    return ScriptedModel([
        [function_call("exec_command", {"cmd": "ls -R"}, call_id="1")],
        [function_call("exec_command", {"cmd": SUMMARY}, call_id="2")],
        [assistant_message("Cairo is the hottest at 31 C; saved to summary.txt.")],
        [function_call("exec_command", {"cmd": "cat summary.txt"}, call_id="3")],
        [assistant_message("summary.txt, from the first turn, says: hottest: Cairo (31 C).")],
    ])


async def connect() -> BaseClient:
    if os.environ.get("AIRLOCK_URL"):
        return await AsyncClient.connect(os.environ["AIRLOCK_URL"], os.environ.get("AIRLOCK_TOKEN"))
    return await StdioClient.start(env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")})


async def main() -> None:
    async with await connect() as client:
        sandboxes = AirlockSandboxClient(client)
        manifest = Manifest(entries={"data/weather.csv": File(content=CSV)})  # copied into /work
        session = await sandboxes.create(manifest=manifest, options=AirlockSandboxClientOptions(timeout_s=30))
        async with session:  # started here; disposed of on exit
            agent = SandboxAgent(name="analyst", model=model(),
                                 instructions="Answer from the files in the sandbox workspace.")
            config = RunConfig(sandbox=SandboxRunConfig(session=session), tracing_disabled=True)
            history: List[TResponseInputItem] = []
            for question in ("Which city is hottest? Save a summary.", "What does the summary say?"):
                print("user:", question)
                result = await Runner.run(agent, history + [{"role": "user", "content": question}], run_config=config)
                for item in result.new_items:
                    if item.type == "tool_call_output_item":
                        print("  tool ->", str(item.output).split("Output:\n", 1)[-1].strip())
                print("assistant:", result.final_output)
                history = result.to_input_list()


if __name__ == "__main__":
    asyncio.run(main())
