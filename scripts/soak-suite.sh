#!/usr/bin/env bash
# The flake hunt: runs chosen suites N times under load (busy loops on every core, memory held
# away from the tests) and reports every test that ever failed, with the runs it failed in and
# each failure's log. docs/testing.md says how to read it and what was found.
#
# Usage: bash scripts/soak-suite.sh [--runs N] [--load cpu,memory|cpu|memory|none]
#                                   [--memory-gib G] [--out DIR] SUITE...
#   SUITE: workspace   every cargo test binary (--no-fail-fast: one failure stops nothing)
#          zygote      the sandbox attack suite with every Python run forked from a zygote
#          as-user     the in-process attack suites as airlock-test (root only)
#          python      the Python client's tests
#          maf         maf-sandbox's conformance suites (root and airlock-test)
#          docs        every code block of README.md and docs/
#          all         all of the above (what scripts/test.sh runs, less fmt, lints, dist, fuzz)
#          'cargo:ARGS' one cargo test invocation, e.g. 'cargo:-p airlock-cli --test serve_all'
# Defaults: 5 runs, cpu and memory load, half of MemAvailable held, DIR under /tmp.
# Run scripts/test.sh once first (it installs what the suites need); exits 1 if any test failed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

runs=5 load=cpu,memory memory_gib="" out="" suites=()
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs="$2"; shift 2 ;;
        --load) load="$2"; shift 2 ;;
        --memory-gib) memory_gib="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        -*) echo "soak-suite: unknown option $1" >&2; exit 2 ;;
        *) suites+=("$1"); shift ;;
    esac
done
[ "${#suites[@]}" -gt 0 ] || { echo "soak-suite: name at least one suite (or all); --help" >&2; exit 2; }
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "soak-suite: --runs takes a positive count" >&2; exit 2; }
expanded=()
for s in "${suites[@]}"; do
    case "$s" in
        all) expanded+=(workspace zygote python maf docs); [ "$(id -u)" = 0 ] && expanded+=(as-user) ;;
        workspace|zygote|as-user|python|maf|docs|cargo:*) expanded+=("$s") ;;
        *) echo "soak-suite: unknown suite $s; --help" >&2; exit 2 ;;
    esac
done
out="${out:-$(mktemp -d /tmp/airlock-soak.XXXXXX)}"
mkdir -p "$out"

export AIRLOCK_REQUIRE_NUMPY=1 AIRLOCK_REQUIRE_RAY=1
suite_tmp="$(mktemp -d /tmp/airlock-soak-tmp.XXXXXX)"
chmod 1777 "$suite_tmp"
export TMPDIR="$suite_tmp"
load_pids=()
stop_load() {
    [ "${#load_pids[@]}" -gt 0 ] && kill "${load_pids[@]}" 2>/dev/null
    wait 2>/dev/null || true
    load_pids=()
}
trap 'stop_load; rm -rf "$suite_tmp"' EXIT

start_load() {
    if [[ ",$load," == *,cpu,* ]]; then
        for _ in $(seq "$(nproc)"); do
            sh -c 'while :; do :; done' &
            load_pids+=($!)
        done
    fi
    if [[ ",$load," == *,memory,* ]]; then
        local gib="$memory_gib"
        [ -n "$gib" ] || gib=$(awk '/^MemAvailable:/ { printf "%d", $2 / 1048576 / 2 }' /proc/meminfo)
        # Held and touched (resident, not just reserved), then kept until the run ends.
        python3 -c 'import sys, time
held = bytearray(int(sys.argv[1]) << 30)
for i in range(0, len(held), 4096):
    held[i] = 1
while True:
    time.sleep(3600)' "$gib" &
        load_pids+=($!)
        echo "holding $gib GiB of memory"
    fi
}

suite_cmd() {
    case "$1" in
        workspace) cargo test --workspace --no-fail-fast ;;
        zygote) AIRLOCK_TEST_ZYGOTE=1 cargo test -p airlock-cli --test sandbox_all --no-fail-fast ;;
        as-user) bash scripts/suite-as-user.sh ;;
        python) AIRLOCK_BIN="$root/target/debug/airlock" python3 -m pytest -q -rfE clients/python/tests ;;
        maf) bash scripts/suite-maf.sh "$(mktemp -d)" ;;
        docs) python3 -m pytest -q -rfE tests/docs ;;
        cargo:*) # shellcheck disable=SC2086 # the suite names cargo's arguments, split as words
            cargo test ${1#cargo:} --no-fail-fast ;;
    esac
}

# Failed test names of one log, one a line: cargo's "test NAME ... FAILED" (named by its test
# binary) and pytest's "FAILED NAME" / "ERROR NAME"; a failed suite that named none is counted
# as "(suite exited N)".
failures_of() {
    python3 - "$1" <<'PY'
import re, sys
binary = "?"
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"\s*Running (?:\S+ )?\(?(?:.*/)?([\w-]+?)(?:-[0-9a-f]{16})?\)?$", line.strip())
    if m:
        binary = m.group(1)
    m = re.match(r"test (\S+) \.\.\. FAILED", line)
    if m:
        print(f"{binary}::{m.group(1)}")
    m = re.match(r"(?:FAILED|ERROR) (\S+)", line)
    if m:
        print(m.group(1))
PY
}

passed_of() {
    # cargo's "test result: ok. N passed" lines, and pytest's summary ("2 failed, 157 passed in").
    python3 - "$1" <<'PY'
import re, sys
n = 0
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"test result: \w+\. (\d+) passed", line) \
        or re.search(r"(?:^|[ ,=])(\d+) passed\b.* in [\d.]+s", line)
    if m:
        n += int(m.group(1))
print(n)
PY
}

echo "building once, before any load"
cargo build --workspace --all-targets --quiet
report="$out/report.tsv"
: >"$report"
for run in $(seq "$runs"); do
    for suite in "${expanded[@]}"; do
        log="$out/run$run-${suite//[^A-Za-z0-9_-]/_}.log"
        echo "== run $run/$runs: $suite (load: $load) -> $log"
        start_load
        started=$(date +%s)
        status=0
        (suite_cmd "$suite") >"$log" 2>&1 || status=$?
        stop_load
        took=$(($(date +%s) - started))
        failed="$(failures_of "$log")"
        if [ "$status" != 0 ] && [ -z "$failed" ]; then failed="($suite exited $status)"; fi
        printf '%s\t%s\t%s\t%s\t%s\n' "$run" "$suite" "$(passed_of "$log")" "$took" \
            "$(echo "$failed" | paste -sd ' ' -)" >>"$report"
        echo "   $(passed_of "$log") passed, $(echo -n "$failed" | grep -c . || true) failed, ${took}s"
        [ -z "$failed" ] || echo "$failed" | sed 's/^/   FAILED /'
    done
done

python3 - "$report" "$runs" <<'PY'
import collections, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
runs = int(sys.argv[2])
print(f"\n# flake hunt: {runs} runs a suite")
print("\n| suite | tests passed per run | seconds per run | failed runs |")
print("|---|---|---|---|")
by_suite = collections.OrderedDict()
for run, suite, passed, took, failed in rows:
    by_suite.setdefault(suite, []).append((int(run), int(passed), int(took), failed.split()))
for suite, rs in by_suite.items():
    bad = sum(1 for r in rs if r[3])
    print(f"| {suite} | {' '.join(str(r[1]) for r in rs)} | {' '.join(str(r[2]) for r in rs)} | {bad} |")
tests = collections.defaultdict(list)
for suite, rs in by_suite.items():
    for run, _, _, failed in rs:
        for t in failed:
            tests[(suite, t)].append(run)
if tests:
    print("\n| suite | test | failed in runs |\n|---|---|---|")
    for (suite, t), rs in sorted(tests.items()):
        print(f"| {suite} | {t} | {', '.join(map(str, rs))} of {runs} |")
    sys.exit(1)
print("\nno test failed")
PY
