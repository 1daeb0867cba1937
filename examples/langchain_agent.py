"""A LangChain agent whose Python runs in an airlock sandbox kept across turns.

    pip install -e 'clients/python[langchain]'
    AIRLOCK_BIN=target/debug/airlock python3 examples/langchain_agent.py

It starts `airlock serve --stdio` ($AIRLOCK_BIN, else `airlock` on PATH), or connects to
$AIRLOCK_URL with $AIRLOCK_TOKEN. The model is LangChain's scripted fake chat model so that the
example runs offline; put a real tool-calling chat model in `chat_model()` (for instance
`ChatOpenAI(model=...)` from langchain-openai) and the same loop drives it.
"""
import os
from typing import Any, Dict, List

from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool

from airlock_client import SyncClient
from airlock_client.adapters.langchain import AirlockToolkit

PLOT = """
import struct, zlib
w, h = 64, 32
rows = b"".join(b"\\x00" + bytes(v for x in range(w) for v in (255 * x // w, 80, 255 - 255 * x // w))
                for _ in range(h))
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
png = (b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
open("gradient.png", "wb").write(png)
squares = [n * n for n in range(10)]
open("squares.txt", "w").write(" ".join(map(str, squares)))
print("sum of squares:", sum(squares))
"""


class ScriptedChatModel(GenericFakeChatModel):
    """The fake model, accepting tools as a real chat model does."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
        return self


def tool_call(name: str, args: Dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


def chat_model() -> BaseChatModel:
    return ScriptedChatModel(messages=iter([
        tool_call("run_python", {"code": PLOT}, "1"),
        tool_call("read_file", {"path": "gradient.png"}, "2"),
        AIMessage(content="The sum of the first ten squares is 285; the gradient is drawn."),
        tool_call("run_python", {"code": "print(open('squares.txt').read())"}, "3"),
        AIMessage(content="squares.txt, from the first turn, still holds them."),
    ]))


def show(message: ToolMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return " + ".join(b["text"] if b["type"] == "text" else f"[{b['type']}: {b.get('mime_type')}]"
                      for b in message.content if isinstance(b, dict))


def agent_turn(model: BaseChatModel, tools: List[BaseTool], messages: List[BaseMessage]) -> str:
    """Ask the model, run the tools it calls, until it answers."""
    by_name = {t.name: t for t in tools}
    bound = model.bind_tools(tools)
    while True:
        reply = bound.invoke(messages)
        messages.append(reply)
        if not isinstance(reply, AIMessage) or not reply.tool_calls:
            return str(reply.content)
        for call in reply.tool_calls:
            result = by_name[call["name"]].invoke(call)
            print(f"  {call['name']} -> {show(result)}")
            messages.append(result)


def connect() -> SyncClient:
    if os.environ.get("AIRLOCK_URL"):
        return SyncClient.connect(os.environ["AIRLOCK_URL"], os.environ.get("AIRLOCK_TOKEN"))
    return SyncClient.stdio(env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")})


def main() -> None:
    with connect() as client, client.sandbox() as sandbox:  # the sandbox lives across the turns
        tools = AirlockToolkit(sandbox=sandbox, timeout=30).get_tools()
        model = chat_model()
        messages: List[BaseMessage] = []
        for question in ("Plot a gradient and sum the first ten squares.", "What is in squares.txt?"):
            print("user:", question)
            messages.append(HumanMessage(question))
            print("assistant:", agent_turn(model, tools, messages))


if __name__ == "__main__":
    main()
