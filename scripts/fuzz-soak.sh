#!/usr/bin/env bash
# The long fuzz run: every target (or those named) for RUNS inputs each, one at a time, at the
# lowest CPU priority, each bounded in time so none can run away.
#
# Usage: scripts/fuzz-soak.sh [--sanitizer address|none] [RUNS] [MAX_SECONDS] [TARGET...]
#        (RUNS default 10000000 inputs per target; MAX_SECONDS default 1800 per target;
#         sanitizer default address)
#
# `--sanitizer none` builds the targets without AddressSanitizer, into fuzz/target/sanitizer-none
# (so the smoke run's ASan build is kept), for throughput: ASan costs a factor of 2 to 5 here.
# What ASan adds is catching memory errors that do not panic: the airlock code the targets reach
# has no `unsafe` (only airlock-jail has, and no target reaches it), so such an error could only
# be in a dependency's `unsafe` (serde_json, httparse, tungstenite, rmcp, ...), which the smoke
# run (always under ASan) still checks. Panics, failed oracles, the 2 GiB RSS cap and the 10 s
# timeout apply either way; leak detection and the per-allocation cap come with ASan only.
#
# A target stops at RUNS inputs or MAX_SECONDS, whichever comes first. Prints one Markdown
# table row per target — inputs run, coverage (edges, features), corpus size, crashes,
# seconds, sanitizer, commit — ready for docs/fuzzing.md, and keeps them in
# fuzz/artifacts/soak-COMMIT.md. Exits non-zero if any target crashed (reproducer in
# fuzz/artifacts/TARGET/). See scripts/fuzz-smoke.sh for the toolchain notes.
set -euo pipefail

sanitizer=address
if [ "${1:-}" = "--sanitizer" ]; then
    sanitizer="${2:-}"
    shift 2 || true
fi
case "$sanitizer" in
    address) build_dir=() ;;
    none) build_dir=(--target-dir target/sanitizer-none) ;;
    *)
        echo "usage: $0 [--sanitizer address|none] [RUNS] [MAX_SECONDS] [TARGET...]" >&2
        exit 2
        ;;
esac
runs="${1:-10000000}"
max="${2:-1800}"
for n in "$runs" "$max"; do
    if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ]; then
        echo "usage: $0 [--sanitizer address|none] [RUNS >= 1] [MAX_SECONDS >= 1] [TARGET...]" >&2
        exit 2
    fi
done
shift $(( $# < 2 ? $# : 2 ))

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export RUSTC_BOOTSTRAP=1
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz-soak: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi
cd "$root/fuzz"
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- .. || echo '+dirty')"
if [ "$#" -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo fuzz list); fi

# shellcheck source=scripts/fuzz-seeds.sh
source "$root/scripts/fuzz-seeds.sh"
nice -n 19 cargo fuzz build -s "$sanitizer" "${build_dir[@]}" >&2

mkdir -p artifacts
out="artifacts/soak-$commit.md"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
for t in "${targets[@]}"; do
    start=$SECONDS
    crashes=0
    if ! nice -n 19 cargo fuzz run -s "$sanitizer" "${build_dir[@]}" "$t" "corpus/$t" -- -dict="dict/$t.dict" -runs="$runs" \
        -max_total_time="$max" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        >"$log" 2>&1; then
        crashes=1
        status=1
        # The panic's message sits above the long stack trace and the input dump.
        grep -m 3 -A 4 -E 'panicked at|ERROR: libFuzzer|==[0-9]+==ERROR' "$log" >&2 || true
        tail -n 40 "$log" >&2
    fi
    # A target that fails on its first inputs prints no status line: its row still goes out.
    done_line=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' <<<"$done_line" | grep -o '[0-9]*' || true)
    ft=$(grep -o 'ft: [0-9]*' <<<"$done_line" | grep -o '[0-9]*' || true)
    corp=$(grep -o 'corp: [0-9]*' <<<"$done_line" | grep -o '[0-9]*' || true)
    row="| $t | ${n:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | $crashes | $(( SECONDS - start )) | $sanitizer | $commit |"
    echo "$row" | tee -a "$out"
done
exit "$status"
