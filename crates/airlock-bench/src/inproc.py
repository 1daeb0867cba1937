# airlock bench helper: measures the in-process tier (pydantic-monty, smolagents'
# LocalPythonExecutor) from inside one Python process.
# usage: inproc.py MODE SYSTEM N ; prints one JSON line {"samples": [...]} or {"error": "..."}.
# MODE: start (ms per request-to-result of print(1)), tools (µs per echo round trip),
# throughput (waits for "go" on stdin, then runs N starts; reports its loop's seconds),
# memory (MiB per idle sandbox), kill (ms from the time limit to the caller getting control back).
import json, os, sys, time

MODE, SYSTEM, N = sys.argv[1], sys.argv[2], int(sys.argv[3])
CALLS = 1000


def pss_mib(pid="self"):
    # PSS (proportional set size): a page shared by n processes counts 1/n in each.
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def monty_system():
    import pydantic_monty as m

    def start_one():
        with m.Monty() as pool:
            with pool.checkout() as s:
                s.feed_run("print(1)", print_callback=m.CollectString())

    pooled = {}

    def pooled_one():
        if "pool" not in pooled:
            pooled["pool"] = m.Monty(max_checkouts_per_worker=1).__enter__()
            with pooled["pool"].checkout() as s:
                s.feed_run("pass")
            time.sleep(0.05)
        with pooled["pool"].checkout() as s:
            s.feed_run("print(1)", print_callback=m.CollectString())

    def tools():
        stamps = []

        def echo(x):
            stamps.append(time.perf_counter_ns())
            return x

        with m.Monty() as pool:
            with pool.checkout(limits={"max_suspensions": CALLS * 2}) as s:
                s.feed_run(f"for i in range({CALLS}):\n    echo({{'i': i}})", external_lookup={"echo": echo})
        return [(b - a) / 1e3 for a, b in zip(stamps, stamps[1:])]

    def memory():
        import contextlib

        # N workers alive at once, like every other system's N idle sandboxes.
        with m.Monty(min_processes=N, max_processes=N) as pool, contextlib.ExitStack() as held:
            sessions = [held.enter_context(pool.checkout()) for _ in range(N)]
            for s in sessions:
                s.feed_run("pass")
            pids = [s.worker_pid() if callable(s.worker_pid) else s.worker_pid for s in sessions]
            return [pss_mib(pid) for pid in pids]

    def kill():
        out = []
        with m.Monty() as pool:
            for _ in range(N):
                with pool.checkout(limits={"max_feed_duration_secs": 0.2}) as s:
                    t = time.perf_counter()
                    try:
                        s.feed_run("while True:\n    pass")
                    except Exception:
                        pass
                    out.append((time.perf_counter() - t - 0.2) * 1e3)
        return out

    return start_one, pooled_one, tools, memory, kill


def smol_system():
    from smolagents.local_python_executor import LocalPythonExecutor

    def start_one():
        ex = LocalPythonExecutor(additional_authorized_imports=[])
        ex.send_tools({})
        ex("print(1)")

    def tools():
        stamps = []

        def echo(x):
            stamps.append(time.perf_counter_ns())
            return x

        ex = LocalPythonExecutor(additional_authorized_imports=[])
        ex.send_tools({"echo": echo})
        ex(f"for i in range({CALLS}):\n    echo({{'i': i}})")
        return [(b - a) / 1e3 for a, b in zip(stamps, stamps[1:])]

    def memory():
        keep = []
        before = pss_mib()
        for _ in range(N):
            ex = LocalPythonExecutor(additional_authorized_imports=[])
            ex.send_tools({})
            ex("x = 1")
            keep.append(ex)
        return [(pss_mib() - before) / N]

    def kill():
        ex = LocalPythonExecutor(additional_authorized_imports=[], timeout_seconds=1)
        ex.send_tools({})
        t = time.perf_counter()
        try:
            ex("while True:\n    pass")
        except Exception:
            pass
        return [(time.perf_counter() - t - 1.0) * 1e3]

    return start_one, start_one, tools, memory, kill


def main():
    try:
        make = {"monty": monty_system, "monty-pooled": monty_system, "smolagents": smol_system}[SYSTEM]
        start_one, pooled_one, tools, memory, kill = make()
    except ImportError as e:
        return {"error": f"not installed ({e.name})"}
    one = pooled_one if SYSTEM == "monty-pooled" else start_one
    if MODE == "start":
        one()  # warm-up: imports, first worker
        out = []
        for _ in range(N):
            t = time.perf_counter()
            one()
            out.append((time.perf_counter() - t) * 1e3)
            if SYSTEM == "monty-pooled":
                time.sleep(0.05)  # let the pool replace the recycled worker, as airlock's refills
        return {"samples": out}
    if MODE == "throughput":
        one()
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        sys.stdin.readline()
        t = time.perf_counter()
        for _ in range(N):
            one()
        return {"samples": [time.perf_counter() - t]}
    if MODE == "tools":
        return {"samples": tools()}
    if MODE == "memory":
        return {"samples": memory()}
    if MODE == "kill":
        return {"samples": kill()}
    return {"error": f"unknown mode {MODE}"}


try:
    result = main()
except Exception as e:  # report, never hang the bench
    result = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
sys.stdout.write(json.dumps(result) + "\n")
sys.stdout.flush()
os._exit(0)
