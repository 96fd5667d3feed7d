# The kind node image and the images it holds, built from Debian packages and the Go
# modules pinned in hack/upstream/ with no registry at all (hack/kind-node-image.sh runs
# every target; the binaries come in as named build contexts of the build cache):
#
#   kind-base   what kind's own base image holds (kind's images/base/Dockerfile): systemd,
#               containerd, runc, crictl, the CNI plugins and kind's files (entrypoint,
#               units, containerd config), read from the pinned kind module
#   node        kind-base + kubeadm, kubelet, kubectl + the images below, imported into
#               the node's containerd as kind's `build node-image` does
#   kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, etcd, coredns,
#   pause       the images kubeadm runs, named as it names them (etcd and CoreDNS at our
#               pins' tags: hack/kind/cluster.yaml tells kubeadm so)
#   node-tools  bash, curl, jq, iproute2: the pod-routes DaemonSet (hack/kind/default-cni.yaml)
#               and the local-path provisioner's helper Pods
#   local-path-provisioner
#
# Steps that install Debian packages need the mirror: built with --network=host.
# The named contexts (bin-*, kind-files, node-manifests, node-images) are folders the
# script passes with --build-context; hadolint takes them for unknown stages (DL3022).
ARG DEBIAN_BASE

# DL3006: the base is the image hack/debian-base.sh made here, named by its content hash.
# hadolint ignore=DL3006
FROM ${DEBIAN_BASE} AS debian

# ------------------------------------------------------------- Kubernetes images
FROM debian AS kube-apiserver
COPY --from=bin-plane --chmod=0755 kube-apiserver /usr/local/bin/kube-apiserver
ENTRYPOINT ["/usr/local/bin/kube-apiserver"]

FROM debian AS kube-controller-manager
COPY --from=bin-plane --chmod=0755 kube-controller-manager /usr/local/bin/kube-controller-manager
ENTRYPOINT ["/usr/local/bin/kube-controller-manager"]

FROM debian AS kube-scheduler
COPY --from=bin-plane --chmod=0755 kube-scheduler /usr/local/bin/kube-scheduler
ENTRYPOINT ["/usr/local/bin/kube-scheduler"]

# kube-proxy programs the node's packet filter: iptables and nft, as its image carries.
FROM debian AS kube-proxy
# DL3008: the versions are those of the base's Debian suite.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends iptables nftables conntrack ipset kmod \
 && rm -rf /var/lib/apt/lists/*
COPY --from=bin-node --chmod=0755 kube-proxy /usr/local/bin/kube-proxy
ENTRYPOINT ["/usr/local/bin/kube-proxy"]

FROM debian AS etcd
COPY --from=bin-etcd --chmod=0755 etcd /usr/local/bin/etcd
ENTRYPOINT ["/usr/local/bin/etcd"]

FROM debian AS coredns
COPY --from=bin-coredns --chmod=0755 coredns /coredns
ENTRYPOINT ["/coredns"]

FROM scratch AS pause
COPY --from=bin-pause --chmod=0755 pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]

# ------------------------------------------------------------------ add-on images
FROM debian AS node-tools
# DL3008: the versions are those of the base's Debian suite.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends bash curl jq iproute2 ca-certificates \
 && rm -rf /var/lib/apt/lists/*

FROM debian AS local-path-provisioner
COPY --from=bin-local-path --chmod=0755 local-path-provisioner /usr/bin/local-path-provisioner
ENTRYPOINT ["/usr/bin/local-path-provisioner"]

# ---------------------------------------------------------------------- kind base
# As kind's images/base/Dockerfile, with Debian's packages and our module builds in place
# of its downloads. Left out: fuse-overlayfs and its snapshotter (rootless only),
# nfs-common and open-iscsi (network storage), which no test here uses.
FROM debian AS kind-base
# DL3008: the versions are those of the base's Debian suite.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      systemd \
      conntrack iptables nftables iproute2 ethtool util-linux mount kmod \
      libseccomp2 pigz e2fsprogs \
      bash ca-certificates curl jq procps \
 && rm -rf /var/lib/apt/lists/* \
 && find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete \
 && rm -f /lib/systemd/system/multi-user.target.wants/* \
 && rm -f /etc/systemd/system/*.wants/* \
 && rm -f /lib/systemd/system/local-fs.target.wants/* \
 && rm -f /lib/systemd/system/sockets.target.wants/*udev* \
 && rm -f /lib/systemd/system/sockets.target.wants/*initctl* \
 && rm -f /lib/systemd/system/basic.target.wants/* \
 && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \
 && ln -sf /usr/lib/systemd/systemd /sbin/init
COPY --from=kind-files --chmod=0755 usr/local/bin/ /usr/local/bin/
COPY --from=kind-files kind/ /kind/
COPY --from=kind-files --chmod=0755 kind/bin/ /kind/bin/
COPY --from=kind-files etc/ /etc/
COPY --from=bin-containerd --chmod=0755 containerd containerd-shim-runc-v2 ctr /usr/local/bin/
COPY --from=bin-runc --chmod=0755 runc /usr/local/sbin/runc
COPY --from=bin-cri-tools --chmod=0755 crictl /usr/local/bin/
COPY --from=bin-cni-plugins --chmod=0755 host-local loopback ptp portmap /opt/cni/bin/
# The node's containerd as kind configures it, with two changes for this image: the
# sandbox image is the pause built here (its tag, from the pinned Kubernetes), and a
# container's oom_score_adj is never set below containerd's own (as kind does in a user
# namespace): lowering it needs CAP_SYS_RESOURCE, which a node may lack.
ARG PAUSE_IMAGE
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The module cache's files are read-only: made 0644 (directories 0755), as kind makes them.
RUN chmod -R a+rX,u+w /kind /etc/containerd /etc/systemd/system /etc/sysctl.d /etc/default /etc/crictl.yaml \
 && sed -i -e "s#sandbox_image = .*#sandbox_image = \"${PAUSE_IMAGE}\"#" \
      -e 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' /etc/containerd/config.toml \
 && grep -q "sandbox_image = \"${PAUSE_IMAGE}\"" /etc/containerd/config.toml \
 && ctr oci spec \
    | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
    | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json \
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \
 && systemctl mask systemd-binfmt.service \
 && mkdir -p /etc/kubernetes/manifests \
 && containerd --version && runc --version && crictl --version
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]

# --------------------------------------------------------------------------- node
FROM kind-base AS node
ARG KUBE_VERSION
ARG ETCD_TAG
ARG COREDNS_TAG
# What the kind cluster's kubeadm must be told: the etcd and CoreDNS images it holds.
LABEL io.ddpjob.etcd-tag="${ETCD_TAG}" io.ddpjob.coredns-tag="${COREDNS_TAG}"
COPY --from=bin-node --chmod=0755 kubeadm kubelet kubectl /usr/bin/
COPY --from=node-manifests default-cni.yaml default-storage.yaml /kind/manifests/
# The images kubeadm and the add-ons run, imported (not unpacked: the node does that when
# it starts them) into the node's containerd, pinned so its image GC never drops them.
# DL3001: `kill` stops the containerd this step started for the import.
# hadolint ignore=DL3001
RUN --mount=type=bind,from=node-images,target=/images \
    printf %s "${KUBE_VERSION}" > /kind/version \
 && { containerd >/tmp/containerd.log 2>&1 & pid=$!; } \
 && for _ in $(seq 1 30); do ctr version >/dev/null 2>&1 && break; sleep 1; done \
 && for tar in /images/*.tar; do \
      ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack \
          --digests "$tar" || { cat /tmp/containerd.log; exit 1; }; \
    done \
 && ctr --namespace=k8s.io images list -q \
 && kill "$pid" && wait "$pid"; \
    rm -f /tmp/containerd.log
