"""OpenTelemetry traces of `airlock serve --otlp-endpoint`, received by a real OTLP/HTTP receiver
on loopback (decoded with the real protobuf types), the server run as root and as `airlock-test`:

- a session opened under the test's own span: every request's span carries the test's trace id
  and has the test's span as its parent, a tool call's span is a child of its run's span, names
  and attributes are as docs/server.md "Traces" says, and no attribute carries program text,
  env values or tool arguments;
- the sync client carries the calling thread's context onto its loop thread;
- a malformed `traceparent` in `_meta` is ignored: the request is served, its span is the root
  of a fresh trace;
- an unreachable endpoint does not slow runs: 20 runs each finish `completed` within their
  timeout, as many as with export off, and the server logs the export failure."""
import asyncio
import http.server
import os
import pathlib
import socket
import stat
import threading
from typing import Any, Dict, List

import pytest

pytest.importorskip("opentelemetry.sdk.trace")
pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest, ExportTraceServiceResponse)
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402

from airlock_client import StdioClient, SyncClient, Tool  # noqa: E402
from test_consistency import USER, Identity  # noqa: E402

#: Marks program text, env values and tool arguments: it must appear in no span attribute.
SECRET = "s3cr3t-marker-7f1c"
#: Largest OTLP body the receiver reads.
MAX_BODY = 8 << 20

tracer = TracerProvider().get_tracer("airlock-test-traces")


class Receiver:
    """`POST /v1/traces` on 127.0.0.1: every span received, decoded, as a dict."""

    def __init__(self) -> None:
        self.spans: List[Dict[str, Any]] = []
        self.posts = 0
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                assert self.path == "/v1/traces" and 0 <= length <= MAX_BODY, (self.path, length)
                assert self.headers.get("Content-Type") == "application/x-protobuf"
                req = ExportTraceServiceRequest.FromString(self.rfile.read(length))
                for rs in req.resource_spans:
                    for ss in rs.scope_spans:
                        receiver.spans.extend(decode(s) for s in ss.spans)
                receiver.posts += 1
                body = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def decode(span: Any) -> Dict[str, Any]:
    attrs = {}
    for kv in span.attributes:
        v = kv.value
        attrs[kv.key] = getattr(v, v.WhichOneof("value")) if v.WhichOneof("value") else None
    return {"name": span.name, "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
            "parent": span.parent_span_id.hex(), "attrs": attrs, "status": span.status.code}


@pytest.fixture(scope="module", params=["root", USER])
def identity(request):
    if request.param != "root":
        if os.geteuid() != 0:
            pytest.skip("switching to airlock-test needs root")
    ident = Identity(request.param)
    # The server's stderr goes to a file the test reads (opened by root, before any switch).
    ident.stderr = ident.dir / "stderr"
    wrapper = ident.dir / "with-stderr"
    wrapper.write_text(f"#!/bin/sh\nexec {ident.launcher} \"$@\" 2>>{ident.stderr}\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    ident.wrapped = str(wrapper)
    yield ident


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


async def start(identity: Identity, *extra: str) -> StdioClient:
    return await StdioClient.start(identity.wrapped, args=[*identity.args, *extra], log_level="info")


async def wait_for(cond, what: str, timeout: float = 15.0) -> None:
    for _ in range(int(timeout / 0.1)):
        if cond():
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def no_secret_in(spans: List[Dict[str, Any]]) -> None:
    for s in spans:
        for k, v in s["attrs"].items():
            assert SECRET not in str(v), (s["name"], k, v)


async def test_a_session_s_spans_are_children_of_the_caller_s_span(identity, receiver):
    seen: List[Any] = []
    lookup = Tool.define(lambda key: seen.append(key) or f"value-of-{key}", name="lookup",
                         schema={"type": "object", "properties": {"key": {"type": "string"}}})
    code = f"# {SECRET}\nimport os\nprint(call_tool('lookup', {{'key': '{SECRET}'}}), os.environ['K'])"
    with tracer.start_as_current_span("agent") as agent:
        c = await start(identity, "--otlp-endpoint", receiver.url)
        try:
            sb = await c.sandbox(tools=[lookup])
            r = await sb.run_code(code, env={"K": SECRET})
            assert r.ok and r.stdout == f"value-of-{SECRET} {SECRET}\n", r
            e = await sb.exec(["/bin/echo", SECRET])
            assert e.ok, e
            await sb.dispose()
            with pytest.raises(Exception):
                await c.connect_sandbox("sb-nonexistent")
        finally:
            await c.close()  # EOF: the server stops, and flushes its spans on the way out
    assert seen == [SECRET]
    me = agent.get_span_context()
    trace_id, parent = format(me.trace_id, "032x"), format(me.span_id, "016x")
    await wait_for(lambda: len(receiver.spans) >= 6, "the session's spans")
    spans = receiver.spans
    by_name: Dict[str, List[Dict[str, Any]]] = {}
    for s in spans:
        by_name.setdefault(s["name"], []).append(s)
    assert {"sandbox.create", "sandbox.run_code", "sandbox.exec", "sandbox.dispose", "sandbox.connect",
            "tool.call"} <= set(by_name), sorted(by_name)
    for s in spans:
        assert s["trace_id"] == trace_id, s
    requests = [s for s in spans if s["name"] != "tool.call"]
    for s in requests:
        assert s["parent"] == parent, s
        assert s["attrs"]["rpc.method"] == s["name"] and s["attrs"]["rpc.system"] == "jsonrpc", s
        assert s["attrs"]["airlock.tenant"] == "default", s
    create, = by_name["sandbox.create"]
    assert create["attrs"]["airlock.sandbox_id"] == sb.sandbox_id
    run, = by_name["sandbox.run_code"]
    assert run["attrs"]["airlock.sandbox_id"] == sb.sandbox_id
    assert run["attrs"]["airlock.run_id"] == r.run_id
    assert run["attrs"]["airlock.status"] == "completed" and run["attrs"]["airlock.via"] == r.via
    ex, = by_name["sandbox.exec"]
    assert ex["attrs"]["airlock.run_id"] == e.run_id and ex["attrs"]["airlock.via"] == "exec"
    assert by_name["sandbox.dispose"][0]["attrs"]["airlock.sandbox_id"] == sb.sandbox_id
    missing, = by_name["sandbox.connect"]
    assert missing["attrs"]["airlock.error_code"] == "not_found" and missing["status"] == 2, missing
    tool, = by_name["tool.call"]
    assert tool["parent"] == run["span_id"], tool
    assert tool["attrs"]["airlock.tool"] == "lookup" and tool["attrs"]["airlock.outcome"] == "ok"
    assert tool["attrs"]["airlock.run_id"] == r.run_id
    no_secret_in(spans)


async def test_a_malformed_traceparent_gets_a_fresh_trace(identity, receiver):
    bad = ["00-zzzz", "00-" + "0" * 32 + "-00f067aa0ba902b7-01", "x" * 100_000]
    c = await start(identity, "--otlp-endpoint", receiver.url)
    try:
        for tp in bad:
            listed = await c._session.request("sandbox.list", {"_meta": {"traceparent": tp, "tracestate": tp}})
            assert "sandboxes" in listed, listed
    finally:
        await c.close()
    await wait_for(lambda: len(receiver.spans) >= len(bad), "the list spans")
    spans = [s for s in receiver.spans if s["name"] == "sandbox.list"]
    assert len(spans) == len(bad), receiver.spans
    assert len({s["trace_id"] for s in spans}) == len(bad)  # each a trace of its own
    for s in spans:
        assert s["parent"] == "" and s["trace_id"] != "0" * 32, s


def test_the_sync_twin_carries_the_caller_s_context_onto_its_loop_thread(identity, receiver):
    with tracer.start_as_current_span("sync agent") as agent:
        with SyncClient.stdio(identity.wrapped, args=[*identity.args, "--otlp-endpoint", receiver.url]) as c:
            c.list_sandboxes()
    me = agent.get_span_context()
    asyncio.run(wait_for(lambda: any(s["name"] == "sandbox.list" for s in receiver.spans), "the list span"))
    listed, = [s for s in receiver.spans if s["name"] == "sandbox.list"]
    assert listed["trace_id"] == format(me.trace_id, "032x"), listed
    assert listed["parent"] == format(me.span_id, "016x"), listed


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def twenty_runs(identity: Identity, *extra: str) -> int:
    """How many of 20 runs, each under a span of its own, end `completed` within their timeout."""
    c = await start(identity, *extra)
    done = 0
    try:
        async with await c.sandbox() as sb:
            for i in range(20):
                with tracer.start_as_current_span(f"run-{i}"):
                    r = await sb.run_code(f"print({i})", timeout=10)
                done += r.ok and r.stdout == f"{i}\n"
    finally:
        await c.close()
    return done


async def test_an_unreachable_endpoint_does_not_slow_runs_and_is_logged(identity):
    before = identity.stderr.read_text() if identity.stderr.exists() else ""
    off = await twenty_runs(identity)
    on = await twenty_runs(identity, "--otlp-endpoint", f"http://127.0.0.1:{closed_port()}")
    assert off == on == 20
    log = identity.stderr.read_text()[len(before):]
    assert "OTLP export failed" in log, log[-4000:]
