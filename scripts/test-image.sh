#!/usr/bin/env bash
# The container image the container test (crates/airlock-cli/tests/container.rs) runs airlock in:
# a minimal Debian root with python3, built from the package mirror alone (mmdebstrap, no
# registry) and imported into podman. Cached in podman's store under a tag derived from a hash of
# this script and the apt sources it builds from, so it is built once per machine.
#
# Prints the image reference on the last line of stdout. As root it installs what it needs
# (podman, runc, mmdebstrap) from apt first.
#
# Usage: bash scripts/test-image.sh
set -euo pipefail

say() { printf '==> %s\n' "$*" >&2; }

needs=(podman runc mmdebstrap)
missing=()
for pkg in "${needs[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "test-image: missing ${missing[*]}; install them as root:" \
            "apt-get install -y ${needs[*]} (scripts/test.sh does)" >&2
        exit 1
    fi
    say "installing ${missing[*]}"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi

# The suite and the mirrors come from this machine's own apt configuration (a machine that can
# install packages can build the image); fall back to the default Debian mirror.
. /etc/os-release
suite="${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}"
sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -s "$f" ] && sources+=("$f")
done

key="$({ cat "${BASH_SOURCE[0]}"; echo "$suite"; for f in "${sources[@]}"; do cat "$f"; done; } \
    | sha256sum | cut -c1-16)"
image="localhost/airlock-test-image:$key"

# One builder at a time (tests run in parallel, and so may two suites).
exec 9>"/tmp/airlock-test-image.lock"
flock 9

if ! podman image exists "$image"; then
    say "building $image with mmdebstrap (about a minute, once per machine)"
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    mmdebstrap --quiet --variant=essential --include=python3 \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        "$suite" "$work/root.tar" "${sources[@]}" </dev/null >&2
    podman import --quiet "$work/root.tar" "$image" >&2
    # Older builds of this image are stale: drop them.
    podman images --format '{{.Repository}}:{{.Tag}}' \
        | grep '^localhost/airlock-test-image:' | grep -v ":$key\$" \
        | xargs -r podman rmi --force >/dev/null 2>&1 || true
fi
echo "$image"
