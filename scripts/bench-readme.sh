#!/usr/bin/env bash
# Re-measure and regenerate the README's performance table from the bench's JSON:
#   1. build the release binary, 2. `airlock bench --json` > docs/bench.json,
#   3. `airlock bench --from-json docs/bench.json` replaces the block between the markers.
# The table is never typed by hand.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# The peers: the Jupyter kernel is the sessions rows' reference, pydantic-monty and smolagents
# the in-process tier (each skipped with a reason when it cannot be installed).
peers=(jupyter_client ipykernel pydantic-monty 'smolagents~=1.26')
python3 -m pip install --quiet --disable-pip-version-check "${peers[@]}" \
    || python3 -m pip install --quiet --break-system-packages "${peers[@]}" \
    || echo "some peers are not installed: their rows say so" >&2
# The image rows measure the test suite's Debian fixture (built once, cached) unless an image
# is given with --image.
image_args=()
if [[ " $* " != *" --image "* ]] && [ "$(id -u)" = 0 ]; then
    fixture="$(FORMATS=oci bash scripts/image-fixture.sh 2>/dev/null | tail -1)" || fixture=""
    [ -f "$fixture/root.tar" ] && image_args=(--image "$fixture/root.tar")
fi
# The zygote rows (and `airlock serve`, which forks from it by default) need
# libairlock_zygote.so beside the binary: build it too.
cargo build --release -p airlock-cli -p airlock-zygote
bin="${CARGO_TARGET_DIR:-target}/release/airlock"
"$bin" bench --json "${image_args[@]}" "$@" > docs/bench.json.new
mv docs/bench.json.new docs/bench.json
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates Cargo.toml Cargo.lock || echo '+changes')"
table="$("$bin" bench --from-json docs/bench.json)
Measured on commit $commit, $(date -u +%Y-%m-%d)."
python3 - "$table" <<'PY'
import re, sys
table = sys.argv[1]
text = open("README.md").read()
start = text.index("<!-- bench:start")
start = text.index("-->", start) + 3
end = text.index("<!-- bench:end -->")
open("README.md", "w").write(text[:start] + "\n" + table + "\n" + text[end:])
PY
echo "README.md table regenerated from docs/bench.json"
