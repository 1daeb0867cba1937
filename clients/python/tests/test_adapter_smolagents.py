"""The smolagents adapter: a real CodeAgent loop, driven offline by a scripted model, whose code
actions run as cells of one stateful airlock sandbox; tools answered host-side; final_answer
native; state kept between steps without any replay."""
import pytest

pytest.importorskip("smolagents")

from smolagents import CodeAgent, Model, tool  # noqa: E402
from smolagents.models import ChatMessage, MessageRole  # noqa: E402

from airlock_client import SyncClient  # noqa: E402
from airlock_client.adapters.smolagents import AirlockExecutor  # noqa: E402

from adapter_support import run_example  # noqa: E402

CALLS = []


@tool
def price_of(item: str) -> float:
    """The price of an item in the shop.

    Args:
        item: the item's name.
    """
    CALLS.append(item)
    return {"apple": 0.5, "pear": 0.75}[item]


class Scripted(Model):
    """A model that answers with the next scripted code action."""

    def __init__(self, actions):
        super().__init__(model_id="scripted")
        self.actions = list(actions)
        self.seen = []
        self.calls = []

    def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kwargs):
        self.seen.append(messages[-1])
        self.calls.append(list(messages))
        code = self.actions.pop(0)
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"Thought: next.\n<code>\n{code}\n</code>")


def test_a_code_agent_keeps_state_in_the_sandbox_and_answers_natively(server):
    CALLS.clear()
    model = Scripted([
        "import statistics\nbasket = ['apple', 'pear', 'apple']\nprint('items', len(basket))",
        "prices = [price_of(item=i) for i in basket]\nstatistics.fmean(prices)",
        "1 / 0",
        "total = sum(prices)\nfinal_answer({'total': total, 'mean': round(statistics.fmean(prices), 3)})",
    ])
    with SyncClient.connect(server.url, server.token) as client:
        executor = AirlockExecutor(client)
        agent = CodeAgent(tools=[price_of], model=model, executor=executor, max_steps=6, verbosity_level=0)
        answer = agent.run("What does the basket cost?")
        assert answer == {"total": 1.75, "mean": 0.583}
        # The tool ran host-side, once per item, through the sandbox's call_tool channel.
        assert CALLS == ["apple", "pear", "apple"]
        steps = [s for s in agent.memory.steps if getattr(s, "observations", None) is not None]
        assert "items 3" in steps[0].observations
        assert "Last output from code snippet:\n0.5833" in steps[1].observations
        errors = [s.error for s in agent.memory.steps if getattr(s, "error", None) is not None]
        assert any("ZeroDivisionError" in str(e) for e in errors), errors
        # The state lives in the sandbox's interpreter, not in the executor.
        sb = executor.sandbox
        assert sb is not None
        r = sb.run_code("basket, total")
        assert r.value is not None and r.value.json == [["apple", "pear", "apple"], 1.75]
        agent.cleanup()
        assert executor.sandbox is None


def test_a_figure_a_step_draws_reaches_the_model_as_an_image(server):
    model = Scripted([
        "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nprint('drawn')",
        "final_answer('done')",
    ])
    with SyncClient.connect(server.url, server.token) as client:
        executor = AirlockExecutor(client)
        agent = CodeAgent(tools=[], model=model, executor=executor, max_steps=3, verbosity_level=0,
                          step_callbacks=[executor.show_figures])
        assert agent.run("Plot the squares.") == "done"
        step = [s for s in agent.memory.steps if getattr(s, "code_action", None)][0]
        [image] = step.observations_images
        assert image.format == "PNG" and image.size[0] > 100
        # The model's second call carried the image.
        second = model.calls[1]
        parts = [p for m in second for p in (m.content if isinstance(m.content, list) else [])]
        assert any(p.get("type") == "image" for p in parts), parts
        agent.cleanup()


def test_the_example_runs_offline(bin_path):
    out = run_example("smolagents_agent.py", bin_path)
    assert "final answer:" in out
