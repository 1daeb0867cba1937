"""`airlock serve`'s `/metrics` through a real server, as root and, rootless, as the unprivileged
`airlock-test` user: scraped over HTTP with the server's token and parsed with the Prometheus
client's own parser (`prometheus_client`, OpenMetrics text: what the server exposes), the
families move as things happen:

- a run: `airlock_runs_total{status,via}` +1 under the result's own `via`, the latency and
  queue-wait histograms' counts +1, its stdout bytes counted;
- a tool call: `airlock_tool_calls_total{outcome="ok"}` +1;
- tool calls that never reach the orchestrator (an undeclared name and arguments off the schema,
  refused by the host-tool registry's door; one past the run's `max_tool_calls`):
  `airlock_tool_calls_total{outcome="refused"}` +1 each, and only the relayed one as `ok`;
- a refused create (over `--max-sandboxes`): `airlock_refusals_total{kind="over_capacity"}` +1;
- `files.write` / `files.read`: their payload bytes;
- `airlock_sandboxes_live{tenant="default"}` up on create, down on dispose, and the sandbox's
  disk gauge while it holds a file.

Without the token the same URL is 401 (docs/server.md "Metrics and health")."""
import os
import pathlib
import pwd
import urllib.error
import urllib.request

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from airlock_client import AsyncClient, Limits, OverCapacityError, Tool
from conftest import Server
from test_consistency import USER, identity  # noqa: F401 (the fixture, used by name)


@pytest.fixture(scope="module")
def metered(identity):
    """The server under test, as `identity` (test_consistency's fixture: root, then airlock-test)."""
    ident = identity
    work = ident.dir / "server"
    work.mkdir()
    launcher = ident.launcher
    if ident.who != "root":
        pw = pwd.getpwnam(ident.who)
        os.chown(work, pw.pw_uid, pw.pw_gid)
        # setpriv execs in place (runuser would stay the parent): SIGTERM reaches the server.
        launcher = str(ident.dir / "as-user-exec")
        with open(launcher, "w") as f:
            f.write(f"#!/bin/sh\nexec setpriv --reuid={USER} --regid={USER} --init-groups -- env -i "
                    f"PATH=/usr/bin:/bin HOME={pw.pw_dir} {ident.dir / 'airlock'} \"$@\"\n")
        os.chmod(launcher, 0o755)
    s = Server(work, extra=["--ceiling-timeout", "60", "--max-sandboxes", "1"], state_dir=work / "state",
               launcher=launcher)
    # The server itself runs as the identity under test.
    assert os.stat(f"/proc/{s.proc.pid}").st_uid == pwd.getpwnam(ident.who).pw_uid
    yield s
    assert s.stop() == 0


def metrics_url(server: Server) -> str:
    return server.url.replace("ws://", "http://").rstrip("/") + "/metrics"


def scrape(server: Server) -> dict:
    req = urllib.request.Request(metrics_url(server), headers={"Authorization": f"Bearer {server.token}"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
        text = resp.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(families: dict, family: str, sample: str, **labels) -> float:
    """The sample's value, 0 when the family or the series does not exist yet."""
    f = families.get(family)
    if f is None:
        return 0.0
    for s in f.samples:
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return 0.0


def all_outcomes(families: dict, family: str, sample: str) -> float:
    """The sum of every series of the family, 0 when it does not exist yet."""
    f = families.get(family)
    return sum(s.value for s in f.samples if s.name == sample) if f else 0.0


def test_metrics_need_the_token(metered):
    for headers in ({}, {"Authorization": "Bearer not-the-token-0123456789"}):
        req = urllib.request.Request(metrics_url(metered), headers=headers)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=20)
        assert e.value.code == 401
        assert "airlock_" not in e.value.read().decode()


async def test_families_move_as_runs_refusals_transfers_and_sandboxes_happen(metered):
    before = scrape(metered)
    live0 = value(before, "airlock_sandboxes_live", "airlock_sandboxes_live", tenant="default")
    async with await AsyncClient.connect(metered.url, metered.token) as client:
        # An execute with a tool call.
        r = await client.execute("print(call_tool('add', {'a': 2, 'b': 3}))", tools={"add": lambda a, b: a + b})
        assert r.status == "completed" and r.stdout == "5\n", r
        after_execute = scrape(metered)
        sb = await client.sandbox()
        created = scrape(metered)
        assert value(created, "airlock_sandboxes_live", "airlock_sandboxes_live", tenant="default") == live0 + 1
        # A second sandbox is over --max-sandboxes 1.
        with pytest.raises(OverCapacityError):
            await client.sandbox()
        run = await sb.run_code("print('x' * 9)")
        assert run.status == "completed", run
        payload = b"\x00\x01" * 500
        await sb.files.write("blob.bin", payload)
        assert await sb.files.read("blob.bin") == payload
        during = scrape(metered)
        sandbox_id = sb.sandbox_id
        await sb.dispose()
        after = scrape(metered)
        # An allowlist sandbox asking its proxy for a host off the list: one denied decision.
        fenced = await client.sandbox(egress="allowlist", egress_allow=["example.com:443"])
        asked = await fenced.run_code(
            "import urllib.request\n"
            "try:\n    urllib.request.urlopen('http://denied.invalid/', timeout=10)\n"
            "except Exception as e:\n    print(type(e).__name__)")
        assert asked.status == "completed" and asked.stdout.strip() == "HTTPError", asked
        await fenced.dispose()
        fenced_after = scrape(metered)

    runs = "airlock_runs", "airlock_runs_total"
    # The execute's run, under its own via; its tool call.
    assert value(after_execute, *runs, status="completed", via=r.via) == value(
        before, *runs, status="completed", via=r.via) + 1
    assert value(after_execute, "airlock_tool_calls", "airlock_tool_calls_total", outcome="ok") == value(
        before, "airlock_tool_calls", "airlock_tool_calls_total", outcome="ok") + 1
    # The session run, under its own via: the counter and both histograms.
    assert value(during, *runs, status="completed", via=run.via) == value(
        created, *runs, status="completed", via=run.via) + 1
    for hist in ("airlock_run_duration_seconds", "airlock_run_queued_seconds"):
        assert value(during, hist, hist + "_count", via=run.via) == value(created, hist, hist + "_count",
                                                                         via=run.via) + 1
    assert value(during, "airlock_transfer_bytes", "airlock_transfer_bytes_total", kind="stdout") >= value(
        created, "airlock_transfer_bytes", "airlock_transfer_bytes_total", kind="stdout") + 10
    # The refused create.
    refusals = "airlock_refusals", "airlock_refusals_total"
    assert value(during, *refusals, kind="over_capacity") == value(before, *refusals, kind="over_capacity") + 1
    # The file's bytes both ways, and on the sandbox's disk while it lived.
    transfer = "airlock_transfer_bytes", "airlock_transfer_bytes_total"
    for kind in ("files_write", "files_read"):
        assert value(during, *transfer, kind=kind) == value(created, *transfer, kind=kind) + len(payload)
    disk = value(during, "airlock_sandbox_disk_used_bytes", "airlock_sandbox_disk_used_bytes",
                 sandbox_id=sandbox_id, tenant="default")
    assert disk >= len(payload)
    # Disposed: the live gauge is back, the sandbox's own series gone.
    assert value(after, "airlock_sandboxes_live", "airlock_sandboxes_live", tenant="default") == live0
    assert value(after, "airlock_sandbox_disk_used_bytes", "airlock_sandbox_disk_used_bytes",
                 sandbox_id=sandbox_id) == 0
    decisions = "airlock_egress_decisions", "airlock_egress_decisions_total"
    assert value(fenced_after, *decisions, decision="denied") == value(after, *decisions, decision="denied") + 1


async def test_tool_calls_refused_before_the_orchestrator_are_counted(metered):
    served = []

    def add(a, b):
        served.append((a, b))
        return a + b

    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
              "required": ["a", "b"], "additionalProperties": False}
    # Four calls under a cap of three: an undeclared name and arguments off the schema (both
    # refused by the registry's door), one relayed, and one past the cap.
    program = """
for name, args in (('undeclared', {}), ('add', {'a': 'x'}), ('add', {'a': 2, 'b': 3}), ('add', {'a': 1, 'b': 1})):
    try:
        print(call_tool(name, args))
    except ToolError as e:
        print(name, e.code)
"""
    calls = "airlock_tool_calls", "airlock_tool_calls_total"
    before = scrape(metered)
    async with await AsyncClient.connect(metered.url, metered.token) as client:
        async with await client.sandbox(tools=[Tool.define(add, schema=schema)],
                                        limits=Limits(max_tool_calls=3)) as sb:
            r = await sb.run_code(program)
    after = scrape(metered)
    assert r.status == "completed", r
    assert r.stdout.splitlines() == ["undeclared -32013", "add -32602", "5", "add -32009"], r.stdout
    assert served == [(2, 3)]  # only one call reached the orchestrator
    assert r.tool_calls == 4, r
    assert value(after, *calls, outcome="refused") == value(before, *calls, outcome="refused") + 3
    assert value(after, *calls, outcome="ok") == value(before, *calls, outcome="ok") + 1
    # Every call the program made is in the family once.
    assert all_outcomes(after, *calls) == all_outcomes(before, *calls) + 4
