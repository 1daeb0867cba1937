#!/usr/bin/env bash
# The release binary that ships (in the wheel and the container image): built with the `dist`
# profile (the release profile plus DWARF), then split with objcopy into
#   OUT/airlock        stripped (no DWARF, no symbol table), at most 20 MB (checked)
#   OUT/airlock.debug  the DWARF, found by gdb through the binary's build id and debuglink
# Cached by a hash of the sources that build it (AIRLOCK_RELEASE_CACHE, default
# /var/cache/airlock-test/release when writable), so an unchanged tree is not rebuilt.
#
# Usage: bash scripts/build-release.sh [OUT]      (OUT defaults to target/dist-out)
# Prints OUT on the last line of stdout.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="$(realpath -m "${1:-$root/target/dist-out}")"
max_bytes=$((20 * 1024 * 1024))

say() { printf '==> %s\n' "$*" >&2; }

# Everything the binary is built from (file contents, tracked or not, minus ignored files; the
# crates' tests and benches are not).
key="$({ git ls-files -co --exclude-standard -z -- Cargo.toml Cargo.lock rust-toolchain.toml \
        ':(glob)crates/*/Cargo.toml' ':(glob)crates/*/build.rs' ':(glob)crates/*/src/**' \
        | sort -z | xargs -0 sha256sum; rustc --version; } | sha256sum | cut -c1-16)"
cache_root="${AIRLOCK_RELEASE_CACHE:-/var/cache/airlock-test/release}"
mkdir -p "$cache_root" 2>/dev/null || cache_root=""
cached="${cache_root:+$cache_root/$key}"
if [ -n "$cache_root" ]; then
    # One builder at a time (two suites may run at once).
    exec 9>"$cache_root/.lock"
    flock 9
fi

if [ -n "$cached" ] && [ -s "$cached/airlock" ] && [ -s "$cached/airlock.debug" ]; then
    say "release binary $key from the cache"
else
    say "building the release binary (cargo --profile dist; several minutes on a cold target dir)"
    target="${CARGO_TARGET_DIR:-$root/target}"
    cargo build --quiet --locked --profile dist -p airlock-cli >&2
    built="$target/dist/airlock"
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    objcopy --only-keep-debug --compress-debug-sections=zlib "$built" "$work/airlock.debug"
    objcopy --strip-all --remove-section=.gnu_debuglink \
        --add-gnu-debuglink="$work/airlock.debug" "$built" "$work/airlock"
    chmod 0755 "$work/airlock"
    chmod 0644 "$work/airlock.debug"
    if [ -n "$cached" ]; then
        # Older builds are stale: keep only this one.
        find "$cache_root" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} +
        mkdir -p "$cached.tmp.$$"
        mv "$work/airlock" "$work/airlock.debug" "$cached.tmp.$$/"
        rm -rf "$cached" && mv "$cached.tmp.$$" "$cached"
    else
        cached="$work"
    fi
fi

size=$(stat -c %s "$cached/airlock")
if [ "$size" -gt "$max_bytes" ]; then
    echo "build-release: the stripped binary is $size bytes, above the $max_bytes byte budget" >&2
    exit 1
fi
mkdir -p "$out"
cp "$cached/airlock" "$cached/airlock.debug" "$out/"
say "$out/airlock: $((size / 1024 / 1024)) MiB ($size bytes); symbols in $out/airlock.debug"
echo "$out"
