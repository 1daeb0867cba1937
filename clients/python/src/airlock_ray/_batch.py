"""The public batch API: a `Pool` of node servers, and `run_many` / `imap` / `imap_unordered`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, List, Mapping, Optional, Sequence, Type, Union

import ray

from airlock_client import ToolFn

from ._drive import Driver, window_for
from ._judge import TestCase
from ._pool import Node, start_nodes, stop_nodes
from ._types import Job, Limits, ProgramResult


@dataclass(frozen=True)
class Program:
    """A program and, optionally, its own tests (else the batch's `tests=`)."""

    code: str
    tests: Optional[Sequence[TestCase]] = None


ProgramLike = Union[str, Program]


def _jobs(programs: Iterable[ProgramLike], tests: Optional[Sequence[TestCase]]) -> Iterator[Job]:
    shared = tuple(tests) if tests is not None else None
    for index, p in enumerate(programs):
        if isinstance(p, str):
            yield Job(index, p, shared)
        elif isinstance(p, Program):
            yield Job(index, p.code, tuple(p.tests) if p.tests is not None else shared)
        else:
            raise TypeError(f"input {index}: a program is a str or an airlock_ray.Program, not {type(p).__name__}")


class Pool:
    """One airlock server per alive Ray node (an actor pinned to it), reused by every batch run
    through this pool. Connects to Ray (`ray.init()`) if the caller has not. `close()` (or
    leaving the `with` block) stops every server, disposing whatever sandbox is left."""

    def __init__(self, *, max_in_flight_per_node: Optional[int] = None, timeout: Optional[float] = None,
                 memory_mb: Optional[int] = None, max_output_bytes: Optional[int] = None,
                 tools: Optional[Mapping[str, ToolFn]] = None, binary: Optional[str] = None,
                 server_args: Sequence[str] = ()) -> None:
        if max_in_flight_per_node is not None and max_in_flight_per_node < 1:
            raise ValueError("max_in_flight_per_node is at least 1")
        if not ray.is_initialized():
            ray.init()
        self._nodes: List[Node] = start_nodes(
            slots_per_node=max_in_flight_per_node, limits=Limits(timeout, memory_mb, max_output_bytes),
            tools=tools, binary=binary, server_args=server_args)

    @property
    def node_ids(self) -> List[str]:
        return [n.node_id for n in self._nodes]

    def imap(self, programs: Iterable[ProgramLike], *, tests: Optional[Sequence[TestCase]] = None,
             chunk_size: int = 1, window: Optional[int] = None) -> Iterator[ProgramResult]:
        """Results in input order, lazily: at most `window` inputs are out at once."""
        return self._drive(programs, tests, chunk_size, window, ordered=True)

    def imap_unordered(self, programs: Iterable[ProgramLike], *, tests: Optional[Sequence[TestCase]] = None,
                       chunk_size: int = 1, window: Optional[int] = None) -> Iterator[ProgramResult]:
        """Results as they finish (`.index` says which input)."""
        return self._drive(programs, tests, chunk_size, window, ordered=False)

    def run_many(self, programs: Iterable[ProgramLike], *, tests: Optional[Sequence[TestCase]] = None,
                 chunk_size: int = 1) -> List[ProgramResult]:
        """Every result, in input order, as a list (use `imap` to stream a large batch)."""
        return list(self.imap(programs, tests=tests, chunk_size=chunk_size))

    def _drive(self, programs: Iterable[ProgramLike], tests: Optional[Sequence[TestCase]], chunk_size: int,
               window: Optional[int], *, ordered: bool) -> Iterator[ProgramResult]:
        if chunk_size < 1:
            raise ValueError("chunk_size is at least 1")
        alive = [n for n in self._nodes]
        driver = Driver(_jobs(programs, tests), alive, chunk_size=chunk_size,
                        window=window_for(alive, chunk_size, window), ordered=ordered)
        return iter(driver)

    def close(self) -> None:
        stop_nodes(self._nodes)
        self._nodes = []

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: object) -> None:
        self.close()


def run_many(programs: Iterable[ProgramLike], *, timeout: Optional[float] = None, memory_mb: Optional[int] = None,
             tests: Optional[Sequence[TestCase]] = None, tools: Optional[Mapping[str, ToolFn]] = None,
             max_in_flight_per_node: Optional[int] = None, chunk_size: int = 1,
             binary: Optional[str] = None) -> List[ProgramResult]:
    """Run every program, each in a fresh sandbox, across the Ray cluster; results in input
    order. A pool is started for the call and stopped after it (an interrupt included)."""
    with Pool(max_in_flight_per_node=max_in_flight_per_node, timeout=timeout, memory_mb=memory_mb,
              tools=tools, binary=binary) as pool:
        return pool.run_many(programs, tests=tests, chunk_size=chunk_size)


def imap(programs: Iterable[ProgramLike], *, timeout: Optional[float] = None, memory_mb: Optional[int] = None,
         tests: Optional[Sequence[TestCase]] = None, tools: Optional[Mapping[str, ToolFn]] = None,
         max_in_flight_per_node: Optional[int] = None, chunk_size: int = 1, ordered: bool = True,
         binary: Optional[str] = None) -> Iterator[ProgramResult]:
    """`run_many` as a stream (in input order, or as they finish with `ordered=False`): memory
    bounded by the window, whatever the number of inputs. The pool lives as long as the iterator."""
    with Pool(max_in_flight_per_node=max_in_flight_per_node, timeout=timeout, memory_mb=memory_mb,
              tools=tools, binary=binary) as pool:
        stream = pool.imap(programs, tests=tests, chunk_size=chunk_size) if ordered else \
            pool.imap_unordered(programs, tests=tests, chunk_size=chunk_size)
        yield from stream


