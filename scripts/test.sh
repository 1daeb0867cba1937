#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs what it needs, then runs
# formatting, lints, every crate's tests (the sandbox attack suite as root AND as the
# unprivileged user airlock-test), the Python client's tests, and a bounded fuzz run.
#
# Usage: bash scripts/test.sh            (FUZZ_SECONDS=60 by default)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
FUZZ_SECONDS="${FUZZ_SECONDS:-60}"

say() { printf '\n==> %s\n' "$*"; }

if [ "$(id -u)" = 0 ]; then
    say "system packages"
    missing=()
    for pkg in python3 python3-numpy python3-venv bubblewrap util-linux passwd podman runc mmdebstrap; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    fi
    # The rootless path is tested as this user (the suite refuses to run as root without it).
    id airlock-test >/dev/null 2>&1 || useradd --create-home --shell /bin/bash airlock-test
    # The image tests' Debian root (python3, numpy, pandas) and its OCI and Docker archives,
    # built once per machine with mmdebstrap and podman (cached by recipe hash).
    say "image fixture"
    FORMATS=oci bash scripts/image-fixture.sh >/dev/null
fi

say "python packages"
python3 -m pip install --quiet --disable-pip-version-check numpy pytest pytest-asyncio websockets mypy 'langchain-core>=1,<2' 'openai-agents~=0.24.0' \
    || python3 -m pip install --quiet --break-system-packages numpy pytest pytest-asyncio websockets mypy 'langchain-core>=1,<2' 'openai-agents~=0.24.0'
export AIRLOCK_REQUIRE_NUMPY=1

say "format and lints"
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings

say "cargo tests"
logs="$(mktemp -d)"
cargo build --workspace --all-targets
cargo test --workspace 2>&1 | tee "$logs/cargo.log"

# The in-process attack suites (the library drives the sandbox from the test process itself)
# run again as the unprivileged user; the binary-spawning suites switch identity per test.
if [ "$(id -u)" = 0 ]; then
    say "in-process attack suites as airlock-test"
    cargo test --no-run --message-format=json -p airlock-cli --test local_files --test local_backend \
        -p airlock-bench --test pool -p airlock-image --test unpack 2>/dev/null \
        | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["executable"])' \
        | while read -r bin; do
            (cd /tmp && runuser -u airlock-test -- env PATH=/usr/local/bin:/usr/bin:/bin \
                HOME=/home/airlock-test "$bin") 2>&1 | tee -a "$logs/as-user.log"
        done
    grep -q "test result: FAILED" "$logs/as-user.log" && { echo "failed as airlock-test"; exit 1; }
fi

if [ -d clients/python/tests ]; then
    say "python client tests"
    python3 -m pip install --quiet --disable-pip-version-check -e clients/python
    AIRLOCK_BIN="$root/target/debug/airlock" python3 -m pytest -q clients/python/tests \
        2>&1 | tee "$logs/pytest.log"
fi

say "fuzz smoke (${FUZZ_SECONDS}s)"
bash scripts/fuzz-smoke.sh "$FUZZ_SECONDS"

# One closing line for the whole suite (cargo's last line is a doc-test binary's "0 passed").
passed=$(cat "$logs"/*.log | sed -nE 's/.*test result: ok\. ([0-9]+) passed.*/\1/p; s/^([0-9]+) passed.*/\1/p' \
    | awk '{ n += $1 } END { print n + 0 }')
say "all green"
echo "summary: ${passed} passed, 0 failed"
