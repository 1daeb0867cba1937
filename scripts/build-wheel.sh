#!/usr/bin/env bash
# The airlock wheel (distribution `airlock-ai`, clients/python/pyproject.toml's name): the
# stripped release binary (the `airlock` command), beside it libairlock_zygote.so (the zygote
# `airlock serve` and `airlock mcp` fork runs from), the Python SDK (`import airlock_client`;
# extras langchain, openai-agents, smolagents) and the maf-sandbox backend (`import
# airlock_maf`; extra maf), like ruff and uv ship.
# Needs a Rust toolchain and python3 >= 3.11 to build; installing it needs neither.
#
# Usage: bash scripts/build-wheel.sh [OUT_DIR]       (default target/wheels)
#   pip install target/wheels/airlock_ai-*.whl     # then: airlock doctor; python -c 'import airlock_client'
# Prints the wheel's path on the last line of stdout. The symbols are left beside it
# (OUT_DIR/airlock.debug, OUT_DIR/libairlock_zygote.so.debug); the release build is cached
# (scripts/build-release.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$(realpath -m "${1:-$root/target/wheels}")"
bin_dir="$(bash "$root/scripts/build-release.sh" "$out/bin" | tail -n1)"
mkdir -p "$out"
mv -f "$bin_dir/airlock.debug" "$bin_dir/libairlock_zygote.so.debug" "$out/"
rm -f "$out"/airlock-*.whl "$out"/airlock_ai-*.whl
wheel="$(python3 "$root/scripts/wheel.py" "$bin_dir/airlock" "$bin_dir/libairlock_zygote.so" "$out")"
rm -rf "$bin_dir"
printf '==> %s\n' "$wheel" >&2
echo "$wheel"
