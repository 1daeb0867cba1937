"""Exposed ports (`Sandbox.expose`, `get_host`, `unexpose`) against a real `airlock serve`: what
works before a sandbox can keep a server running (docs/server.md, "Ports: sandbox.expose")."""
import urllib.error
import urllib.request

import pytest

from airlock_client import (AsyncClient, Capability, SandboxRefusedError, StdioClient, SyncClient)

PORTS = [Capability.EXEC, Capability.PORTS]


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


@pytest.fixture
async def client(server):
    c = await AsyncClient.connect(server.url, server.token)
    yield c
    await c.close()


async def test_expose_is_refused_without_the_ports_capability(client):
    async with await client.sandbox() as sb:
        assert Capability.PORTS not in sb.info.requires
        with pytest.raises(SandboxRefusedError, match="ports"):
            await sb.expose(8000)
        with pytest.raises(SandboxRefusedError, match="ports"):
            await sb.unexpose(8000)


async def test_expose_get_host_and_unexpose(client, server):
    async with await client.sandbox(requires=PORTS) as sb:
        url = await sb.expose(8000)
        listen = server.url.removeprefix("ws://").rstrip("/")
        assert url.startswith(f"http://{listen}/x/") and url.endswith("/")
        assert await sb.expose(8000) == url
        assert await sb.get_host(8000) == url.removeprefix("http://").rstrip("/")
        # Nothing can answer yet (no process outlives a call), but the URL is a live one.
        assert status_of(url) == 502
        await sb.unexpose(8000)
        assert status_of(url) == 404
        assert status_of(url.replace("/x/", "/x/0")) == 404
        await sb.unexpose(8000)
        with pytest.raises(ValueError):
            await sb.expose(0)
        with pytest.raises(TypeError):
            await sb.expose("8000")  # type: ignore[arg-type]


def test_sync_expose_and_unexpose(server):
    with SyncClient.connect(server.url, server.token) as c, c.sandbox(requires=PORTS) as sb:
        url = sb.expose(8000)
        assert sb.get_host(8000) in url
        sb.unexpose(8000)
        assert status_of(url) == 404


async def test_a_stdio_server_refuses_to_expose_and_names_the_flag(bin_path):
    c = await StdioClient.start(bin_path, env={"RUST_LOG": "warn", "PATH": "/usr/bin:/bin"})
    try:
        async with await c.sandbox(requires=PORTS) as sb:
            with pytest.raises(SandboxRefusedError, match="--listen") as e:
                await sb.expose(8000)
            assert e.value.kind == "PortsNeedListener"
    finally:
        await c.close()
