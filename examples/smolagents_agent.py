"""A smolagents CodeAgent whose code runs in one stateful airlock sandbox.

    pip install -e 'clients/python[smolagents]'
    AIRLOCK_BIN=target/debug/airlock python3 examples/smolagents_agent.py

It starts `airlock serve --stdio` ($AIRLOCK_BIN, else `airlock` on PATH), or connects to
$AIRLOCK_URL with $AIRLOCK_TOKEN. The model is scripted so that the example runs offline; put a
real model in `model()` (for instance `InferenceClientModel()` or `LiteLLMModel(...)`) and the
same agent drives it. Every code action is a cell of the sandbox's own interpreter: the
variables of one step are there in the next, and `lookup_rate` runs here, on the host, when the
sandboxed code calls it.
"""
import os
from typing import Any, List, Optional

from smolagents import CodeAgent, Model, tool
from smolagents.models import ChatMessage, MessageRole

from airlock_client import Limits, SyncClient
from airlock_client.adapters.smolagents import AirlockExecutor


@tool
def lookup_rate(currency: str) -> float:
    """Today's exchange rate from EUR to a currency (a host-side tool).

    Args:
        currency: ISO code, e.g. "USD".
    """
    return {"USD": 1.08, "GBP": 0.85}[currency]


STEPS = [
    "invoices = [120.0, 80.5, 42.25]\ntotal_eur = sum(invoices)\nprint('total EUR', total_eur)",
    "rate = lookup_rate(currency='USD')\nround(total_eur * rate, 2)",
    "final_answer(f'{round(total_eur * rate, 2)} USD for {len(invoices)} invoices')",
]


class ScriptedModel(Model):
    """Answers with the next scripted code action, as a real model would write it."""

    def __init__(self, steps: List[str]) -> None:
        super().__init__(model_id="scripted")
        self.steps = list(steps)

    def generate(self, messages: List[Any], stop_sequences: Optional[List[str]] = None,
                 response_format: Any = None, tools_to_call_from: Any = None, **kwargs: Any) -> ChatMessage:
        code = self.steps.pop(0)
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"Thought: next step.\n<code>\n{code}\n</code>")


def model() -> Model:
    return ScriptedModel(STEPS)


def connect() -> SyncClient:
    if os.environ.get("AIRLOCK_URL"):
        return SyncClient.connect(os.environ["AIRLOCK_URL"], os.environ.get("AIRLOCK_TOKEN"))
    return SyncClient.stdio(env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")})


def main() -> None:
    with connect() as client:
        executor = AirlockExecutor(client, limits=Limits(timeout_s=30))
        agent = CodeAgent(tools=[lookup_rate], model=model(), executor=executor, max_steps=5,
                          verbosity_level=0)
        try:
            answer = agent.run("What do my invoices come to in USD?")
            print("final answer:", answer)
        finally:
            agent.cleanup()


if __name__ == "__main__":
    main()
