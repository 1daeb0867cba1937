"""The judge's pieces without Ray: the stdin harness, the output comparison, the verdicts."""
import builtins
import contextlib
import io

import pytest

pytest.importorskip("ray")

from airlock_client import RunResult, RunStatus  # noqa: E402
from airlock_client.result import RunError  # noqa: E402
from airlock_ray import Verdict, same_output, with_stdin  # noqa: E402
from airlock_ray._judge import verdict_of  # noqa: E402


def run_harness(code: str, stdin: str) -> str:
    out, real_input, real_stdin = io.StringIO(), builtins.input, __import__("sys").stdin
    try:
        with contextlib.redirect_stdout(out):
            exec(with_stdin(code, stdin), {})
    finally:
        builtins.input, __import__("sys").stdin = real_input, real_stdin
    return out.getvalue()


def test_the_harness_feeds_stdin_to_input_and_sys_stdin_and_runs_as_main():
    code = ("import sys\na = int(input())\nb = sys.stdin.readline().strip()\n"
            "rest = sys.stdin.read()\nprint(a * 2, b, rest, __name__)")
    assert run_harness(code, "21\nxy\n\u00e9z") == "42 xy \u00e9z __main__\n"
    assert run_harness("import sys; print(sys.stdin.buffer.read())", "\u00e9") == "b'\\xc3\\xa9'\n"


def test_the_harness_gives_eof_past_the_input_and_keeps_the_code_verbatim():
    assert run_harness("try:\n    input(); input()\nexcept EOFError as e:\n    print('eof', e)", "one\n") \
        == "eof EOF when reading a line\n"
    tricky = 'print("""{braces} \\\\ \'q\' \\n""")'
    assert run_harness(tricky, "") == "{braces} \\ 'q' \n\n"


def test_the_harness_names_the_solution_in_tracebacks():
    with pytest.raises(ZeroDivisionError) as e:
        run_harness("x = 1\nprint(x / 0)", "")
    assert any(f.filename == "solution.py" and f.lineno == 2 for f in __import__("traceback").extract_tb(e.tb))


@pytest.mark.parametrize("got,expected,same", [
    ("1 2\n3\n", "1 2\n3", True),
    ("1 2   \n3\n\n\n", "1 2\n3\n", True),
    ("1 2\r\n3\r\n", "1 2\n3\n", True),
    ("1  2\n", "1 2\n", False),
    ("1\n\n2\n", "1\n2\n", False),
    ("", "0\n", False),
])
def test_output_is_compared_like_a_judge(got, expected, same):
    assert same_output(got, expected) is same


def result(status: RunStatus, exit_code=0, stdout="", code=None, truncated=False) -> RunResult:
    return RunResult(status=status, stdout=stdout, stderr="", exit_code=exit_code, signal=None,
                     error=RunError(code, "x") if code else None, stdout_truncated=truncated,
                     stderr_truncated=False, stdout_bytes=len(stdout), stderr_bytes=0, wall_time_ms=1.0,
                     peak_rss_bytes=0, tool_calls=0, run_id="r")


@pytest.mark.parametrize("run,expected,verdict", [
    (result(RunStatus.COMPLETED, stdout="3\n"), "3", Verdict.ACCEPTED),
    (result(RunStatus.COMPLETED, stdout="4\n"), "3", Verdict.WRONG_ANSWER),
    (result(RunStatus.COMPLETED, stdout="3\n", truncated=True), "3", Verdict.WRONG_ANSWER),
    (result(RunStatus.TIMEOUT, exit_code=124, code=-32002), "3", Verdict.TIME_LIMIT),
    (result(RunStatus.MEMORY_LIMIT, exit_code=None, code=-32003), "3", Verdict.MEMORY_LIMIT),
    (result(RunStatus.ERROR, exit_code=1, code=-32015), "3", Verdict.RUNTIME_ERROR),
    (result(RunStatus.KILLED, exit_code=None), "3", Verdict.RUNTIME_ERROR),
    # A crash, a seccomp kill, a broker error during the run: the program can bring them
    # about, so they are its verdict, never a way out of one (the red team's abort()).
    (result(RunStatus.ERROR, exit_code=None, code=-32010), "3", Verdict.RUNTIME_ERROR),
    (result(RunStatus.KILLED, exit_code=None, code=-32010), "3", Verdict.RUNTIME_ERROR),
    (result(RunStatus.ERROR, exit_code=None, code=-32603), "3", Verdict.RUNTIME_ERROR),
    (result(RunStatus.ERROR, exit_code=None, code=-32012), "3", Verdict.SANDBOX_ERROR),
    (result(RunStatus.REFUSED, exit_code=None, code=-32007), "3", Verdict.SANDBOX_ERROR),
    (result(RunStatus.COMPLETED, stdout="whatever"), None, Verdict.ACCEPTED),
])
def test_verdicts(run, expected, verdict):
    assert verdict_of(run, expected) == verdict
