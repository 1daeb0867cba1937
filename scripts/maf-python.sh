#!/usr/bin/env bash
# A Python >= 3.12 with maf-sandbox (and the test tools) that both root and the unprivileged
# `airlock-test` can run: the maf-sandbox suites (clients/python/maf/tests) and examples/maf_agent.py.
#
# Prints one line, `PYTHON LD_LIBRARY_PATH`, for scripts/test.sh to use. Fails loudly (exit 1)
# when no Python >= 3.12 exists on this machine: nothing but PyPI packages is downloaded.
#
# The interpreter is the machine's own (pyenv's, or one on PATH). An interpreter the
# unprivileged user cannot run (pyenv under a mode-700 /root) is copied, without its test
# suite and site-packages, into the shared cache; its libpython then comes from the copy
# (LD_LIBRARY_PATH). The venv is cached there too, keyed by interpreter and requirements.
set -euo pipefail

CACHE="${AIRLOCK_TEST_CACHE:-/var/cache/airlock-test}"
REQUIREMENTS=(maf-sandbox==0.51.1 pytest pytest-asyncio websockets mypy)

fail() { printf 'maf-python: %s\n' "$*" >&2; exit 1; }

find_python() {
    local c
    for c in python3.13 python3.12 python3 \
        /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9] \
        "${PYENV_ROOT:-${HOME:-/root}/.pyenv}"/versions/3.1[2-9]*/bin/python3.1[2-9]; do
        if command -v "$c" >/dev/null 2>&1 \
            && "$c" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            command -v "$c"
            return 0
        fi
    done
    return 1
}

as_user() { if [ "$(id -u)" = 0 ] && id airlock-test >/dev/null 2>&1; then runuser -u airlock-test -- "$@"; else "$@"; fi; }

py="$(find_python)" || fail "no Python >= 3.12 on this machine (looked on PATH, /usr, /usr/local and pyenv); install one (e.g. pyenv install 3.12) - the maf-sandbox suites need it"
mkdir -p "$CACHE"
chmod 755 "$CACHE"
libpath=""
if ! (cd / && as_user "$py" -c 'pass') >/dev/null 2>&1; then
    prefix="$("$py" -c 'import sys; print(sys.base_prefix)')"
    version="$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
    minor="${version%.*}"
    copy="$CACHE/python-$version"
    if [ ! -x "$copy/bin/python$minor" ]; then
        rm -rf "$copy.tmp"
        mkdir -p "$copy.tmp"
        (cd "$prefix" && tar cf - --exclude="lib/python$minor/test" --exclude="lib/python$minor/site-packages/*" \
            --exclude='lib/libpython*.a' --exclude='__pycache__' bin lib include 2>/dev/null) | tar xf - -C "$copy.tmp"
        chmod -R a+rX "$copy.tmp"
        mv "$copy.tmp" "$copy"
    fi
    py="$copy/bin/python$minor"
    libpath="$copy/lib"
    LD_LIBRARY_PATH="$libpath" "$py" -c 'pass' || fail "the copied interpreter at $py does not run"
fi

key="$(printf '%s\n' "$("$py" -c 'import sys; print(sys.version)' 2>/dev/null || LD_LIBRARY_PATH="$libpath" "$py" -c 'import sys; print(sys.version)')" "${REQUIREMENTS[@]}" | sha256sum | cut -c1-16)"
venv="$CACHE/maf-venv-$key"
if [ ! -x "$venv/bin/python" ] || ! LD_LIBRARY_PATH="$libpath" "$venv/bin/python" -c 'import maf_sandbox, pytest' 2>/dev/null; then
    rm -rf "$venv.tmp"
    LD_LIBRARY_PATH="$libpath" "$py" -m venv "$venv.tmp" >&2
    LD_LIBRARY_PATH="$libpath" "$venv.tmp/bin/python" -m pip install --quiet --disable-pip-version-check \
        "${REQUIREMENTS[@]}" >&2
    chmod -R a+rX "$venv.tmp"
    rm -rf "$venv"
    mv "$venv.tmp" "$venv"
    # A venv records its own path; rebuild the scripts' shebangs is unnecessary: everything
    # runs as `python -m`, and the interpreter link is absolute.
    sed -i "s#$venv.tmp#$venv#g" "$venv/pyvenv.cfg" "$venv"/bin/activate* 2>/dev/null || true
fi
(cd / && as_user env LD_LIBRARY_PATH="$libpath" "$venv/bin/python" -c 'import maf_sandbox') >/dev/null 2>&1 \
    || fail "the venv at $venv is not usable by airlock-test"
echo "$venv/bin/python $libpath"
