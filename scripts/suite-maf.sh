#!/usr/bin/env bash
# airlock as a maf-sandbox backend: maf-sandbox's own conformance suites against the debug
# binary, as the invoking user and (when root) again as airlock-test. Called by scripts/test.sh
# and scripts/soak-suite.sh. Usage: bash scripts/suite-maf.sh [LOG_DIR]  (maf-root.log and
# maf-user.log go there; a temporary directory by default).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
logs="${1:-$(mktemp -d)}"
# A Python >= 3.12 both identities can run, with maf-sandbox, cached between runs; no such
# Python on the machine fails here, loudly (scripts/maf-python.sh says what it looked for).
maf_line="$(bash scripts/maf-python.sh)"
read -r maf_py maf_lib <<<"$maf_line"
maf_src="$(mktemp -d)"
cp -r clients/python/src/airlock_client clients/python/maf/airlock_maf "$maf_src/"
mkdir -p "$maf_src/repo/clients" "$maf_src/repo/examples"
cp -r clients/python "$maf_src/repo/clients/"
cp examples/maf_agent.py "$maf_src/repo/examples/"
chmod -R a+rX "$maf_src"
# The egress suite needs a host on the allowlist that answers 2xx: a loopback server on port
# 80 (airlock maps a hostname to ports 80 and 443), reached through the broker's --allow-private.
egress_pid=""
if python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 80))' 2>/dev/null; then
    mkdir -p "$maf_src/www" && echo ok > "$maf_src/www/index.html"
    (cd "$maf_src/www" && exec python3 -m http.server 80 --bind 127.0.0.1 >/dev/null 2>&1) &
    egress_pid=$!
    # Ready when it accepts (not after a guess of a second, which a loaded machine outlasts).
    for _ in $(seq 100); do
        python3 -c 'import socket; socket.create_connection(("127.0.0.1", 80), 1).close()' 2>/dev/null && break
        sleep 0.1
    done
fi
maf_env=(PATH=/usr/local/bin:/usr/bin:/bin LD_LIBRARY_PATH="$maf_lib" PYTHONDONTWRITEBYTECODE=1
    PYTHONPATH="$maf_src" AIRLOCK_BIN="$root/target/debug/airlock" AIRLOCK_MAF_EGRESS_URL=http://localhost/)
maf_tests=("$maf_py" -m pytest -q -p no:cacheprovider -c "$maf_src/repo/clients/python/maf/pytest.ini"
    "$maf_src/repo/clients/python/maf/tests")
maf_status=0
(cd /tmp && env "${maf_env[@]}" HOME="${HOME:-/root}" "${maf_tests[@]}") 2>&1 | tee "$logs/maf-root.log" || maf_status=1
if [ "$(id -u)" = 0 ]; then
    echo "==> maf-sandbox suites as airlock-test"
    (cd /tmp && runuser -u airlock-test -- env "${maf_env[@]}" HOME=/home/airlock-test "${maf_tests[@]}") 2>&1 \
        | tee "$logs/maf-user.log" || maf_status=1
fi
[ -n "$egress_pid" ] && kill "$egress_pid" 2>/dev/null
rm -rf "$maf_src"
[ "$maf_status" = 0 ] || { echo "the maf-sandbox suites failed"; exit 1; }
