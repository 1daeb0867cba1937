#!/usr/bin/env bash
# The in-process attack suites (the library drives the sandbox from the test process itself)
# run again as the unprivileged user `airlock-test`; the binary-spawning suites switch identity
# per test themselves. Root only (it switches user). Called by scripts/test.sh and
# scripts/soak-suite.sh; TMPDIR must be a directory airlock-test can write (mode 1777).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ "$(id -u)" = 0 ] || { echo "suite-as-user: run as root (it switches to airlock-test)" >&2; exit 2; }
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
cargo test --no-run --message-format=json -p airlock-cli --test local_files --test local_backend --test local_forkable \
    -p airlock-bench --test pool --test zygote -p airlock-image --test unpack 2>/dev/null \
    | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["executable"])' \
    | while read -r bin; do
        (cd /tmp && runuser -u airlock-test -- env PATH=/usr/local/bin:/usr/bin:/bin \
            HOME=/home/airlock-test TMPDIR="${TMPDIR:-/tmp}" "$bin") 2>&1 | tee -a "$log"
    done
! grep -q "test result: FAILED" "$log" || { echo "failed as airlock-test"; exit 1; }
