"""The driver's loop: bounded in-flight work over the node actors, re-sent when a node is lost.

At most `window` inputs are taken from the caller's iterable and not yet handed back, so a
batch of a million inputs holds a window's worth in the driver, not a million. A chunk whose
node dies (its actor, raylet or machine) is sent again to another node: every input gets
exactly one result, and a program may run more than once (at least once, never lost).
"""
from __future__ import annotations

import collections
from typing import Deque, Dict, Iterator, List, Optional, Tuple

import ray
from ray.exceptions import RayError, RayTaskError

from ._judge import Verdict
from ._pool import Node
from ._types import Job, ProgramResult

#: How many nodes one chunk may be sent to before it is given up as lost.
MAX_ATTEMPTS = 3


def lost(job: Job, attempts: int, why: str) -> ProgramResult:
    return ProgramResult(job.index, Verdict.SANDBOX_ERROR, "lost", attempts=attempts, error=why)


class Driver:
    """One pass over `jobs`; iterate it for the results."""

    def __init__(self, jobs: Iterator[Job], nodes: List[Node], *, chunk_size: int, window: int,
                 ordered: bool) -> None:
        self._jobs, self._nodes = jobs, list(nodes)
        self._chunk, self._window, self._ordered = chunk_size, window, ordered
        self._retry: Deque[Tuple[List[Job], int]] = collections.deque()
        self._pending: Dict[ray.ObjectRef, Tuple[Node, List[Job], int]] = {}  # type: ignore[type-arg]
        self._taken = 0  # taken from `jobs` and not yet handed back
        self._exhausted = False
        self._held: Dict[int, ProgramResult] = {}  # ordered: finished ahead of their turn
        self._next = 0

    def __iter__(self) -> Iterator[ProgramResult]:
        try:
            while True:
                self._fill()
                if not self._pending:
                    yield from self._give_up()
                    return
                ready, _ = ray.wait(list(self._pending), num_returns=1)
                for ref in ready:
                    yield from self._collect(ref)
        finally:
            self.cancel()

    def _fill(self) -> None:
        while True:
            node = min((n for n in self._nodes if n.in_flight < n.slots), key=lambda n: n.in_flight, default=None)
            if node is None:
                return
            if self._retry:
                chunk, attempts = self._retry.popleft()
            else:
                chunk, attempts = self._take(), 1
                if not chunk:
                    return
            node.in_flight += 1
            self._pending[node.actor.run.remote(chunk)] = (node, chunk, attempts)

    def _take(self) -> List[Job]:
        chunk: List[Job] = []
        while not self._exhausted and len(chunk) < self._chunk and self._taken < self._window:
            job = next(self._jobs, None)
            if job is None:
                self._exhausted = True
                break
            chunk.append(job)
            self._taken += 1
        return chunk

    def _collect(self, ref: "ray.ObjectRef[List[ProgramResult]]") -> Iterator[ProgramResult]:
        node, chunk, attempts = self._pending.pop(ref)
        node.in_flight -= 1
        try:
            results: List[ProgramResult] = ray.get(ref)
        except RayTaskError as e:  # the actor's code raised: a result per job, never a lost task
            results = [lost(job, attempts, f"the node's runner failed: {e}") for job in chunk]
        except RayError as e:  # the node is gone: its chunks go elsewhere
            if node in self._nodes:
                self._nodes.remove(node)
            if attempts < MAX_ATTEMPTS:
                self._retry.append((chunk, attempts + 1))
                return
            results = [lost(job, attempts, f"lost with its node {attempts} times: {type(e).__name__}")
                       for job in chunk]
        for r in results:
            r.attempts = attempts
            yield from self._hand_back(r)

    def _hand_back(self, r: ProgramResult) -> Iterator[ProgramResult]:
        if not self._ordered:
            self._taken -= 1
            yield r
            return
        self._held[r.index] = r
        while self._next in self._held:
            self._taken -= 1
            yield self._held.pop(self._next)
            self._next += 1

    def _give_up(self) -> Iterator[ProgramResult]:
        """Nothing in flight after a fill: either all is done, or no node is left."""
        if self._exhausted and not self._retry:
            return
        why = "no Ray node is left to run it"
        while self._retry:
            chunk, attempts = self._retry.popleft()
            for job in chunk:
                yield from self._hand_back(lost(job, attempts, why))
        if not self._exhausted and next(self._jobs, None) is not None:
            raise NoNodeLeft(f"every Ray node running the batch was lost; {why}")

    def cancel(self) -> None:
        """Cancel what is still in flight (each run is cancelled on its server)."""
        for ref in list(self._pending):
            try:
                ray.cancel(ref)
            except Exception:  # noqa: BLE001 - a lost node's task is gone already
                pass
        self._pending.clear()


class NoNodeLeft(RuntimeError):
    """Every node of the batch was lost before its inputs were all run."""


def window_for(nodes: List[Node], chunk_size: int, override: Optional[int]) -> int:
    """How many inputs may be out of the caller's iterable at once: enough to keep every slot
    busy and absorb some reordering (ordered results wait for the slowest in the window)."""
    return override or max(1, 4 * chunk_size * sum(n.slots for n in nodes))
