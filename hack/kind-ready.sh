#!/usr/bin/env bash
# Whether this machine can run the real-Pods tier (make e2e-kind) now, without building
# what takes CI's budget (.ci/run asks before it runs the tier):
#
#   hack/kind-ready.sh     exit 0: it can. exit 3: it cannot, and nothing built here changes
#                          that (no engine can be had); exit 4: it can once the parts missing
#                          are built (.ci/run builds them within its budget). On 3 and 4 one
#                          line on stdout says what is missing and what fills the gap; any
#                          other exit: the check itself failed
#
# "Can" means, concretely:
# - an engine: a docker that answers, or the project's own (hack/engine.sh) can be started:
#   root, iptables (or apt-get to install it), and the engine's Debian packages unpacked in
#   the build cache (~/.cache/ddpjob/upstream, hack/engine-packages.sh, `make engine`:
#   about 10 s);
# - kind, on PATH or in the build cache (built by `make engine`: 9 s after the control plane);
# - the node image: KIND_NODE_IMAGE, or the one hack/kind-node-image.sh would build for this
#   checkout (its tag is a hash of its inputs) already in the engine, with its Go builds
#   cached (`make kind-node-image`: 6.2 min of builds after the control plane's, 1.5 min of image);
# - both images already in the engine (`make images`, about 4 min from nothing; a rebuild
#   after a source change reuses their cached layers: about a minute);
# - room on the engine's disk for loading them into the nodes (hack/kind/room.sh): a disk too
#   small is this machine's, exit 3, as a missing engine is.
# Nothing is built, pulled or left running: the own engine, when needed to look at its
# images, is started and stopped by hack/engine.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

SELF=$PWD/hack/kind-ready.sh
PY=${PY:-.venv/bin/python}
VERSION=$("$PY" -c 'import runpy; print(runpy.run_path("operator/ddpjob/version.py")["__version__"])')
OPERATOR_IMAGE=${OPERATOR_IMAGE:-ddpjob/operator:e2e}
TRAINER_IMAGE=${TRAINER_IMAGE:-ddpjob/trainer:$VERSION-cpu}

not_ready() { echo "$*"; exit 3; }
not_built() { echo "$*"; exit 4; }

# The components of a build group (hack/upstream/) that are not in the build cache.
uncached() {
    "$PY" - "$@" <<'PYEOF'
import sys
from ddpjob_devcluster.controlplane import build
names = [n for word in sys.argv[1:] for n in build.GROUPS.get(word, (word,))]
print(" ".join(n for n in names if build.cached(build.COMPONENTS[n]) is None))
PYEOF
}

# Run inside the engine (hack/engine.sh sets DOCKER_HOST): the images.
if [[ "${1:-}" == images ]]; then
    if [[ -z "${KIND_NODE_IMAGE:-}" ]]; then
        node=$(BUILD_CHECK_ONLY=1 PY=$PY hack/kind-node-image.sh) || {
            rc=$?
            ((rc == 3)) && not_built "the kind node image for this checkout is not built (make kind-node-image: about 2 min)"
            exit "$rc"
        }
    else
        node=$KIND_NODE_IMAGE
        docker image inspect "$node" >/dev/null 2>&1 || not_ready "KIND_NODE_IMAGE $node is not in the engine (docker pull it)"
    fi
    for image in "$TRAINER_IMAGE" "$OPERATOR_IMAGE"; do
        docker image inspect "$image" >/dev/null 2>&1 \
            || not_built "image $image is not built (make images: about 4 min from nothing)"
    done
    # shellcheck source=hack/kind/room.sh
    source hack/kind/room.sh
    TRAINER_ARCHIVE=$(trainer_archive)
    room=$(room_for_images) || not_ready "$room"
    exit 0
fi

engine=own
if [[ "${DDPJOB_ENGINE:-auto}" != own ]] && command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1; then
    engine=user
elif [[ "${DDPJOB_ENGINE:-auto}" == user ]]; then
    not_ready "no docker answers, and DDPJOB_ENGINE=user"
else
    ((EUID == 0)) || not_ready "no docker answers, and starting the project's engine needs root"
    command -v iptables >/dev/null || command -v apt-get >/dev/null \
        || not_ready "no docker answers, and the project's engine needs the iptables command (its embedded DNS)"
    if ! BUILD_CHECK_ONLY=1 hack/engine-packages.sh >/dev/null 2>&1; then
        command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null \
            || not_ready "no docker answers, and the project's engine comes from Debian's packages (no apt-get here)"
        not_built "no docker answers and the project's engine is not fetched (make engine: Debian's docker 26, about 10 s)"
    fi
fi
if ! command -v kind >/dev/null; then
    missing=$(uncached kind)
    [[ -z "$missing" ]] || not_built "kind is neither on PATH nor built (make engine)"
fi
if [[ -z "${KIND_NODE_IMAGE:-}" ]]; then
    missing=$(uncached kind-node)
    [[ -z "$missing" ]] || not_built "the kind node's components are not built ($missing: make kind-node-image, about 8 min after the control plane)"
fi
if [[ "$engine" == user ]]; then
    exec "$SELF" images
fi
# The own engine, started to look at its images and stopped again; its log on stderr.
exec hack/engine.sh run -- "$SELF" images
