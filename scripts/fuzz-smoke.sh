#!/usr/bin/env bash
# Bounded fuzz smoke run of the `frame_reader` cargo-fuzz target.
#
# Usage: scripts/fuzz-smoke.sh [SECONDS]   (default 60)
#
# Installs cargo-fuzz from crates.io if it is missing, builds the target and fuzzes it for
# SECONDS of wall-clock time. Exits non-zero if libFuzzer finds a crash, a panic, a leak or a
# hang (an input taking longer than 10 s); the reproducer lands in fuzz/artifacts/frame_reader/.
#
# The machine has only stable Rust; cargo-fuzz passes nightly-only flags (-Zsanitizer=address,
# sancov), which stable rustc accepts with RUSTC_BOOTSTRAP=1. AddressSanitizer works on this
# toolchain, so no `--sanitizer none` is needed.
set -euo pipefail

secs="${1:-60}"
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -lt 1 ]; then
    # libFuzzer reads -max_total_time=0 as "forever", so 0 is refused too.
    echo "usage: $0 [SECONDS >= 1]" >&2
    exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz-smoke: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

cd "$root/fuzz"

# Seeds (the corpus dir is gitignored). The first byte selects read size and limits, see the
# target's docs: 0x00 = one big read with default limits, 0x01 = 1-byte reads, 0x10 = small caps.
corpus="corpus/frame_reader"
mkdir -p "$corpus"
# seed NAME SELECTOR BODY: one well-formed frame after the selector byte (given in octal).
seed() {
    { printf "\\$2"; printf 'Content-Length: %d\r\n\r\n' "${#3}"; printf '%s' "$3"; } >"$corpus/$1"
}
seed notification 000 '{"jsonrpc":"2.0","method":"ready"}'
seed request-one-byte-reads 001 '{"jsonrpc":"2.0","id":1,"method":"execute","params":{"code":""}}'
seed error-small-caps 020 '{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"m"}}'

cargo fuzz build frame_reader
cargo fuzz run frame_reader "$corpus" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
