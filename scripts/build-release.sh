#!/usr/bin/env bash
# What ships (in the wheel and the container image), from one build with the `dist` profile
# (the release profile plus DWARF), each file split with objcopy:
#   OUT/airlock                      the binary, stripped (no DWARF, no symbol table), <= 20 MB
#   OUT/airlock.debug                its DWARF, found by gdb through the build id and debuglink
#   OUT/libairlock_zygote.so         the library `airlock serve --zygote` loads (it must sit beside
#                                    the binary), stripped the same way, <= 2 MB; its dynamic
#                                    symbols (airlock_zygote_abi, _wait, _fork) stay exported
#   OUT/libairlock_zygote.so.debug   its DWARF
# The sizes and the exported symbols are checked. Cached by a hash of the sources that build them
# (AIRLOCK_RELEASE_CACHE, default /var/cache/airlock-test/release when writable), so an unchanged
# tree is not rebuilt.
#
# Usage: bash scripts/build-release.sh [OUT]      (OUT defaults to target/dist-out)
# Prints OUT on the last line of stdout.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="$(realpath -m "${1:-$root/target/dist-out}")"
# What ships, with each file's size budget (its .debug is not budgeted).
shipped=(airlock libairlock_zygote.so)
declare -A max_bytes=([airlock]=$((20 * 1024 * 1024)) [libairlock_zygote.so]=$((2 * 1024 * 1024)))
zygote_symbols=(airlock_zygote_abi airlock_zygote_wait airlock_zygote_fork)
files=()
for f in "${shipped[@]}"; do files+=("$f" "$f.debug"); done

say() { printf '==> %s\n' "$*" >&2; }

# Everything they are built from (file contents, tracked or not, minus ignored files; the
# crates' tests and benches are not), and the list of files a cache entry holds (a new file
# shipped is a new key, so an entry without it is never used).
key="$({ git ls-files -co --exclude-standard -z -- Cargo.toml Cargo.lock rust-toolchain.toml \
        ':(glob)crates/*/Cargo.toml' ':(glob)crates/*/build.rs' ':(glob)crates/*/src/**' \
        | sort -z | xargs -0 sha256sum; rustc --version; echo "${files[*]}"; } | sha256sum | cut -c1-16)"
cache_root="${AIRLOCK_RELEASE_CACHE:-/var/cache/airlock-test/release}"
mkdir -p "$cache_root" 2>/dev/null || cache_root=""
cached="${cache_root:+$cache_root/$key}"
if [ -n "$cache_root" ]; then
    # One builder at a time (two suites may run at once).
    exec 9>"$cache_root/.lock"
    flock 9
fi

complete() {
    local f
    for f in "${files[@]}"; do [ -s "$1/$f" ] || return 1; done
}

# Splits BUILT into WORK/NAME (stripped, debuglink to WORK/NAME.debug) and WORK/NAME.debug.
split_debug() {
    local built="$1" work="$2" name="$3"
    objcopy --only-keep-debug --compress-debug-sections=zlib "$built" "$work/$name.debug"
    objcopy --strip-all --remove-section=.gnu_debuglink \
        --add-gnu-debuglink="$work/$name.debug" "$built" "$work/$name"
    chmod 0644 "$work/$name.debug"
}

if [ -n "$cached" ] && complete "$cached"; then
    say "release build $key from the cache"
else
    say "building the release binary and libairlock_zygote.so (cargo --profile dist; several minutes on a cold target dir)"
    target="${CARGO_TARGET_DIR:-$root/target}"
    cargo build --quiet --locked --profile dist -p airlock-cli -p airlock-zygote >&2
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    split_debug "$target/dist/airlock" "$work" airlock
    split_debug "$target/dist/libairlock_zygote.so" "$work" libairlock_zygote.so
    chmod 0755 "$work/airlock"
    # dlopen needs no execute bit, and a library is no command (the wheel puts it on PATH).
    chmod 0644 "$work/libairlock_zygote.so"
    if [ -n "$cached" ]; then
        # Older builds are stale: keep only this one.
        find "$cache_root" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} +
        mkdir -p "$cached.tmp.$$"
        (cd "$work" && mv "${files[@]}" "$cached.tmp.$$/")
        rm -rf "$cached" && mv "$cached.tmp.$$" "$cached"
    else
        cached="$work"
    fi
fi

for f in "${shipped[@]}"; do
    size=$(stat -c %s "$cached/$f")
    if [ "$size" -gt "${max_bytes[$f]}" ]; then
        echo "build-release: the stripped $f is $size bytes, above the ${max_bytes[$f]} byte budget" >&2
        exit 1
    fi
done
exported="$(nm -D --defined-only "$cached/libairlock_zygote.so")"
for sym in "${zygote_symbols[@]}"; do
    grep -qE " T $sym\$" <<<"$exported" || {
        echo "build-release: libairlock_zygote.so does not export $sym (nm -D)" >&2
        exit 1
    }
done
mkdir -p "$out"
(cd "$cached" && cp "${files[@]}" "$out/")
for f in "${shipped[@]}"; do
    size=$(stat -c %s "$out/$f")
    say "$out/$f: $((size / 1024)) KiB ($size bytes); symbols in $out/$f.debug"
done
echo "$out"
