"""airlock on Ray: batches of programs, each in a fresh sandbox, across a Ray cluster.

One airlock server per Ray node, started by an actor pinned to that node; the driver streams
programs to the nodes with bounded memory and re-sends a lost node's work elsewhere (every input
gets exactly one result; a program runs at least once). Programs may carry tests (stdin in,
expected stdout out) and get a judge's verdict. Reference: docs/ray.md.
"""
from ._batch import Pool, Program, ProgramLike, imap, run_many
from ._drive import MAX_ATTEMPTS, NoNodeLeft
from ._session import NodeLost, Session
from ._judge import TestCase, TestOutcome, Verdict, same_output, with_stdin
from ._types import Limits, ProgramResult

__all__ = ["Limits", "MAX_ATTEMPTS", "NoNodeLeft", "NodeLost", "Session", "Pool", "Program", "ProgramLike", "ProgramResult", "TestCase",
           "TestOutcome", "Verdict", "imap", "run_many", "same_output", "with_stdin"]
