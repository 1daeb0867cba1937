"""`airlock_ray.Session`: a stateful sandbox pinned to one Ray node, for a multi-turn agent."""
from __future__ import annotations

from typing import Any, Optional, Type

import ray
from ray.exceptions import RayActorError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from airlock_client import Limits, RunResult

from ._pool import alive_nodes
from ._session_actor import SessionServer


class NodeLost(RuntimeError):
    """The node holding a session's sandbox was lost, and with it the sandbox (no state dir to
    start it again from)."""


class Session:
    """A stateful sandbox (variables persist across `run_code`) on one node's airlock server.

    `node_id`: the node (default: the first alive node that has CPUs). `state_dir`: a directory every node reaches (NFS, a shared
    volume): after every call the sandbox is snapshotted there, and if its node is lost the next
    call starts it again on another node from that snapshot and runs (the call that was in
    flight runs again: at least once). Without it, the loss raises `NodeLost`.
    """

    def __init__(self, *, node_id: Optional[str] = None, state_dir: Optional[str] = None,
                 timeout: Optional[float] = None, memory_mb: Optional[int] = None,
                 binary: Optional[str] = None) -> None:
        if not ray.is_initialized():
            ray.init()
        self._state_dir, self._binary = state_dir, binary
        self._limits = Limits(timeout_s=timeout, memory_mb=memory_mb)
        self._snapshot: Optional[str] = None
        self._lost: Optional[str] = None
        #: How many times the sandbox was started again on another node.
        self.resumes = 0
        self._open(node_id or alive_nodes()[0]["NodeID"])

    def _open(self, node_id: str) -> None:
        remote: Any = ray.remote(SessionServer)
        self._actor = remote.options(
            num_cpus=0, max_restarts=0, max_concurrency=2,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(self._binary, self._state_dir, self._limits)
        info = ray.get(self._actor.open.remote(node_id, self._snapshot))
        self.node_id: str = info["node_id"]
        self.sandbox_id: str = info["sandbox_id"]
        #: The pid (on its node) of the process keeping the session's server.
        self.server_pid: int = info["pid"]

    def run_code(self, code: str, *, timeout: Optional[float] = None) -> RunResult:
        """Run a cell in the session's interpreter; its RunResult (`.value`, `.stdout`, ...)."""
        if self._lost:
            raise NodeLost(self._lost)
        try:
            result, snap = ray.get(self._actor.run_code.remote(code, timeout))
        except RayActorError as e:
            lost = f"the node {self.node_id} holding sandbox {self.sandbox_id} was lost ({type(e).__name__})"
            if not self._state_dir:
                self._lost = lost + "; its sandbox and state are gone (give a state_dir to resume elsewhere)"
                raise NodeLost(self._lost) from e
            if not self._reopen_elsewhere():
                self._lost = lost + "; no other node could start it again"
                raise NodeLost(self._lost) from e
            self.resumes += 1
            result, snap = ray.get(self._actor.run_code.remote(code, timeout))
        self._snapshot = snap
        return result  # type: ignore[no-any-return]

    def _reopen_elsewhere(self) -> bool:
        """Start the sandbox from its last snapshot on another alive node (Ray may still call
        a just-lost node alive: each candidate is tried in turn)."""
        lost = self.node_id
        for node in [n["NodeID"] for n in alive_nodes() if n["NodeID"] != lost]:
            try:
                self._open(node)
                return True
            except RayActorError:
                continue
        return False

    def close(self) -> None:
        """Dispose of the sandbox (and its snapshot) and stop its server."""
        if not self._lost:
            try:
                ray.get(self._actor.close.remote(), timeout=60)
            except RayActorError:
                pass
        ray.kill(self._actor)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: object) -> None:
        self.close()
