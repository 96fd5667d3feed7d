# Room for the real-Pods tier's images, asked by hack/kind-ready.sh before anything is made
# (.ci/run skips the tier and says why: a disk too small is this machine's, like a missing
# engine) and by hack/e2e-kind.sh before its cluster is made (room_then; a failure). Sourced
# inside the engine (docker answers), with TRAINER_IMAGE and OPERATOR_IMAGE set; sets
# ENGINE_BLOBS and ARCHIVES; room_for_images reads TRAINER_ARCHIVE (trainer_archive).
#
# Every node an image loads into keeps its blobs in its containerd's content store and the
# layers unpacked by its snapshotter, inside the engine's data root (the blobs are dropped
# once unpacked, but the workers import at once, so each holds both for a while). The
# nodes read the images from the engine's own blobs (ENGINE_BLOBS, hack/kind/images.sh);
# where it has none to read, from archives: the operator's under TMPDIR, the trainer's
# under ARCHIVES. A disk that fills part way fails deep in containerd instead.

# The engine's content store's blobs, where dockerd's own containerd keeps them under the
# containerd image store (hack/engine.sh): nothing where there is no such folder (another
# engine's, a remote one). Asked before the images are built (the cluster, which mounts
# it, is made meanwhile): an image whose blobs are not all there goes by archive.
engine_blobs() {
    local root dir
    root=$(docker info -f '{{.DockerRootDir}}' 2>/dev/null) || return 0
    dir=$root/containerd/daemon/io.containerd.content.v1.content/blobs/sha256
    [[ ! -d $dir ]] || echo "$dir"
}

ENGINE_BLOBS=$(engine_blobs)

# Where there are no blobs to read, the trainer's archive, kept between runs under ARCHIVES
# by the image's layers (the nodes mount the folder): `docker save` of its 3 GB took 71 s
# on an idle 2-core machine, most of the tier's wait for its images on a run whose images
# were built before. Not by its id: its revision label is the commit, so every commit is a
# new id over the same layers (the nodes then run the archive's, the label of the commit
# that wrote it).
ARCHIVES=${DDPJOB_IMAGE_ARCHIVES:-${XDG_CACHE_HOME:-$HOME/.cache}/ddpjob/archives}
trainer_archive() {  # the trainer's archive's path under ARCHIVES, once the image is built
    echo "$ARCHIVES/trainer-$(docker image inspect -f '{{range .RootFS.Layers}}{{.}} {{end}}' "$TRAINER_IMAGE" | sha256sum | cut -c1-16).tar"
}

image_bytes() {  # IMAGE -> "ARCHIVE UNPACKED", in bytes
    # `.Size` is what `docker save` writes: the compressed blobs under the containerd image
    # store, the layers themselves under the classic one. `docker image ls` adds to it what
    # the containerd store has unpacked; under the classic store it is `.Size` again.
    local archive listed
    archive=$(docker image inspect -f '{{.Size}}' "$1")
    listed=$(docker image ls --format '{{.Size}}' "$1" | head -1 | sed 's/B$//; s/k$/K/' | numfmt --from=si)
    if ((listed > archive + archive / 10)); then echo "$archive $((listed - archive))"; else echo "$archive $archive"; fi
}

existing() {  # PATH -> PATH or its nearest existing parent (ARCHIVES may not be made yet)
    local dir=$1
    while [[ ! -e $dir ]]; do dir=$(dirname "$dir"); done
    echo "$dir"
}

# One line on stdout: what is needed and free (status 0), or why the room is short (1).
room_for_images() {
    local root tmp avail workers ta tu oa ou need kept=0
    root=$(docker info -f '{{.DockerRootDir}}' 2>/dev/null) || return 0
    [[ -d "$root" ]] || return 0  # a remote engine: its disk is not ours to measure
    tmp=${TMPDIR:-/tmp}
    read -r ta tu < <(image_bytes "$TRAINER_IMAGE")
    read -r oa ou < <(image_bytes "$OPERATOR_IMAGE")
    [[ ! -f $TRAINER_ARCHIVE && -z $ENGINE_BLOBS ]] || kept=1  # on the disk already, or no archive
    workers=$(grep -c 'role: worker' hack/kind/cluster.yaml)
    need=$(((ta + tu) * workers + (oa + ou) * (workers + 1) + 3 * 1024 ** 3))  # + the nodes' own use
    # Each archive on the same filesystem (device) as the data root counts there. Not df's
    # mount point: a running dockerd mounts its data root onto itself, so that was always
    # another one, and the archive went uncounted.
    local dir bytes what
    for what in "operator:$tmp:$oa" "trainer:$(existing "$ARCHIVES"):$((kept ? 0 : ta))"; do
        IFS=: read -r what dir bytes <<<"$what"
        if [[ "$(stat -c %d "$dir")" == "$(stat -c %d "$root")" ]]; then
            need=$((need + bytes))
        else
            avail=$(df --output=avail -B1 "$dir" | tail -1)
            if ((avail < bytes)); then
                echo "the $what image's archive (about $((bytes / 1024 ** 3)) GB) is written under $dir; $((avail / 1024 ** 3)) GB are free there"
                return 1
            fi
        fi
    done
    avail=$(df --output=avail -B1 "$root" | tail -1)
    if ((avail < need)); then
        echo "loading the images needs about $((need / 1024 ** 3)) GB free under $root (the trainer image packed and unpacked on each of $workers workers, the operator's on every node, the archives); $((avail / 1024 ** 3)) GB are free"
        return 1
    fi
    echo "about $((need / 1024 ** 3)) GB needed under $root, $((avail / 1024 ** 3)) GB free"
}

# The room asked before the cluster is made, then the cluster started and the images built
# beside it: once the nodes run they have taken part of what the check counts for them
# (each node's /var, copied from the node image), so a check after them refused a disk
# that held the tier (CI at 17cd0fb: 28 GB free against 29 asked, with the cluster being
# made, on a disk where hack/kind-ready.sh had found the 29 GB minutes before; the three
# workers' imports then take 27.2 GB at their peak). Asked of the images the engine holds,
# the last build's: a rebuild after a code change writes little beside them (one that
# changes the dependencies' layer writes it again, uncounted). Where the engine holds none
# yet, they are built first.
room_then() {  # BUILD CLUSTER: the caller's functions, run in this order or the other
    local build=$1 cluster=$2 built=0 room
    if ! docker image inspect "$TRAINER_IMAGE" "$OPERATOR_IMAGE" >/dev/null 2>&1; then
        "$build"
        built=1
    fi
    TRAINER_ARCHIVE=$(trainer_archive)
    STEP="room for the images"
    room=$(room_for_images) || die "$room"
    log "the images: $room"
    "$cluster"
    ((built)) || "$build"
}
