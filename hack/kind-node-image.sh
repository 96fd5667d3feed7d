#!/usr/bin/env bash
# Builds the kind node image for the pinned Kubernetes with no registry (make kind-node-image):
#
#   hack/kind-node-image.sh        prints the image's name, building it first if missing
#                                  (BUILD_CHECK_ONLY=1: exit 3 instead of building; its Go
#                                  builds must be cached already, as hack/kind-ready.sh checks)
#
# Everything in it comes from Debian packages (hack/debian-base.sh) and the Go modules
# pinned in hack/upstream/, built into the upstream build cache: Kubernetes v1.37.2
# (kube-apiserver, kube-controller-manager, kube-scheduler from the `kubernetes` pin;
# kubelet, kubeadm, kubectl, kube-proxy from `kubernetes-node`), etcd, CoreDNS, the pause
# container (compiled from the Kubernetes module's build/pause), containerd, runc,
# crictl, the CNI plugins, the local-path provisioner, and kind's own node files read
# from the kind module. hack/images/kind-node.Dockerfile says what each image holds.
#
# The image's tag is a hash of its inputs (this script, the Dockerfile, the CNI manifest,
# the Debian base, and every binary's build-cache key), so an unchanged input set costs
# one `docker image inspect`. Run it under an engine: hack/engine.sh run -- hack/kind-node-image.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
REPO=ddpjob/kind-node
log() { printf 'kind-node-image: %s\n' "$*" >&2; }

# name -> build-cache folder, from `build` ("name version: folder" per line).
declare -A BIN VERSION
while read -r name version folder; do
    BIN[$name]=$folder
    VERSION[$name]=${version%:}
done < <("$PY" -m ddpjob_devcluster.controlplane.build kind-node)

module_dir() {  # the pinned module's files in Go's module cache
    (cd "hack/upstream/$1" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' "$2")
}
KIND_MODULE=$(module_dir kind sigs.k8s.io/kind)
KUBE_MODULE=$(module_dir kubernetes k8s.io/kubernetes)
LOCAL_PATH_MODULE=$(module_dir local-path-provisioner github.com/rancher/local-path-provisioner)

# The pause container, compiled as Kubernetes' build/pause/Makefile does (static, -Os),
# at the tag that Makefile gives it; cached like the Go builds, by the source's hash.
PAUSE_TAG=$(sed -n 's/^TAG ?= //p' "$KUBE_MODULE/build/pause/Makefile")
pause_src=$KUBE_MODULE/build/pause/linux/pause.c
pause_dir=$(dirname "${BIN[kubernetes]}")/../pause-v$PAUSE_TAG-$(sha256sum "$pause_src" | cut -c1-12)/bin
if [[ ! -x "$pause_dir/pause" ]]; then
    mkdir -p "$pause_dir"
    gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_TAG-ddpjob" -o "$pause_dir/pause.partial" "$pause_src"
    mv "$pause_dir/pause.partial" "$pause_dir/pause"
fi
BIN[pause]=$(cd "$pause_dir" && pwd)

DEBIAN_BASE=$(hack/debian-base.sh)
KUBE_VERSION=${VERSION[kubernetes]}
ETCD_TAG=${VERSION[etcd]#v}-0  # kubeadm's own tag scheme for etcd images
COREDNS_TAG=${VERSION[coredns]}
PAUSE_IMAGE=registry.k8s.io/pause:$PAUSE_TAG

key=$( { cat "$0" hack/images/kind-node.Dockerfile hack/kind/default-cni.yaml
         echo "$DEBIAN_BASE"; for name in "${!BIN[@]}"; do echo "$name ${BIN[$name]}"; done | sort
         sha256sum "$pause_dir/pause"; } | sha256sum | cut -c1-12)
IMAGE=$REPO:$KUBE_VERSION-$key
TOOLS_IMAGE=ddpjob/kind-node-tools:$key
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "$IMAGE"
    exit 0
fi
# BUILD_CHECK_ONLY=1 (hack/kind-ready.sh): say whether it is built, build nothing.
[[ "${BUILD_CHECK_ONLY:-0}" != 1 ]] || { log "$IMAGE is not built"; exit 3; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ddpjob-kind-node.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/manifests" "$work/images"
started=$SECONDS

# The default CNI names the node-tools image of this build; the default storage is the
# local-path provisioner's own manifest, set up as kind sets it up (our images, volumes
# under /var, the default StorageClass "standard").
sed "s#ddpjob/kind-node-tools:NODE_TOOLS_TAG#$TOOLS_IMAGE#" hack/kind/default-cni.yaml >"$work/manifests/default-cni.yaml"
"$PY" hack/kind/storage_manifest.py "$LOCAL_PATH_MODULE/deploy/local-path-storage.yaml" \
    "ddpjob/local-path-provisioner:${VERSION[local-path-provisioner]}" "$TOOLS_IMAGE" >"$work/manifests/default-storage.yaml"

contexts=(--build-context "kind-files=$KIND_MODULE/images/base/files"
          --build-context "node-manifests=$work/manifests" --build-context "node-images=$work/images")
for pair in plane:kubernetes node:kubernetes-node etcd:etcd coredns:coredns pause:pause local-path:local-path-provisioner \
            containerd:containerd runc:runc cri-tools:cri-tools cni-plugins:cni-plugins; do
    contexts+=(--build-context "bin-${pair%%:*}=${BIN[${pair#*:}]}")
done
build() {  # build TARGET [docker build options...]
    local target=$1; shift
    docker build -f hack/images/kind-node.Dockerfile --network=host --progress="${BUILD_PROGRESS:-plain}" \
        --build-arg "DEBIAN_BASE=$DEBIAN_BASE" --build-arg "PAUSE_IMAGE=$PAUSE_IMAGE" \
        --build-arg "KUBE_VERSION=$KUBE_VERSION" --build-arg "ETCD_TAG=$ETCD_TAG" --build-arg "COREDNS_TAG=$COREDNS_TAG" \
        "${contexts[@]}" --target "$target" "$@" hack/kind
}

# Every image the node holds, as an OCI archive for the node's containerd to import.
images=(kube-apiserver=registry.k8s.io/kube-apiserver:$KUBE_VERSION
        kube-controller-manager=registry.k8s.io/kube-controller-manager:$KUBE_VERSION
        kube-scheduler=registry.k8s.io/kube-scheduler:$KUBE_VERSION
        kube-proxy=registry.k8s.io/kube-proxy:$KUBE_VERSION
        etcd=registry.k8s.io/etcd:$ETCD_TAG
        coredns=registry.k8s.io/coredns/coredns:$COREDNS_TAG
        pause=$PAUSE_IMAGE
        node-tools=$TOOLS_IMAGE
        local-path-provisioner=ddpjob/local-path-provisioner:${VERSION[local-path-provisioner]})
for entry in "${images[@]}"; do
    target=${entry%%=*} ref=${entry#*=}
    log "image $ref"
    build "$target" --output "type=oci,dest=$work/images/$target.tar,name=$ref" >"$work/build-$target.log" 2>&1 \
        || { tail -30 "$work/build-$target.log" >&2; log "building $target failed"; exit 1; }
done
log "node image $IMAGE"
build node -t "$IMAGE" >"$work/build-node.log" 2>&1 || { tail -40 "$work/build-node.log" >&2; log "building the node image failed"; exit 1; }
log "built $IMAGE in $((SECONDS - started)) s ($(docker image inspect -f '{{.Size}}' "$IMAGE" | numfmt --to=iec))"
echo "$IMAGE"
