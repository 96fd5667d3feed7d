# Loading the tier's images into the kind nodes, sourced by hack/e2e-kind.sh after
# hack/kind/room.sh (ARCHIVES) once CLUSTER and SHARED are set: each image is imported by
# the nodes' own containerd from the folders they mount, so nothing is pulled and nothing
# streams through the engine. What they import is an OCI layout whose blobs are links to
# the engine's own (hack/kind/oci_layout.py), which the nodes mount read-only at NODE_BLOBS
# (ENGINE_BLOBS: hack/kind/room.sh); where the engine's blobs cannot be read (another engine's,
# a remote one), the image's archive, written by `docker save` while the cluster starts.
NODE_BLOBS=/var/ddpjob-engine-blobs

# SOURCE (a path inside the nodes: a layout's folder or an archive) imported into each NODE
# at once, as `kind load` does it (ctr import into the k8s.io namespace, with the
# snapshotter the node's CRI uses), but read from the nodes' mounts instead of streamed
# through the engine (`docker exec -i`, which cost the engine most of a core), and without
# the compressed layers once unpacked, as the nodes' containerd keeps images it pulls
# (discard_unpacked_layers): 3 GB less on each worker. A layout goes in as the tar that
# `docker save` would have written, its links followed (tar -h).
load_archive() {  # SOURCE dir|file NODE...
    local source=$1 kind=$2 node pids=() snapshotter
    shift 2
    for node in "$@"; do
        snapshotter=$(docker exec "$node" containerd config dump 2>/dev/null | sed -n "s/^ *snapshotter = '\(.\+\)'/\1/p" | head -1)
        # --local: ctr imports itself (a discard needs it), not through the transfer service.
        docker exec "$node" bash -o pipefail -c '
            import() { ctr --namespace=k8s.io images import --local --all-platforms --digests \
                --snapshotter="$1" --discard-unpacked-layers "$2" >/dev/null; }
            if [[ $2 == dir ]]; then tar -C "$3" -chf - . | import "$1" -; else import "$1" "$3"; fi' \
            import "${snapshotter:-overlayfs}" "$kind" "$source" &
        pids+=($!)
    done
    for node in "$@"; do
        wait "${pids[0]}" || die "importing $source on node $node failed"
        pids=("${pids[@]:1}")
    done
}

# Images into the nodes as early as they can be: their archive written while the cluster
# starts (`docker save` needs no cluster; into the folder every node mounts, so each node
# reads it from there), then imported as soon as the wanted nodes' containerd answers, while
# kind still sets the cluster up: the trainer's into every worker, the operator's (both its
# tags) into every node, side by side, instead of `kind load`'s stream through the engine
# after the cluster is made (63 s of the tier's critical path on a 2-core machine). kind
# restarts no node's containerd on the way (it would only for containerdConfigPatches, which
# hack/kind/cluster.yaml has none of).
images_in() {  # ARCHIVE NODE-PATTERN (grep -E on the node names) WANT (how many) IMAGE...
    local archive=$1 pattern=$2 want=$3 deadline=$((SECONDS + 600)) nodes=()
    shift 3
    local source
    source=$(packed "$archive" "$@") || die "docker save -o $archive $* failed"
    until mapfile -t nodes < <(kind get nodes --name "$CLUSTER" 2>/dev/null | grep -E -- "$pattern" | sort) \
        && ((${#nodes[@]} == want)) && containerd_answers "${nodes[@]}"; do
        ((SECONDS < deadline)) || die "the containerd of the nodes that take $* did not answer within 600 s: ${nodes[*]:-none yet}"
        sleep 1
    done
    load_archive "$(in_node "$source")" "$([[ -d $source ]] && echo dir || echo file)" "${nodes[@]}"
}
# What the nodes import IMAGE... from, on stdout: a layout of links to the engine's blobs
# in SHARED/.images, named after ARCHIVE, where ENGINE_BLOBS holds them all; else ARCHIVE.
packed() {  # ARCHIVE IMAGE...
    local archive=$1 layout image refs=() why
    shift
    layout=$SHARED/.images/$(basename "${archive%.tar}").layout
    if [[ -n ${ENGINE_BLOBS:-} ]]; then
        for image in "$@"; do refs+=("$image=$(docker image inspect -f '{{.Id}}' "$image")"); done
        rm -rf "$layout"
        if why=$("$PY" hack/kind/oci_layout.py "$ENGINE_BLOBS" "$layout" "$NODE_BLOBS" "${refs[@]}" 2>&1); then
            echo "$layout"
            return 0
        fi
        log "$why; docker save of $* instead"
    fi
    saved "$archive" "$@" && echo "$archive"
}
# ARCHIVE written by `docker save` of IMAGE..., unless a run before wrote it: under another
# name first, renamed once whole, so that one cut short is never taken for it.
saved() {  # ARCHIVE IMAGE...
    local archive=$1
    shift
    [[ -f $archive ]] && return 0
    docker save -o "$archive.partial" "$@" && mv "$archive.partial" "$archive" && return 0
    rm -f "$archive.partial"
    return 1
}
in_node() {  # PATH here -> the same file inside the nodes (the two folders they mount)
    case $1 in
        "$SHARED"/*) echo "/var/ddpjob-shared/${1#"$SHARED"/}" ;;
        "$ARCHIVES"/*) echo "/var/ddpjob-archives/${1#"$ARCHIVES"/}" ;;
        *) die "$1 is in no folder the nodes mount" ;;
    esac
}
containerd_answers() {  # NODE...
    local node
    for node in "$@"; do docker exec "$node" ctr version >/dev/null 2>&1 || return 1; done
}
