#!/usr/bin/env bash
# Installs the Debian packages a build step needs and a fresh machine lacks (Chromium for
# the browser test, debootstrap for the kind tier's base image, libseccomp's headers for
# runc), as upstream's own build images install theirs. One home for how: as root, with
# Debian's apt-get, every wait bounded (another apt's lock 10 min, each apt-get 15 min).
#
#   hack/apt-install.sh WHO PACKAGE...   exit 0: installed; 3: this machine cannot (not
#                                        Debian, or not root), one line on stderr says so
#                                        and names the command; 1: apt-get failed
set -uo pipefail
who=$1
shift
if ! command -v apt-get >/dev/null || ((EUID != 0)); then
    echo "$who: needs $* and cannot install it here (needs Debian's apt-get as root): apt-get install $*" >&2
    exit 3
fi
export DEBIAN_FRONTEND=noninteractive
wait=(-o DPkg::Lock::Timeout=600)
echo "$who: apt-get install $*" >&2
timeout 900 apt-get "${wait[@]}" update -q >/dev/null || { echo "$who: apt-get update failed" >&2; exit 1; }
timeout 900 apt-get "${wait[@]}" install -y -q --no-install-recommends "$@" >/dev/null \
    || { echo "$who: apt-get install $* failed" >&2; exit 1; }
