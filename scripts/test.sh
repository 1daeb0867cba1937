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

say() { printf '\n==> [%4ds] %s\n' "$SECONDS" "$*"; }

if [ "$(id -u)" = 0 ]; then
    say "system packages"
    missing=()
    for pkg in python3 python3-numpy python3-pandas python3-matplotlib python3-venv python3-yaml bubblewrap util-linux passwd \
        podman runc mmdebstrap golang-github-containers-common binutils; do
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
py_packages=(numpy pandas matplotlib pytest pytest-asyncio websockets mypy prometheus-client 'langchain-core>=1,<2' 'openai-agents~=0.24.0'
    'smolagents~=1.26' 'kubernetes-validate==1.37.0' 'ray==2.60.0'
    'opentelemetry-api==1.45.2' 'opentelemetry-sdk==1.45.2' 'opentelemetry-proto==1.45.2')
python3 -m pip install --quiet --disable-pip-version-check "${py_packages[@]}" \
    || python3 -m pip install --quiet --break-system-packages "${py_packages[@]}"
export AIRLOCK_REQUIRE_NUMPY=1 AIRLOCK_REQUIRE_RAY=1
# The client is never installed: its tests import it from clients/python/src. An editable
# install an older suite left in the system Python goes.
# (airlock-client was its distribution's name before it became airlock-ai.)
editable_client() {
    local name
    for name in airlock-ai airlock-client; do
        python3 -m pip show "$name" 2>/dev/null \
            | grep -qx "Editable project location: $root/clients/python" && { echo "$name"; return 0; }
    done
    return 1
}
if stale="$(editable_client)"; then
    python3 -m pip uninstall --quiet --yes "$stale" 2>/dev/null \
        || python3 -m pip uninstall --quiet --yes --break-system-packages "$stale"
fi

# Everything the suite leaves in the temporary directory (the test binaries' copies of the
# debug binary are 200+ MB each) goes when it ends, however it ends.
suite_tmp="$(mktemp -d /tmp/airlock-suite.XXXXXX)"
chmod 1777 "$suite_tmp"
export TMPDIR="$suite_tmp"
trap 'rm -rf "$suite_tmp"' EXIT

say "format and lints"
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
python3 scripts/import-circles.py

say "cargo tests"
logs="$(mktemp -d)"
cargo build --workspace --all-targets
cargo test --workspace 2>&1 | tee "$logs/cargo.log"

say "the sandbox attack suite again, every Python run forked from a zygote"
# `airlock serve` and `airlock mcp` fork runs from the zygote by default; this pass holds that
# path to the same attacks, as root and as airlock-test (the suite switches identity per test).
AIRLOCK_TEST_ZYGOTE=1 cargo test -p airlock-cli --test sandbox_all 2>&1 | tee "$logs/cargo-zygote.log"

if [ "$(id -u)" = 0 ]; then
    say "in-process attack suites as airlock-test"
    bash scripts/suite-as-user.sh 2>&1 | tee "$logs/as-user.log"
fi

if [ -d clients/python/tests ]; then
    say "python client tests"
    # The tests import the package from clients/python/src; nothing is installed.
    AIRLOCK_BIN="$root/target/debug/airlock" python3 -m pytest -q clients/python/tests \
        2>&1 | tee "$logs/pytest.log"
fi

say "airlock as a maf-sandbox backend (maf-sandbox's own conformance suites, root and airlock-test)"
bash scripts/suite-maf.sh "$logs"

say "every code block of README.md and docs/*.md, as written (or the reason it is skipped)"
# The debug binary on PATH as `airlock`; maf-sandbox's blocks on scripts/maf-python.sh's Python.
python3 -m pytest -q -rs tests/docs 2>&1 | tee "$logs/docs.log"

say "distribution: the wheel and its names, the server image, the Kubernetes manifests"
# The release build and the image are cached between runs (/var/cache/airlock-test, podman's
# store): scripts/build-release.sh, scripts/build-image.sh.
python3 -m pytest -q tests/dist 2>&1 | tee "$logs/dist.log"

say "fuzz smoke (${FUZZ_SECONDS}s)"
bash scripts/fuzz-smoke.sh "$FUZZ_SECONDS"

say "the suite's own leftovers"
# The test binaries' copies of the debug binary went into the suite's directory (the trap
# removes it), and nothing of the repository is installed into the system Python.
ls -d "$suite_tmp"/airlock-test-bin-* >/dev/null 2>&1 \
    || { echo "no copy of the test binary in $suite_tmp: the copies went elsewhere"; exit 1; }
! editable_client >/dev/null || { echo "the client is installed editable into the system Python"; exit 1; }

# One closing line for the whole suite (cargo's last line is a doc-test binary's "0 passed").
passed=$(cat "$logs"/*.log | sed -nE 's/.*test result: ok\. ([0-9]+) passed.*/\1/p; s/^([0-9]+) passed.*/\1/p' \
    | awk '{ n += $1 } END { print n + 0 }')
say "all green"
echo "summary: ${passed} passed, 0 failed"
