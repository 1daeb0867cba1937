"""The Ray batch rows: programs per second through airlock_ray.run_many on a local Ray
instance (every core a slot), against the same programs as plain `python3 -c` subprocesses in
Ray tasks (the floor: no sandbox), both sent in chunks of 8 programs per call. Prints one JSON line: {"airlock": rate, "floor": rate} or
{"error": why}. argv: AIRLOCK_BIN, the number of programs."""
import json
import os
import subprocess
import sys
import time

PROGRAM = "print(sum(range(1000)))"
EXPECTED = "499500\n"
CHUNK = 8


def main() -> None:
    os.environ["AIRLOCK_BIN"] = sys.argv[1]
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    n = int(sys.argv[2])
    try:
        import ray
        import airlock_ray
    except ImportError as e:
        print(json.dumps({"error": f"not installed: {e.name} (pip install ray; airlock_ray ships with the SDK)"}))
        return
    ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR")

    @ray.remote(num_cpus=1)
    def plain(count: int) -> list:
        return [subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True).stdout
                for _ in range(count)]

    def floor(count: int) -> float:
        """The same chunks as run_many's (CHUNK programs per Ray task), one CPU per task."""
        t = time.perf_counter()
        outs = [o for chunk in ray.get([plain.remote(min(CHUNK, count - i)) for i in range(0, count, CHUNK)])
                for o in chunk]
        assert outs == [EXPECTED] * count, outs[:3]
        return count / (time.perf_counter() - t)

    floor(max(4, n // 10))  # workers started
    f = floor(n)
    with airlock_ray.Pool(timeout=10) as pool:
        def airlock(count: int) -> float:
            t = time.perf_counter()
            results = pool.run_many([PROGRAM] * count, chunk_size=CHUNK)
            bad = [r for r in results if r.stdout != EXPECTED]
            assert not bad, bad[:1]
            return count / (time.perf_counter() - t)
        airlock(max(4, n // 10))  # zygote and connections warm
        a = airlock(n)
    print(json.dumps({"airlock": a, "floor": f}))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - the row says why
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
