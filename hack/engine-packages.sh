#!/usr/bin/env bash
# The commands of the project's own container engine (hack/engine.sh), from Debian's
# packages:
#
#   hack/engine-packages.sh    prints the folders holding dockerd, docker, docker-proxy,
#                              docker-init, containerd, containerd-shim-runc-v2, runc and the
#                              buildx plugin, colon-separated, fetching them first if missing
#                              (BUILD_CHECK_ONLY=1: exit 3 instead of fetching)
#
# Debian 13's docker.io and docker-cli 26.1, containerd 1.7 and docker-buildx 0.13 (tini is
# docker-init), with Debian 12's runc 1.1, which runs on Debian 12's glibc and later
# (Debian 13's runc needs glibc 2.38). Docker 26 gives a privileged container the
# capabilities the daemon holds, so kind's privileged nodes start where root lacks some (a
# sandbox without CAP_SYS_RESOURCE), where Debian 12's docker.io 20.10 refuses with "unable
# to apply caps". About 80 MB, fetched and unpacked in about 10 s, where building the same
# engine from its Go modules took 43 min on two cores.
#
# Nothing is installed and the system's apt state is never changed: `apt-get download`
# runs under an apt configuration of this script's own (its sources, lists and cache in a
# temporary folder; apt checks the archive's signatures against Debian's keyring, as for
# any install) and `dpkg-deb -x` unpacks the packages into the upstream build cache
# (DDPJOB_UPSTREAM_CACHE, default ~/.cache/ddpjob/upstream), under a key of this script, so
# a second call costs nothing. The archive's point releases move (26.1.5+...deb13u1 today):
# each package must be of the series below, and a fetch that finds another says so.
# Env: DEBIAN_MIRROR (default: the mirror apt on this machine uses, hack/debian-mirror.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# package/suite and the version series it must be of.
PACKAGES=(docker.io/trixie:26.1. docker-cli/trixie:26.1. containerd/trixie:1.7. docker-buildx/trixie:0.13.
          tini/trixie:0.19. runc/bookworm:1.1.)
CACHE=${DDPJOB_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ddpjob/upstream}
HOME_DIR=$CACHE/engine-debian-$(sha256sum "$0" | cut -c1-12)
ROOT=$HOME_DIR/root
log() { printf 'engine-packages: %s\n' "$*" >&2; }

folders() { echo "$ROOT/usr/sbin:$ROOT/usr/bin:$ROOT/usr/libexec/docker/cli-plugins"; }

if [[ -x "$ROOT/usr/sbin/dockerd" ]]; then
    folders
    exit 0
fi
[[ "${BUILD_CHECK_ONLY:-0}" != 1 ]] || { log "not fetched ($HOME_DIR)"; exit 3; }
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null \
    || { log "the project's engine comes from Debian's packages, and apt-get or dpkg-deb is not here"; exit 3; }
mirror=$(hack/debian-mirror.sh) || exit 2

mkdir -p "$CACHE"
exec {lock}>"$CACHE/engine-debian.lock"
flock -w 900 "$lock" || { log "another fetch held $CACHE/engine-debian.lock for 900 s"; exit 1; }
if [[ -x "$ROOT/usr/sbin/dockerd" ]]; then  # fetched by the one that held the lock
    folders
    exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ddpjob-engine-packages.XXXXXX")
trap 'rm -rf "$work" "$HOME_DIR/root.partial"' EXIT  # a fetch cut short leaves nothing half-unpacked
mkdir -p "$work/sources" "$work/lists/partial" "$work/cache/archives/partial" "$work/debs"
: >"$work/status"
cat >"$work/sources/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: trixie bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
cat >"$work/apt.conf" <<EOF
Dir::Etc::sourcelist "/dev/null";
Dir::Etc::sourceparts "$work/sources";
Dir::Etc::preferences "/dev/null";
Dir::Etc::preferencesparts "/dev/null";
Dir::State::Lists "$work/lists";
Dir::State::status "$work/status";
Dir::Cache "$work/cache";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
EOF
# apt drops to its _apt user to download, which cannot write a folder made by mktemp.
((EUID != 0)) || echo 'APT::Sandbox::User "root";' >>"$work/apt.conf"

started=$SECONDS
log "fetching ${PACKAGES[*]%%:*} from $mirror"
APT_CONFIG=$work/apt.conf timeout 600 apt-get -q update >"$work/apt.log" 2>&1 \
    || { tail -5 "$work/apt.log" >&2; log "apt-get update failed (Debian 13's archive and its key are needed)"; exit 1; }
(cd "$work/debs" && APT_CONFIG=$work/apt.conf timeout 600 apt-get -q download "${PACKAGES[@]%%:*}") >>"$work/apt.log" 2>&1 \
    || { tail -5 "$work/apt.log" >&2; log "apt-get download failed"; exit 1; }
rm -rf "$HOME_DIR"
mkdir -p "$HOME_DIR/root.partial"
for entry in "${PACKAGES[@]}"; do
    name=${entry%%/*} series=${entry#*:}
    deb=$(ls "$work/debs/${name}"_*.deb)
    version=$(dpkg-deb -f "$deb" Version)
    [[ "$version" == "$series"* ]] \
        || { log "the archive's $name is $version; this engine was checked with ${series}x (update PACKAGES)"; exit 1; }
    dpkg-deb -x "$deb" "$HOME_DIR/root.partial"
    echo "$name $version" >>"$HOME_DIR/versions"
done
mv "$HOME_DIR/root.partial" "$ROOT"  # whole, or not there
log "fetched in $((SECONDS - started)) s: $(paste -sd, "$HOME_DIR/versions" | sed 's/,/, /g')"
folders
