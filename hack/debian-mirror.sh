#!/usr/bin/env bash
# The Debian mirror this machine's apt already uses, so that a machine set up for a local
# mirror or proxy is respected by every script that fetches Debian packages itself
# (hack/debian-base.sh, hack/engine-packages.sh):
#
#   hack/debian-mirror.sh     prints it: DEBIAN_MIRROR if set, else the first deb822 URIs
#                             line or sources.list entry of Debian's main archive; exit 2
#                             with one line on stderr where there is none
set -euo pipefail
mirror=${DEBIAN_MIRROR:-}
if [[ -z "$mirror" ]]; then
    mirror=$(grep -hs -m1 -E '^URIs: .*/debian/?$' /etc/apt/sources.list.d/*.sources | awk '{print $2}' || true)
    [[ -n "$mirror" ]] || mirror=$(grep -hs -m1 -E '^deb .*/debian/? ' /etc/apt/sources.list | awk '{print $2}' || true)
fi
[[ -n "$mirror" ]] || { echo "no Debian mirror found in apt's sources; set DEBIAN_MIRROR" >&2; exit 2; }
echo "$mirror"
