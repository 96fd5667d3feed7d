#!/usr/bin/env bash
# make images: the operator image and the CPU trainer image, built from the Dockerfile as a
# user builds them (`docker build --target ...`), with no registry:
#
#   hack/build-images.sh           (under an engine: hack/engine.sh run -- hack/build-images.sh)
#
# The Dockerfile's defaults are what a user with a registry wants; here its PYTHON_IMAGE
# is a Python base made from Debian packages (hack/debian-base.sh, then
# hack/images/python-base.Dockerfile), passed in as a build argument, so no step pulls.
# pip reaches the package index with the host's network and the CA bundle the host's pip
# trusts, passed as build options (never written into an image): --network=host and the
# `ca-bundle` build secret.
#
# Tags: OPERATOR_IMAGE (default ddpjob/operator:e2e) and TRAINER_IMAGE (default
# ddpjob/trainer:<version>-cpu, the tag manifests/examples/mnist-cpu.yaml names).
# Env: PYTHON_IMAGE (a Python base to use instead; default: made here), PIP_CA_BUNDLE (default $PIP_CERT, else the system bundle; empty: none),
# IMAGE_BUILD_NETWORK (default host), TORCH_INDEX_URL (the trainer's torch index).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
VERSION=$("$PY" -c 'import runpy; print(runpy.run_path("operator/ddpjob/version.py")["__version__"])')
OPERATOR_IMAGE=${OPERATOR_IMAGE:-ddpjob/operator:e2e}
TRAINER_IMAGE=${TRAINER_IMAGE:-ddpjob/trainer:$VERSION-cpu}
NETWORK=${IMAGE_BUILD_NETWORK:-host}
CA=${PIP_CA_BUNDLE-${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}}
log() { printf 'images: %s\n' "$*" >&2; }

options=(--network="$NETWORK" --progress="${BUILD_PROGRESS:-plain}")
if [[ -n "$CA" && -s "$CA" ]]; then options+=(--secret "id=ca-bundle,src=$CA"); fi

# PYTHON_IMAGE set (e.g. python:3.12-slim-bookworm, where a registry is reached): that
# base, as the Dockerfile's default would be; else the one made here from Debian packages.
PYTHON_BASE=${PYTHON_IMAGE:-}
if [[ -z "$PYTHON_BASE" ]]; then
    DEBIAN_BASE=$(hack/debian-base.sh)
    PYTHON_BASE=ddpjob/python-base:$( { echo "$DEBIAN_BASE"; cat hack/images/python-base.Dockerfile; } | sha256sum | cut -c1-12)
fi
if [[ -z "${PYTHON_IMAGE:-}" ]] && ! docker image inspect "$PYTHON_BASE" >/dev/null 2>&1; then
    log "building $PYTHON_BASE"
    docker build -f hack/images/python-base.Dockerfile "${options[@]}" --build-arg "DEBIAN_BASE=$DEBIAN_BASE" \
        -t "$PYTHON_BASE" hack/images
fi

# The layers are compressed with zstd (level 1), not gzip: the trainer's 6 GB layer takes
# gzip most of an hour on two busy cores, zstd a few minutes; every containerd since 1.5
# (a kind node's included) unpacks it.
timed_build() {  # IMAGE, then docker build's arguments
    local image=$1 started=$SECONDS; shift
    log "building $image"
    docker build "${options[@]}" --build-arg "PYTHON_IMAGE=$PYTHON_BASE" \
        --build-arg "VCS_REF=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
        --output "type=image,name=$image,compression=zstd,compression-level=${IMAGE_ZSTD_LEVEL:-1}" "$@" .
    log "$image: $((SECONDS - started)) s, $(docker image inspect -f '{{.Size}}' "$image" | numfmt --to=iec)"
}
timed_build "$OPERATOR_IMAGE" --target operator
timed_build "$TRAINER_IMAGE" --target trainer --build-arg TRAINER_VARIANT=cpu \
    ${TORCH_INDEX_URL:+--build-arg "TORCH_INDEX_URL=$TORCH_INDEX_URL"}
