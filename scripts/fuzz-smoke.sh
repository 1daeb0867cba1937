#!/usr/bin/env bash
# Bounded fuzz smoke run of every cargo-fuzz target (fuzz/fuzz_targets/), part of scripts/test.sh.
#
# Usage: scripts/fuzz-smoke.sh [SECONDS] [TARGET...]   (SECONDS default 60)
#
# SECONDS is the TOTAL fuzzing budget, split evenly across the targets run (all of them unless
# named), at least 2 s each; building comes on top (a few minutes the first time, seconds
# after). Each target starts from its seed corpus (scripts/fuzz-seeds.sh) and its dictionary
# (fuzz/dict/TARGET.dict). Exits non-zero if libFuzzer finds a crash, a panic (every oracle is
# an assertion), a leak or a hang (an input taking longer than 10 s) in any target; every
# target still runs, and the reproducer lands in fuzz/artifacts/TARGET/.
#
# The machine has only stable Rust; cargo-fuzz passes nightly-only flags (-Zsanitizer=address,
# sancov), which stable rustc accepts with RUSTC_BOOTSTRAP=1. AddressSanitizer works on this
# toolchain, so no `--sanitizer none` is needed. The long run is scripts/fuzz-soak.sh.
set -euo pipefail

secs="${1:-60}"
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -lt 1 ]; then
    # libFuzzer reads -max_total_time=0 as "forever", so 0 is refused too.
    echo "usage: $0 [SECONDS >= 1] [TARGET...]" >&2
    exit 2
fi
shift || true

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz-smoke: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

cd "$root/fuzz"
if [ "$#" -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo fuzz list); fi
per=$(( secs / ${#targets[@]} ))
[ "$per" -ge 2 ] || per=2

# shellcheck source=scripts/fuzz-seeds.sh
source "$root/scripts/fuzz-seeds.sh"
cargo fuzz build >&2

logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
failed=()
for t in "${targets[@]}"; do
    if cargo fuzz run "$t" "corpus/$t" -- -dict="dict/$t.dict" -max_total_time="$per" \
        -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"$logs/$t" 2>&1; then
        verdict=ok
    else
        verdict=FAILED
        failed+=("$t")
        tail -n 40 "$logs/$t" >&2
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t")
    cov=$(grep -o 'cov: [0-9]*' "$logs/$t" | tail -n 1)
    printf 'fuzz-smoke: %-16s %-6s %ss, %s inputs, %s\n' "$t" "$verdict" "$per" "${runs:-?}" \
        "${cov:-cov: ?}"
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz-smoke: failed: ${failed[*]} (reproducers in fuzz/artifacts/)" >&2
    exit 1
fi
