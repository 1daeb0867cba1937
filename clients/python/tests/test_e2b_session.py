"""A scripted E2B-style analysis session through the SDK, on the image a newcomer gets from one
command (`airlock image build --preset python-data`): upload a CSV, read it with pandas,
`df.describe()` as the cell's trailing value, a matplotlib figure shown with `plt.show()` and
with `display()`, a raised exception, and the session going on after it. As root and, rootless,
as the unprivileged `airlock-test` user.

Each step is one function taking the cell's `RunResult`: the DataFrame comes back as an HTML
table (text/html) beside its text, an `IPython.display` HTML object as text/html (the image has
no IPython: the guest's stand-in serves the import), the exception as name, value and
traceback."""
import os
import pwd
import struct

import pytest

from airlock_client import RunResult, StdioClient
from test_images import USER, Identity

# The suite's cache of built presets: the preset is built once per machine (by root, the first
# identity), keyed by its recipe; every identity imports the same archive through the command.
PRESET_CACHE = "/var/cache/airlock-test/presets"

CSV = "region,units,price\nnorth,10,2.5\nsouth,20,3.0\neast,30,2.0\nwest,40,4.5\n"


@pytest.fixture(scope="module", params=["root", USER])
def identity(request):
    if os.geteuid() != 0:
        pytest.skip("the preset is built with mmdebstrap as root (scripts/test.sh)")
    if request.param != "root":
        try:
            pwd.getpwnam(request.param)
        except KeyError:
            pytest.fail(f"create the user {USER} (scripts/test.sh does): the rootless path must be tested")
    ident = Identity(request.param)
    done = ident.run("image", "--image-dir", str(ident.store), "build", "--preset", "python-data",
                     "--cache", PRESET_CACHE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("python-data: preset python-data"), done.stdout
    yield ident
    ident.close()


def png_size(data: bytes) -> tuple:
    """Width and height from a PNG's IHDR chunk (the file must start with one)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", data[:16]
    return struct.unpack(">II", data[16:24])


def read_csv(r: RunResult) -> None:
    assert r.ok, r
    assert r.stdout == "4 ['region', 'units', 'price']\n", r


def describe(r: RunResult) -> None:
    assert r.ok, r
    assert r.value is not None, r
    text = r.value.repr  # text/plain of the DataFrame
    html = r.html or ""
    assert html.lstrip().startswith("<div>") and "<table" in html and "<th>count</th>" in html, html[:300]
    lines = {line.split()[0]: line.split()[1:] for line in text.splitlines()[1:]}
    assert text.split()[:2] == ["units", "price"], text
    assert lines["count"] == ["4.000000", "4.000000"], text
    assert lines["mean"] == ["25.000000", "3.000000"], text
    assert lines["max"] == ["40.000000", "4.500000"], text


def figure_via_show(r: RunResult) -> None:
    assert r.ok, r
    pngs = [d for d in r.display if d.mime == "image/png"]
    assert len(pngs) == 1, r.display
    assert png_size(pngs[0].data) == (640, 480), png_size(pngs[0].data)


def figure_via_display(r: RunResult) -> None:
    assert r.ok, r
    # display(fig) sends it; the same figure, still open at the cell's end, comes back too.
    pngs = [d for d in r.display if d.mime == "image/png"]
    assert len(pngs) >= 1 and all(png_size(p.data) == (400, 300) for p in pngs), r.display


def exception(r: RunResult) -> None:
    assert not r.ok and r.status == "error", r
    assert r.error is not None, r
    assert "KeyError: 'revenue'" in r.stderr, r.stderr
    assert "Traceback" in r.stderr, r.stderr
    assert (r.error.name, r.error.value) == ("KeyError", "'revenue'"), r.error
    tb = "".join(r.error.traceback or [])
    assert tb.startswith("Traceback") and "KeyError: 'revenue'" in tb, tb


def ipython_html(r: RunResult) -> None:
    assert r.ok, r
    assert [d.html for d in r.display] == ["<h3>Sales by region</h3>"], r.display


def goes_on(r: RunResult) -> None:
    assert r.ok, r
    assert r.value is not None and r.value.repr == "325.0", r


# (code, check) in order.
SESSION = [
    ("import pandas as pd\ndf = pd.read_csv('/work/sales.csv')\nprint(len(df), list(df.columns))", read_csv),
    ("df.describe()", describe),
    ("import matplotlib.pyplot as plt\nplt.bar(df.region, df.units)\nplt.title('units')\nplt.show()",
     figure_via_show),
    ("fig, ax = plt.subplots(figsize=(4, 3), dpi=100)\nax.plot(df.units, df.price)\ndisplay(fig)",
     figure_via_display),
    ("from IPython.display import display, HTML\ndisplay(HTML('<h3>Sales by region</h3>'))", ipython_html),
    ("df['revenue'] = df.units * df.price\ndel df['revenue']\ndf['revenue'].sum()", exception),
    ("(df.units * df.price).sum()", goes_on),
]


async def test_an_analysis_session_on_the_python_data_preset(identity):
    client = await StdioClient.start(identity.launcher, args=["--image-dir", str(identity.store)])
    try:
        sb = await client.sandbox(image="python-data", stateful=True)
        await sb.files.write("sales.csv", CSV)
        for code, check in SESSION:
            r = await sb.run_code(code)
            check(r)
    finally:
        await client.close()
