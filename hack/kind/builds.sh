#!/usr/bin/env bash
# The kind tier's builds side by side, under one engine (make kind-builds; .ci/run runs it
# where the tier is not built yet):
#
#   hack/engine.sh run -- hack/kind/builds.sh
#
# The node image's part is mostly Go compiles (both cores, about 7 min from nothing); the
# operator's and trainer's images mostly wait on the network and the disk (debootstrap,
# apt, pip's download of PyTorch, writing the layers), about 4.5 min: one after the other
# they left the cores idle a quarter of the time (docs/benchmarks.md, run 38). The Debian
# base both start from is made once (hack/debian-base.sh holds a lock while it makes it).
# The images' build log is kept in a file and its tail shown if it fails; either failing
# fails this, and the other is stopped.
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { printf 'kind-builds: %s\n' "$*" >&2; }
images_log=$(mktemp "${TMPDIR:-/tmp}/ddpjob-images.XXXXXX")
images=""
finish() {
    if [[ -n $images ]] && kill -0 "$images" 2>/dev/null; then
        kill -- "-$images" 2>/dev/null || kill "$images" 2>/dev/null || true
        wait "$images" 2>/dev/null || true
    fi
    rm -f "$images_log"
}
trap finish EXIT
# Stopped (CI's `timeout` signals make's process group, not the images' own): stop theirs too.
trap 'exit 143' TERM
trap 'exit 130' INT

started=$SECONDS
# A process group of its own (set -m), so that stopping it stops its docker build too.
set -m
hack/build-images.sh >"$images_log" 2>&1 &
images=$!
set +m
log "the operator's and trainer's images build beside the node image (log: $images_log)"

node=0
hack/kind-node-image.sh >/dev/null || node=$?
if ((node != 0)); then
    log "the node image failed (exit $node); stopping the images' build"
    exit "$node"
fi
built=0
wait "$images" || built=$?
images=""
if ((built != 0)); then
    tail -40 "$images_log" >&2
    log "the images failed (exit $built)"
    exit "$built"
fi
grep '^images: ' "$images_log" >&2 || true
log "both built in $((SECONDS - started)) s"
