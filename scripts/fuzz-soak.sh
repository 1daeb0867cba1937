#!/usr/bin/env bash
# The long fuzz run: every target (or those named) for RUNS inputs each, one at a time, at the
# lowest CPU priority, each bounded in time so none can run away.
#
# Usage: scripts/fuzz-soak.sh [RUNS] [MAX_SECONDS] [TARGET...]
#        (RUNS default 10000000 inputs per target; MAX_SECONDS default 1800 per target)
#
# A target stops at RUNS inputs or MAX_SECONDS, whichever comes first. Prints one Markdown
# table row per target — inputs run, coverage (edges, features), corpus size, crashes,
# seconds, commit — ready for docs/fuzzing.md, and keeps them in
# fuzz/artifacts/soak-COMMIT.md. Exits non-zero if any target crashed (reproducer in
# fuzz/artifacts/TARGET/). See scripts/fuzz-smoke.sh for the toolchain notes.
set -euo pipefail

runs="${1:-10000000}"
max="${2:-1800}"
for n in "$runs" "$max"; do
    if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ]; then
        echo "usage: $0 [RUNS >= 1] [MAX_SECONDS >= 1] [TARGET...]" >&2
        exit 2
    fi
done
shift $(( $# < 2 ? $# : 2 ))

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export RUSTC_BOOTSTRAP=1
cd "$root/fuzz"
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- .. || echo '+dirty')"
if [ "$#" -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo fuzz list); fi

# shellcheck source=scripts/fuzz-seeds.sh
source "$root/scripts/fuzz-seeds.sh"
nice -n 19 cargo fuzz build >&2

mkdir -p artifacts
out="artifacts/soak-$commit.md"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
for t in "${targets[@]}"; do
    start=$SECONDS
    crashes=0
    if ! nice -n 19 cargo fuzz run "$t" "corpus/$t" -- -dict="dict/$t.dict" -runs="$runs" \
        -max_total_time="$max" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        >"$log" 2>&1; then
        crashes=1
        status=1
        tail -n 40 "$log" >&2
    fi
    done_line=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' <<<"$done_line" | grep -o '[0-9]*')
    ft=$(grep -o 'ft: [0-9]*' <<<"$done_line" | grep -o '[0-9]*')
    corp=$(grep -o 'corp: [0-9]*' <<<"$done_line" | grep -o '[0-9]*')
    row="| $t | ${n:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | $crashes | $(( SECONDS - start )) | $commit |"
    echo "$row" | tee -a "$out"
done
exit "$status"
