"""The actor behind `airlock_ray.Session`: one stateful sandbox on one node's server.

With a state directory every node can reach, each successful call is followed by a snapshot
(files and the interpreter's variables) into it, the previous one removed: the driver can
start the sandbox again on another node from the last one if this node is lost.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from airlock_client import AsyncClient, Capability, DEFAULT_REQUIRES, Limits, RunResult, Sandbox

from ._server import Server, start_server


class SessionServer:
    def __init__(self, binary: Optional[str], state_dir: Optional[str], limits: Limits) -> None:
        self._binary, self._state_dir, self._limits = binary, state_dir, limits
        self._server: Optional[Server] = None
        self._client: Optional[AsyncClient] = None
        self._sandbox: Optional[Sandbox] = None
        self._snapshot: Optional[str] = None

    async def open(self, node_id: str, from_snapshot: Optional[str]) -> Dict[str, Any]:
        """Start the server and the sandbox (fresh, or from `from_snapshot`)."""
        args = ["--state-dir", self._state_dir] if self._state_dir else []
        self._server = await start_server(self._binary, args, f"node {node_id}")
        self._client = await AsyncClient.connect(self._server.url, self._server.token)
        requires = set(DEFAULT_REQUIRES) | ({Capability.SNAPSHOT} if self._state_dir else set())
        self._sandbox = await self._client.sandbox(stateful=True, requires=requires, limits=self._limits,
                                                   from_snapshot=from_snapshot)
        self._snapshot = from_snapshot
        return {"sandbox_id": self._sandbox.sandbox_id, "node_id": node_id, "pid": self._server.proc.pid}

    async def run_code(self, code: str, timeout: Optional[float]) -> Tuple[RunResult, Optional[str]]:
        """Run a cell; with a state dir, snapshot after it (the previous snapshot removed)."""
        assert self._sandbox is not None and self._client is not None
        result = await self._sandbox.run_code(code, timeout=timeout)
        if self._state_dir:
            previous, self._snapshot = self._snapshot, (await self._sandbox.snapshot()).snapshot_id
            if previous:
                await self._client.remove_snapshot(previous)
        return result, self._snapshot

    async def close(self) -> None:
        """Dispose of the sandbox and its last snapshot; stop the server."""
        if self._sandbox is not None:
            await self._sandbox.dispose()
        if self._client is not None and self._snapshot:
            await self._client.remove_snapshot(self._snapshot)
        if self._client is not None:
            await self._client.close()
        if self._server is not None:
            await self._server.stop()
