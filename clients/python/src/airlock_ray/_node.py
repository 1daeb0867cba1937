"""One airlock server per Ray node, owned by an actor pinned to that node.

The actor starts `airlock serve` (`_server.py`) and opens one WebSocket connection per slot. Each `run` call
takes a connection and runs its jobs one after another, every program (every test) a one-shot
`execute`: a fresh sandbox, forked from the server's zygote. Tool calls are answered here, in
the actor, by the functions the batch was given — never inside the sandbox.
"""
from __future__ import annotations

import asyncio
from typing import Dict, List, Mapping, Optional, Sequence

from airlock_client import AsyncClient, RunResult, ToolFn

from ._judge import TestCase, TestOutcome, Verdict, verdict_of, with_stdin
from ._server import Server, start_server
from ._types import Job, Limits, ProgramResult


class NodeServer:
    """The actor's body (wrapped with `ray.remote` by the pool)."""

    def __init__(self, slots: int, limits: Limits, tools: Optional[Mapping[str, ToolFn]] = None,
                 binary: Optional[str] = None, server_args: Sequence[str] = ()) -> None:
        self._slots = slots
        self._limits = limits
        self._tools: Dict[str, ToolFn] = dict(tools or {})
        self._binary = binary
        self._server_args = list(server_args)
        self._server: Optional[Server] = None
        self._free: "asyncio.Queue[AsyncClient]" = asyncio.Queue()
        self._node_id = ""

    async def start(self, node_id: str) -> int:
        """Start the server and its connections; returns its keeper's pid."""
        self._node_id = node_id
        self._server = await start_server(self._binary, ["--max-concurrent-runs", str(self._slots),
                                                         *self._server_args], f"node {node_id}")
        for _ in range(self._slots):
            self._free.put_nowait(await AsyncClient.connect(self._server.url, self._server.token))
        return self._server.proc.pid

    async def run(self, jobs: List[Job]) -> List[ProgramResult]:
        """Run `jobs` one after another on one connection; one result each."""
        client = await self._free.get()
        try:
            return [await self._run_job(client, job) for job in jobs]
        finally:
            self._free.put_nowait(client)

    async def _run_job(self, client: AsyncClient, job: Job) -> ProgramResult:
        if job.tests is None:
            try:
                result = await self._execute(client, job.code, None)
            except Exception as e:  # a refusal before the run: a result, never a lost task
                return self._sandbox_error(job, e)
            verdict = verdict_of(result, None)
            return self._result(job, verdict, result, [])
        outcomes: List[TestOutcome] = []
        last: Optional[RunResult] = None
        verdict = Verdict.ACCEPTED
        for test in job.tests:
            try:
                last = await self._execute(client, with_stdin(job.code, test.stdin), test)
            except Exception as e:
                return self._sandbox_error(job, e)
            verdict = verdict_of(last, test.expected)
            outcomes.append(TestOutcome(verdict, last.wall_time_ms, last.peak_rss_bytes, last.exit_code,
                                        last.stdout, last.stderr))
            if verdict != Verdict.ACCEPTED:
                break
        return self._result(job, verdict, last, outcomes)

    async def _execute(self, client: AsyncClient, code: str, test: Optional[TestCase]) -> RunResult:
        timeout = test.timeout if test and test.timeout is not None else self._limits.timeout
        memory = test.memory_mb if test and test.memory_mb is not None else self._limits.memory_mb
        return await client.execute(code, tools=self._tools, timeout=timeout, memory_mb=memory,
                                    max_output_bytes=self._limits.max_output_bytes)

    def _result(self, job: Job, verdict: Verdict, run: Optional[RunResult],
                tests: List[TestOutcome]) -> ProgramResult:
        if run is None:  # a job with an empty test list
            return ProgramResult(job.index, verdict, "completed", node_id=self._node_id)
        error = run.error.message if verdict == Verdict.SANDBOX_ERROR and run.error else None
        return ProgramResult(job.index, verdict, run.status.value, run.stdout, run.stderr, run.exit_code,
                             run.wall_time_ms, tests, self._node_id, error=error)

    def _sandbox_error(self, job: Job, e: Exception) -> ProgramResult:
        return ProgramResult(job.index, Verdict.SANDBOX_ERROR, "refused", node_id=self._node_id,
                             error=f"{type(e).__name__}: {e}")

    async def stop(self) -> None:
        """Close the connections and stop the server (it disposes its sandboxes)."""
        while not self._free.empty():
            await self._free.get_nowait().close()
        if self._server is not None:
            await self._server.stop()
