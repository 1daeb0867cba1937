"""Rich results through the SDK (docs/sdk.md, "Rich results"): accessors per media type, the
structured error of a raised exception, and the on_result/on_error callbacks of both twins;
against a real server."""
import importlib.util

import pytest

from airlock_client import AsyncClient, CellValue, DisplayItem, RunError, SyncClient

CELL = """class Both:
    def _repr_html_(self): return '<b>both</b>'
    def _repr_json_(self): return {'k': 1}
    def __repr__(self): return 'Both()'
class Pic:
    def _repr_svg_(self): return '<svg/>'
display(Pic())
Both()"""


@pytest.fixture
async def client(server):
    c = await AsyncClient.connect(server.url, server.token)
    yield c
    await c.close()


async def test_results_have_an_accessor_per_media_type_and_callbacks_see_them(client):
    seen, errors = [], []

    async def on_error(e: RunError) -> None:
        errors.append(e)

    async with await client.sandbox(stateful=True) as sb:
        r = await sb.run_code(CELL, on_result=seen.append, on_error=on_error)
        assert r.ok, r.stderr
        assert (r.html, r.text, r.json, r.svg, r.png) == ("<b>both</b>", "Both()", {"k": 1}, None, None)
        [pic] = r.display
        assert (pic.svg, pic.html, pic.text) == ("<svg/>", None, repr_of_pic(pic))
        assert seen == [pic, r.value] and isinstance(seen[1], CellValue) and not errors
        r = await sb.run_code("def f():\n    raise ValueError('bad')\nf()", on_result=seen.append,
                              on_error=on_error)
        assert r.error is not None and errors == [r.error]
        assert (r.error.name, r.error.value) == ("ValueError", "bad")
        assert "".join(r.error.traceback) == r.stderr and "raise ValueError('bad')" in r.stderr
        assert len(seen) == 2


def repr_of_pic(item: DisplayItem) -> str:
    assert item.text is not None and item.text.startswith("<__main__.Pic object at")
    return item.text


def test_the_sync_twin_calls_back_and_a_stateless_run_has_the_error(server):
    with SyncClient.connect(server.url, server.token) as client:
        with client.sandbox() as sb:
            errors = []
            r = sb.run_code("import json\njson.loads('{')", on_error=errors.append)
            assert r.error is not None and r.error.name == "JSONDecodeError" and errors == [r.error]
            assert r.error.traceback[0] == "Traceback (most recent call last):\n"
        with client.sandbox(stateful=True) as sb:
            results = []
            r = sb.run_code("import matplotlib.pyplot as plt\n_ = plt.plot([1, 2])", on_result=results.append)
            assert r.ok, r.stderr
            [fig] = results
            assert fig.png is not None and fig.png.startswith(b"\x89PNG") and fig.text.startswith("<Figure")


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas is not installed")
def test_a_dataframe_comes_back_as_an_html_table(server):
    with SyncClient.connect(server.url, server.token) as client:
        with client.sandbox(stateful=True) as sb:
            r = sb.run_code("import pandas as pd\npd.DataFrame({'a': [1, 2]}).describe()")
            assert r.html is not None and "<table" in r.html and "mean" in r.html
