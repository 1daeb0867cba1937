"""airlock on a real multi-node Ray cluster on this machine (`ray.cluster_utils.Cluster`, three
nodes): a batch with tests survives a node's loss with exactly one correct verdict per input
and leaves no sandbox process or cgroup behind; a stream holds a bounded window in the driver.

The binary is a private copy (its path names every server, stage and zygote it starts), so
"nothing left" is checked against this test's processes only. AIRLOCK_REQUIRE_RAY=1 (the
suite sets it) turns a missing `ray` into a failure instead of a skip.
"""
import os
import pathlib
import resource
import shutil
import signal
import subprocess
import sys
import time

import pytest

if os.environ.get("AIRLOCK_REQUIRE_RAY") != "1":
    pytest.importorskip("ray")
import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import airlock_ray as ar  # noqa: E402

from conftest import airlock_bin  # noqa: E402

PROGRAMS = int(os.environ.get("AIRLOCK_RAY_PROGRAMS", "2000"))
STREAM = int(os.environ.get("AIRLOCK_RAY_STREAM", "2000"))
#: How much the driver's peak RSS may grow over a stream after its first tenth (docs/ray.md).
RSS_CEILING_MIB = 64
#: The two tests every program of the batch is judged against: read two ints, print the sum.
TESTS = [ar.TestCase("2 3\n", "5\n"), ar.TestCase("-7 10\n", "3\n")]


def candidate(i: int):
    """The i-th candidate solution and the verdict it deserves."""
    kind = i % 100
    if kind == 1:
        return "a, b = map(int, input().split())\nprint(a - b)", ar.Verdict.WRONG_ANSWER
    if kind == 2:
        return "a, b = map(int, input().split())\nprint(a / 0)", ar.Verdict.RUNTIME_ERROR
    if kind == 3 and i < 1000:
        return "while True:\n    pass", ar.Verdict.TIME_LIMIT
    if kind == 4 and i < 1000:
        return "x = bytearray(400 * 2**20)\nprint(len(x))", ar.Verdict.MEMORY_LIMIT
    if kind == 5:  # crashes its interpreter: its verdict, not a way out of one
        return "import os\nos.abort()", ar.Verdict.RUNTIME_ERROR
    if kind == 6:  # a syscall the seccomp filter kills for (ptrace)
        return "import ctypes\nctypes.CDLL(None).syscall(101, 16, 1, 0, 0)\nprint(5)", ar.Verdict.RUNTIME_ERROR
    style = ["print(sum(map(int, input().split())))",
             "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)",
             f"# candidate {i}\na, b = (int(t) for t in input().split())\nprint(f'{{a + b}}   ')"]
    return style[i % 3], ar.Verdict.ACCEPTED


def cgroups() -> set:
    """The airlock run cgroups on the host, every hierarchy."""
    found = set()
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        found.update(os.path.join(root, d) for d in dirs if d.startswith("airlock-"))
    return found


def processes_of(marker: str) -> list:
    """Live processes whose command line names `marker` (the private binary's directory)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            found.append(f"{pid}: {cmd}")
    return found


def gone(pid: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not os.path.exists(f"/proc/{pid}"), f"{pid} outlived its node"


def eventually_empty(what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while (left := what()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    bin_dir = tmp_path_factory.mktemp("ray-airlock-bin")
    os.chmod(bin_dir, 0o755)
    src = pathlib.Path(airlock_bin())
    for name in ("airlock", "libairlock_zygote.so"):
        if (src.parent / name).exists():
            shutil.copy2(src.parent / name, bin_dir / name)
    old = os.environ.get("AIRLOCK_BIN")
    os.environ["AIRLOCK_BIN"] = str(bin_dir / "airlock")  # the nodes' workers inherit it
    os.environ["RAY_AUTH_MODE"] = "disabled"
    # The nodes' workers import airlock_ray and airlock_client from this checkout (installed
    # on every node in a real cluster): they inherit the environment the nodes start with.
    src = str(pathlib.Path(__file__).resolve().parents[1] / "src")
    old_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (src, old_path) if p)
    before = cgroups()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    workers = [c.add_node(num_cpus=1) for _ in range(2)]
    ray.init(address=c.address, log_to_driver=False)
    try:
        yield c, workers, str(bin_dir), before
    finally:
        ray.shutdown()
        c.shutdown()
        for var, value in (("AIRLOCK_BIN", old), ("PYTHONPATH", old_path)):
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def test_a_batch_survives_a_lost_node_with_one_correct_verdict_per_input(cluster):
    c, workers, bin_dir, cgroups_before = cluster
    expected = {}

    def programs():
        for i in range(PROGRAMS):
            code, verdict = candidate(i)
            expected[i] = verdict
            yield code

    results = {}
    with ar.Pool(timeout=2, memory_mb=128) as pool:
        assert len(pool.node_ids) == 3
        servers = processes_of(bin_dir)
        assert len([p for p in servers if p.split(": ", 1)[1].startswith(f"{bin_dir}/airlock serve ")]) == 3, servers
        for r in pool.imap_unordered(programs(), tests=TESTS, chunk_size=4):
            assert r.index not in results, f"input {r.index} got two results"
            results[r.index] = r
            if len(results) == PROGRAMS // 4:
                c.remove_node(workers[0], allow_graceful=False)  # its raylet, workers and server die
    assert sorted(results) == list(range(PROGRAMS))
    wrong = {i: (r.verdict, expected[i], r.error) for i, r in results.items() if r.verdict != expected[i]}
    assert not wrong, list(wrong.items())[:10]
    assert any(r.attempts > 1 for r in results.values()), "the lost node's chunks were never re-sent"
    assert all(len(r.tests) == (2 if r.verdict == ar.Verdict.ACCEPTED else 1) or expected[r.index] in (
        ar.Verdict.WRONG_ANSWER,) for r in results.values())
    assert eventually_empty(lambda: processes_of(bin_dir)) == []
    assert eventually_empty(lambda: cgroups() - cgroups_before) == set()


def test_a_stream_holds_a_bounded_window_in_the_driver(cluster):
    _, _, bin_dir, _ = cluster
    taken, out, ahead = [0], [0], [0]

    def trivial():
        for i in range(STREAM):
            taken[0] += 1
            ahead[0] = max(ahead[0], taken[0] - out[0])
            yield f"print({i})"

    window = 64
    rss = []
    started = time.monotonic()
    with ar.Pool(timeout=5) as pool:
        for r in pool.imap(trivial(), chunk_size=8, window=window):
            assert r.index == out[0] and r.stdout == f"{r.index}\n", (r.index, out[0], r.stdout, r.error)
            out[0] += 1
            if out[0] % max(1, STREAM // 10) == 0:
                rss.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
                # A soak's progress: how far, how fast, the driver's peak RSS so far.
                print(f"{out[0]} results in {time.monotonic() - started:.0f} s, "
                      f"peak RSS {rss[-1] // 1024} MiB", flush=True)
    assert out[0] == STREAM
    assert ahead[0] <= window + 1, f"the driver took {ahead[0]} inputs ahead of their results"
    print(f"driver max RSS over the stream: {rss[0] // 1024} -> {rss[-1] // 1024} MiB")
    # The ceiling docs/ray.md states: the driver's peak RSS grows by at most RSS_CEILING_MIB
    # from the stream's first tenth to its end, whatever the count.
    assert (rss[-1] - rss[0]) // 1024 <= RSS_CEILING_MIB, rss
    assert eventually_empty(lambda: processes_of(bin_dir)) == []


INTERRUPTED_DRIVER = """
import os, sys, ray, airlock_ray as ar
ray.init(address=sys.argv[1], log_to_driver=False)
slow = ("import time\\nprint('started', flush=True)\\ntime.sleep(60)" for _ in range(50))
print("driving", flush=True)
ar.run_many(slow, timeout=120, max_in_flight_per_node=2)
"""


def test_the_driver_s_interrupt_cancels_everything_and_leaves_no_sandbox(cluster, tmp_path):
    c, _, bin_dir, cgroups_before = cluster
    script = tmp_path / "driver.py"
    script.write_text(INTERRUPTED_DRIVER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, str(script), c.address], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline().strip() == "driving"
        deadline = time.monotonic() + 60
        while len(guests_of(bin_dir)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(guests_of(bin_dir)) >= 2, "the batch's programs never started"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) != 0
    finally:
        proc.kill()
    assert eventually_empty(lambda: processes_of(bin_dir)) == []
    assert eventually_empty(lambda: cgroups() - cgroups_before) == set()


def guests_of(bin_dir: str) -> list:
    """The sandboxed programs forked from this test's servers' zygotes: the zygote's command
    line, in a pid namespace of their own (the zygote itself is in the host's)."""
    found = []
    for p in processes_of(f"{bin_dir}/libairlock_zygote.so"):
        pid = p.split(":")[0]
        try:
            nspid = [line for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines()
                     if line.startswith("NSpid:")]
        except OSError:
            continue
        if nspid and len(nspid[0].split()) > 2:
            found.append(p)
    return found


def test_a_session_lives_on_one_node_and_its_loss_is_said_or_resumed_elsewhere(cluster, tmp_path):
    c, _, bin_dir, _ = cluster
    doomed = [c.add_node(num_cpus=1) for _ in range(2)]
    c.wait_for_nodes()
    ids = [n.node_id for n in doomed]
    plain = ar.Session(node_id=ids[0], timeout=10)
    kept = ar.Session(node_id=ids[1], timeout=10, state_dir=str(tmp_path / "state"))
    try:
        assert plain.node_id == ids[0] and kept.node_id == ids[1]
        assert plain.run_code("x = 41\nprint(x + 1)").stdout == "42\n"
        assert kept.run_code("import os\nopen('/work/f', 'w').write('kept')\ny = [1, 2, 3]").status == "completed"
        c.remove_node(doomed[0], allow_graceful=False)
        gone(plain.server_pid)  # the actor's worker notices its raylet is gone, and dies
        with pytest.raises(ar.NodeLost, match="was lost"):
            plain.run_code("x")
        with pytest.raises(ar.NodeLost, match="state"):
            plain.run_code("x")  # stays lost, said again
        c.remove_node(doomed[1], allow_graceful=False)
        gone(kept.server_pid)
        r = kept.run_code("print(open('/work/f').read(), sum(y))")
        assert r.stdout == "kept 6\n", (r.status, r.stdout, r.stderr)
        assert kept.resumes == 1 and kept.node_id not in ids
    finally:
        plain.close()
        kept.close()
    assert eventually_empty(lambda: processes_of(bin_dir)) == []


def test_the_code_reward_example_runs_on_the_cluster(cluster):
    c, _, bin_dir, _ = cluster
    example = pathlib.Path(__file__).resolve().parents[3] / "examples" / "ray_code_reward.py"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "RAY_ADDRESS": c.address}
    out = subprocess.run([sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    # Ray's own driver messages (the nodes earlier tests removed) may be interleaved.
    lines = [line.split() for line in out.stdout.splitlines() if line.startswith("candidate ")]
    assert [(w[2], w[4]) for w in lines] == [
        ("accepted", "1.00"), ("wrong_answer", "0.25"), ("accepted", "1.00"),
        ("runtime_error", "0.00"), ("runtime_error", "0.00")], out.stdout
    assert eventually_empty(lambda: processes_of(bin_dir)) == []
