#!/usr/bin/env bash
# A small Debian root for the image tests (crates/airlock-cli/tests/images/, and the SDK's coding-agent
# loop in clients/python/tests/test_agent_loop.py): python3 with numpy, pandas and venv, and git,
# built from the package mirror alone with mmdebstrap (no registry) as a root
# tarball, and cached under /var/cache/airlock-test/images/<recipe hash>/ so it is built once
# per machine (about a minute). With FORMATS=oci it also writes the same root as an OCI archive
# and a Docker archive through podman (`podman import` + `podman save`).
#
# Prints the cache directory on the last line of stdout. Must run as root (mmdebstrap and the
# cache dir); the files it leaves are world-readable so an unprivileged test user can import them.
#
# Usage: bash scripts/image-fixture.sh
set -euo pipefail

say() { printf '==> %s\n' "$*" >&2; }
[ "$(id -u)" = 0 ] || { echo "image-fixture: run as root (scripts/test.sh does)" >&2; exit 1; }
command -v mmdebstrap >/dev/null || { echo "image-fixture: apt-get install -y mmdebstrap" >&2; exit 1; }

. /etc/os-release
suite="${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}"
sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -s "$f" ] && sources+=("$f")
done
packages="python3,python3-numpy,python3-pandas,python3-venv,git"
key="$({ sed -n '/^set -euo/,$p' "${BASH_SOURCE[0]}"; echo "$suite"; for f in "${sources[@]}"; do cat "$f"; done; } \
    | sha256sum | cut -c1-16)"
cache="/var/cache/airlock-test/images/$key"

mkdir -p /var/cache/airlock-test/images
chmod 0755 /var/cache/airlock-test /var/cache/airlock-test/images
# One builder at a time (test binaries run in parallel, and so may two suites).
exec 9>"/var/cache/airlock-test/images/.lock"
flock 9

if [ ! -s "$cache/root.tar" ]; then
    say "building $cache/root.tar with mmdebstrap (about a minute, once per machine)"
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    mmdebstrap --quiet --variant=essential --include="$packages" \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        "$suite" "$work/root.tar" "${sources[@]}" </dev/null >&2
    mkdir -p "$cache"
    mv "$work/root.tar" "$cache/root.tar"
    chmod 0644 "$cache/root.tar"
    chmod 0755 "$cache"
    # Older recipes are stale.
    find /var/cache/airlock-test/images -mindepth 1 -maxdepth 1 -type d ! -name "$key" \
        -exec rm -rf {} + 2>/dev/null || true
fi

if [ "${FORMATS:-}" = oci ] && [ ! -s "$cache/oci.tar" ]; then
    command -v podman >/dev/null || { echo "image-fixture: apt-get install -y podman" >&2; exit 1; }
    say "writing the OCI and Docker archives of $cache/root.tar with podman"
    ref="localhost/airlock-image-fixture:$key"
    podman import --quiet --change 'ENV LANG=C.UTF-8' --change 'ENV AIRLOCK_FIXTURE=1' \
        --change 'WORKDIR /srv' "$cache/root.tar" "$ref" >&2
    rm -f "$cache/oci.tar.part" "$cache/docker.tar.part"
    podman save --quiet --format oci-archive -o "$cache/oci.tar.part" "$ref" >&2
    podman save --quiet --format docker-archive -o "$cache/docker.tar.part" "$ref" >&2
    podman rmi --force "$ref" >/dev/null 2>&1 || true
    chmod 0644 "$cache/oci.tar.part" "$cache/docker.tar.part"
    mv "$cache/docker.tar.part" "$cache/docker.tar"
    mv "$cache/oci.tar.part" "$cache/oci.tar"
fi
echo "$cache"
