#!/usr/bin/env bash
# airlock's server image (deploy/Containerfile) with no registry: a Debian root with python3,
# numpy, pandas and matplotlib made by mmdebstrap from the package mirror alone, imported into
# podman as the base, then the Containerfile on top with the release binary and
# libairlock_zygote.so beside it (scripts/build-release.sh). Both images are cached in podman's
# store, tagged by a hash of their inputs, so an unchanged tree builds nothing.
#
# Usage: bash scripts/build-image.sh         (as root: rootful podman with runc)
# Prints the image reference on the last line of stdout.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { printf '==> %s\n' "$*" >&2; }

needs=(podman runc mmdebstrap)
missing=()
for pkg in "${needs[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    [ "$(id -u)" = 0 ] || { echo "build-image: install ${missing[*]} as root" >&2; exit 1; }
    say "installing ${missing[*]}"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi
podman=(podman --runtime runc)

# The base: this machine's Debian suite and mirrors (a machine that installs packages can
# build it).
. /etc/os-release
suite="${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}"
sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -s "$f" ] && sources+=("$f")
done
packages="passwd,python3,python3-numpy,python3-pandas,python3-matplotlib"
base_key="$({ echo "$suite $packages v1"; for f in "${sources[@]}"; do cat "$f"; done; } \
    | sha256sum | cut -c1-16)"
base="localhost/airlock-base:$base_key"

exec 9>"/tmp/airlock-build-image.lock"
flock 9
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if ! "${podman[@]}" image exists "$base"; then
    say "building $base with mmdebstrap (a minute or two, once per machine)"
    mmdebstrap --quiet --variant=essential --include="$packages" \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        "$suite" "$work/root.tar" "${sources[@]}" </dev/null >&2
    "${podman[@]}" import --quiet "$work/root.tar" "$base" >&2
    rm -f "$work/root.tar"
fi

bin_dir="$(bash "$root/scripts/build-release.sh" "$work/context" | tail -n1)"
rm -f "$bin_dir"/*.debug
key="$({ echo "$base"; cat "$root/deploy/Containerfile"
         cd "$bin_dir" && sha256sum airlock libairlock_zygote.so; } | sha256sum | cut -c1-16)"
image="localhost/airlock:$key"
if ! "${podman[@]}" image exists "$image"; then
    say "building $image from deploy/Containerfile"
    "${podman[@]}" build --quiet --network none --pull=never --build-arg "BASE=$base" \
        -f "$root/deploy/Containerfile" -t "$image" "$bin_dir" >&2
fi
# Older builds are stale: drop them (their layers with them).
for repo in localhost/airlock localhost/airlock-base; do
    keep="$key"; [ "$repo" = localhost/airlock-base ] && keep="$base_key"
    "${podman[@]}" images --format '{{.Repository}}:{{.Tag}}' | grep "^$repo:" | grep -v ":$keep\$" \
        | xargs -r "${podman[@]}" rmi --force >/dev/null 2>&1 || true
done
echo "$image"
