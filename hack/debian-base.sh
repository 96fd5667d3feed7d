#!/usr/bin/env bash
# Builds the Debian base image every image of the kind tier starts from, out of Debian's
# packages (debootstrap), so that nothing is pulled from an image registry:
#
#   hack/debian-base.sh            prints the image's name, building it first if missing
#                                  (BUILD_CHECK_ONLY=1: exit 3 instead of building)
#
# The image is Debian bookworm's minimal base (the "minbase" variant: apt, dpkg, bash,
# coreutils, glibc), trimmed as Debian's own "-slim" images are (no manuals, no
# translations, no documentation beyond the copyright files) and imported with
# `docker import`. Its tag is a hash of this script, so a change here is a new image and
# an unchanged script finds the one already built. bookworm, not trixie: its systemd
# (252) still boots on a cgroup v1 host, which a kind node must do on machines like the
# one CI runs on (systemd 256 and later refuse to).
#
# Needs root (debootstrap makes device nodes and chroots; it is installed where missing)
# and a reachable Debian mirror;
# the docker CLI talks to whichever engine DOCKER_HOST names (hack/engine.sh).
# Env: DEBIAN_MIRROR (default: the Debian mirror apt on this machine uses).
set -euo pipefail
cd "$(dirname "$0")/.."

SUITE=bookworm
REPO=ddpjob/debian-base
KEY=$(sha256sum "$0" | cut -c1-12)
IMAGE="$REPO:$SUITE-$KEY"

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "$IMAGE"
    exit 0
fi
# BUILD_CHECK_ONLY=1 (hack/kind-ready.sh): say whether it is built, build nothing.
[[ "${BUILD_CHECK_ONLY:-0}" != 1 ]] || { echo "debian-base: $IMAGE is not built" >&2; exit 3; }

# The node image's build and the images' may ask at once (hack/kind/builds.sh runs them side
# by side): one makes the image, the other waits for it (at most 15 min) and finds it made.
lock=${XDG_CACHE_HOME:-$HOME/.cache}/ddpjob/debian-base.lock
mkdir -p "$(dirname "$lock")"
exec 9>"$lock"
flock -w 900 9 || { echo "debian-base: another build held $lock for 15 min" >&2; exit 1; }
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "$IMAGE"
    exit 0
fi

mirror=$(hack/debian-mirror.sh) || exit 2
command -v debootstrap >/dev/null || hack/apt-install.sh debian-base debootstrap || exit 2
((EUID == 0)) || { echo "debian-base: debootstrap needs root" >&2; exit 2; }

root=$(mktemp -d "${TMPDIR:-/tmp}/ddpjob-debian-base.XXXXXX")
trap 'umount -R "$root/proc" "$root/sys" 2>/dev/null || true; rm -rf --one-file-system "$root"' EXIT

echo "debian-base: debootstrap $SUITE from $mirror into $root" >&2
started=$SECONDS
debootstrap --variant=minbase --merged-usr "$SUITE" "$root" "$mirror" >"$root.log" 2>&1 \
    || { tail -20 "$root.log" >&2; echo "debian-base: debootstrap failed (log: $root.log)" >&2; exit 1; }
rm -f "$root.log"

# What Debian's slim images leave out, for this image and every package installed on it.
cat >"$root/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root"/usr/share/{man,info,locale,lintian}/* "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin \
    "$root"/var/cache/apt/archives/*.deb "$root"/var/log/* "$root"/tmp/*
# apt in a container: no recommends, no caches left in layers (as the official images do).
cat >"$root/etc/apt/apt.conf.d/docker-slim" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
EOF
# The mirror the image was made from is the one its apt uses.
printf 'deb %s %s main\ndeb %s %s-updates main\n' "$mirror" "$SUITE" "$mirror" "$SUITE" >"$root/etc/apt/sources.list"
: >"$root/etc/hostname"
: >"$root/etc/resolv.conf"

tar --numeric-owner --xattrs -C "$root" -c . \
    | docker import --change 'CMD ["bash"]' --change 'ENV LANG=C.UTF-8' \
        --message "Debian $SUITE minbase (hack/debian-base.sh)" - "$IMAGE" >/dev/null
echo "debian-base: built $IMAGE in $((SECONDS - started)) s" >&2
echo "$IMAGE"
