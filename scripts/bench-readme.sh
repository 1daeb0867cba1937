#!/usr/bin/env bash
# Re-measure and regenerate the README's performance table from the bench's JSON:
#   1. build the release binary, 2. `airlock bench --json` > docs/bench.json,
#   3. `airlock bench --from-json docs/bench.json` replaces the block between the markers.
# The table is never typed by hand.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# The Jupyter kernel is the sessions rows' reference (skipped with a reason when missing).
python3 -m pip install --quiet --disable-pip-version-check jupyter_client ipykernel \
    || python3 -m pip install --quiet --break-system-packages jupyter_client ipykernel \
    || echo "jupyter_client/ipykernel not installed: the sessions rows have no reference" >&2
cargo build --release -p airlock-cli
bin="${CARGO_TARGET_DIR:-target}/release/airlock"
"$bin" bench --json "$@" > docs/bench.json.new
mv docs/bench.json.new docs/bench.json
table="$("$bin" bench --from-json docs/bench.json)"
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
