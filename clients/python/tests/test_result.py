"""RunResult keeps every member the wire sends (docs/server.md, the terminal response)."""
from airlock_client import EgressDecision, RunError, RunResult, RunStatus

WIRE = {
    "status": "error", "stdout": "o", "stderr": "e", "exit_code": None, "signal": 9,
    "error": {"code": -32002, "message": "timed out"}, "stdout_truncated": True, "stderr_truncated": False,
    "stdout_bytes": 10, "stderr_bytes": 1, "wall_time_ms": 12.5, "peak_rss_bytes": 1024, "tool_calls": 2,
    "enforcement": ["rlimits", "cgroup"], "warm": True,
    "egress": [{"host": "example.com", "port": 443, "method": "CONNECT", "decision": "deny",
                "reason": "not_allowlisted", "message": "no", "address": None}],
    "run_id": "run-1", "sandbox_id": "sb-1", "output_dropped_bytes": 7, "future_member": {"x": 1},
}


def test_every_wire_member_is_kept():
    r = RunResult.from_wire(WIRE)
    assert r.status is RunStatus.ERROR and not r.ok
    assert (r.stdout, r.stderr, r.exit_code, r.signal) == ("o", "e", None, 9)
    assert r.error == RunError(-32002, "timed out")
    assert (r.stdout_truncated, r.stderr_truncated, r.stdout_bytes, r.stderr_bytes) == (True, False, 10, 1)
    assert (r.wall_time_ms, r.peak_rss_bytes, r.tool_calls) == (12.5, 1024, 2)
    assert r.enforcement == ["rlimits", "cgroup"] and r.warm is True
    assert r.egress == [EgressDecision("example.com", 443, "CONNECT", "deny", "not_allowlisted", "no", None)]
    assert (r.run_id, r.sandbox_id, r.output_dropped_bytes) == ("run-1", "sb-1", 7)
    assert r.raw["future_member"] == {"x": 1}
    assert RunResult.from_wire({**WIRE, "status": "teleported"}).status is RunStatus.UNKNOWN
