"""Code-reward evaluation the way an RL loop calls it: a batch of candidate solutions (as a
policy model would sample them) judged against hidden tests across a Ray cluster, each
candidate in a fresh airlock sandbox; the reward is the fraction of tests passed.

    pip install '<the airlock wheel>[ray]'     # or: PYTHONPATH=clients/python/src, ray installed
    python3 examples/ray_code_reward.py           # a local Ray instance; ray.init(address=...) on a cluster
"""
from __future__ import annotations

import ray

import airlock_ray as ar

# The task: read n, then n integers; print the largest sum of a contiguous non-empty run.
HIDDEN_TESTS = [
    ar.TestCase("5\n1 -2 3 4 -1\n", "7\n"),
    ar.TestCase("3\n-5 -1 -7\n", "-1\n"),
    ar.TestCase("1\n42\n", "42\n"),
    ar.TestCase("6\n2 -1 2 -1 2 -1\n", "4\n", timeout=2),
]

# What a policy might sample: right, wrong, too slow, crashing, hostile.
CANDIDATES = [
    # Kadane's algorithm: correct.
    "n = int(input())\nxs = list(map(int, input().split()))\nbest = cur = xs[0]\n"
    "for x in xs[1:]:\n    cur = max(x, cur + x)\n    best = max(best, cur)\nprint(best)",
    # Forgets that every number may be negative: wrong on the second test.
    "n = int(input())\nxs = list(map(int, input().split()))\nbest = cur = 0\n"
    "for x in xs:\n    cur = max(0, cur + x)\n    best = max(best, cur)\nprint(best)",
    # Brute force, correct (fine at this size).
    "n = int(input())\nxs = list(map(int, input().split()))\n"
    "print(max(sum(xs[i:j]) for i in range(n) for j in range(i + 1, n + 1)))",
    # Crashes.
    "xs = input().split()\nprint(xs[10])",
    # Hostile: tries to read the host's secrets and reach the network; gets nothing.
    "import socket\ntry:\n    print(open('/etc/shadow').read())\nexcept OSError as e:\n    print('no:', e)\n"
    "socket.create_connection(('1.1.1.1', 80), timeout=1)",
]


def rewards(results: list[ar.ProgramResult]) -> list[float]:
    """Fraction of hidden tests passed (a program stops at its first failing test)."""
    passed = [sum(t.verdict == ar.Verdict.ACCEPTED for t in r.tests) for r in results]
    return [p / len(HIDDEN_TESTS) for p in passed]


def main() -> None:
    ray.init(include_dashboard=False, log_to_driver=False)
    results = ar.run_many(CANDIDATES, tests=HIDDEN_TESTS, timeout=2, memory_mb=256)
    for r, reward in zip(results, rewards(results)):
        print(f"candidate {r.index}: {r.verdict.value:<14} reward {reward:.2f}")


if __name__ == "__main__":
    main()
