#!/usr/bin/env bash
# The real-Pods test: both images, a kind cluster of real kubelets, containerd and runc,
# cluster DNS, the Helm chart, and the training scenarios of hack/kind/scenarios.sh.
#
#   make e2e-kind          (or: hack/engine.sh run -- hack/e2e-kind.sh; tests/deploy/test_e2e_kind.py)
#
# 1. builds the operator and the CPU trainer image (hack/build-images.sh) and the kind
#    node image for the pinned Kubernetes (hack/kind-node-image.sh), with no registry;
#    KIND_NODE_IMAGE=kindest/node:... uses a released node image instead;
# 2. creates a kind cluster of one control plane and three workers while the images build
#    (hack/kind/cluster.yaml; always deleted on exit, pass or fail) and loads the images into it (each read from the
#    engine's own blobs, which the nodes mount, or else from an archive written while the
#    cluster starts, as soon as their containerd answers: hack/kind/images.sh; the
#    operator's into every node, the trainer's into every worker), so nothing is pulled;
# 3. once every node is Ready, `helm install`s charts/ddpjob-operator (its NetworkPolicy
#    included) and makes the job
#    namespace enforce the `restricted` Pod Security Standard;
# 4. runs the scenarios: the example across two nodes, a deleted Pod, an elastic job
#    losing a Pod, a container over its memory limit, a graceful delete (side by side:
#    hack/kind/lanes.sh); then, one at a time, a node
#    killed, paused, cut off, drained and reported unhealthy under rigid and elastic jobs,
#    and the acting operator's node and process killed and the operator upgraded
#    (hack/kind/node_scenarios.sh, hack/kind/operator_scenarios.sh; each one's end, its
#    jobs run out and audited, beside the next one's start: finish_later in
#    hack/kind/lanes.sh); a job's curves
#    through `ddpjob tensorboard` over a real port-forward (hack/kind/curves_scenario.sh);
# 5. on failure prints the DDPJobs, Pods, Events and every container's log.
#
# Needs: bash >= 5.1, a docker that answers (`make e2e-kind` starts one of the project's
# own when none does: hack/engine.sh), kubectl, helm; kind from PATH or built from its
# pinned module. Env knobs:
#   KIND_CLUSTER      cluster name (default ddpjob-e2e)
#   KIND_NODE_IMAGE   a node image to use instead of building one
#   E2E_TIMEOUT       timeout of each job wait (default 900s)
#   E2E_NODE_SCENARIOS=0  the default list without the node scenarios; a list of their
#                     names: with those only (.ci/run runs the ones its time left allows)
#   E2E_SCENARIOS     which scenarios, in order (default: example restart elastic oom graceful curves,
#                     then the node scenarios: node_elastic node_rigid partition node_drain
#                     node_unhealthy operator_loss; `curves`: TensorBoard through ddpjob tensorboard;
#                     `bench` measures pod start-up: benchmarks/pod_startup.py)
#   KEEP_CLUSTER=1    do not delete the cluster (for debugging)
#   DDPJOB_IMAGE_ARCHIVES  where the trainer image's archive is kept between runs, one at a
#                     time, by the image's layers (default ~/.cache/ddpjob/archives: 3 GB)
#   E2E_LANES         how many of the default scenarios run side by side (default 3; 1: in turn)
#   E2E_TIMINGS       a file to which each phase's seconds are appended (benchmarks/)
#   E2E_FIGURES       a file to which the node scenarios' figures are appended
#   E2E_GANG          optional last stage: coscheduling or volcano installs that scheduler
#                     from its released manifests and runs a gang job (hack/e2e-gang.sh)
set -euo pipefail

cd "$(dirname "$0")/.."

CLUSTER=${KIND_CLUSTER:-ddpjob-e2e}
TIMEOUT=${E2E_TIMEOUT:-900s}
PY=${PY:-python3}
RELEASE=ddpjob-operator  # the chart name, so the objects are named just "ddpjob-operator"
SYSTEM_NS=ddpjob-system
JOB_NS=ddpjob-e2e
OPERATOR_IMAGE=ddpjob/operator:e2e
# The tag manifests/examples/mnist-cpu.yaml names, so the example runs unchanged.
TRAINER_IMAGE=ddpjob/trainer:0.2.0-cpu
EXAMPLE=manifests/examples/mnist-cpu.yaml
[[ -f "$EXAMPLE" ]] || EXAMPLE=tests/deploy/fixtures/mnist-cpu.yaml
KCTX="kind-$CLUSTER"
# Which scenarios, in order (E2E_SCENARIOS, E2E_NODE_SCENARIOS): a name it does not know
# ends the run here, before anything started.
SCENARIOS=$(hack/kind/scenario_list.sh)
# How many of the default scenarios run at once (hack/kind/lanes.sh); 1: one after another.
LANES=${E2E_LANES:-3}
[[ $LANES =~ ^[1-9][0-9]*$ ]] || { echo "e2e-kind: E2E_LANES='$LANES' is not a count of lanes (1 or more)" >&2; exit 2; }
# The same operator image under a second tag: the operator scenario's `helm upgrade` to it
# replaces every replica, as an upgrade to a new release does.
OPERATOR_IMAGE_NEXT=${OPERATOR_IMAGE%:*}:e2e-next

# log, step, die, phase; on failure the step and the reason are the run's last lines.
# shellcheck source=hack/kind/report.sh
source hack/kind/report.sh
k() { kubectl --context "$KCTX" "$@"; }

# ------------------------------------------------------------------ prerequisites
missing=()
for tool in docker kubectl helm; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
    echo "e2e-kind: missing on PATH: ${missing[*]} (see docs/development.md, 'Real-cluster test')" >&2
    exit 2
fi
docker info >/dev/null 2>&1 || { echo "e2e-kind: no docker answers (run \`make e2e-kind\`, which starts one: hack/engine.sh)" >&2; exit 2; }
if ! command -v kind >/dev/null 2>&1; then
    kind_dir=$("$PY" -m ddpjob_devcluster.controlplane.build kind | awk '{print $NF}')
    PATH="$kind_dir:$PATH"
fi

# A shared folder every node mounts (a ReadWriteMany volume, as NFS would be): the
# checkpoints and metrics of the scenarios, readable here.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ddpjob-e2e-kind.XXXXXX")
SHARED=$WORK/shared
mkdir -m 0777 "$SHARED"
# The cluster's credentials go to a kubeconfig of the run's own, never the user's: kind
# merges its context into ~/.kube/config and makes it the current one (kubectl and helm,
# here and in hack/e2e-gang.sh, read the same variables). Their caches too: a folder per
# cluster address in ~/.kube/cache otherwise.
export KUBECONFIG=$WORK/kubeconfig KUBECACHEDIR=$WORK/kube-cache

# ------------------------------------------------------------ diagnostics, cleanup
dump() {
    log "diagnostics"
    k get nodes -o wide || true
    k get ddpjobs -A -o yaml || true
    k get pods,services,networkpolicies -A -o wide || true
    k get events -A --sort-by=.lastTimestamp || true
    local ns pod
    while read -r ns pod; do
        log "logs of $ns/$pod"
        k -n "$ns" logs "$pod" --all-containers --prefix --tail=300 || true
        k -n "$ns" logs "$pod" --all-containers --prefix --previous --tail=100 2>/dev/null || true
    done < <(k get pods -A -o jsonpath='{range .items[*]}{.metadata.namespace} {.metadata.name}{"\n"}{end}' 2>/dev/null)
}

# kubelet sets a few kernel tunables that no container can keep to itself
# (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops: kubelet's
# setupKernelTunables); kind's nodes are privileged, so they land on the host. Put back.
TUNABLES=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops)
declare -A TUNED
for t in "${TUNABLES[@]}"; do TUNED[$t]=$(sysctl -n "$t" 2>/dev/null || true); done
restore_tunables() {
    local t
    for t in "${TUNABLES[@]}"; do
        [[ -n "${TUNED[$t]}" && "$(sysctl -n "$t" 2>/dev/null)" != "${TUNED[$t]}" ]] || continue
        sysctl -q -w "$t=${TUNED[$t]}" 2>/dev/null && log "restored $t=${TUNED[$t]}" || true
    done
}

cleanup() {
    local rc=$? state=
    stop_children $$  # a kubectl wait or watch, in the background or cut short by a signal
    run_status "$rc"
    rc=$RUN_STATUS
    if ((rc != 0)); then
        dump
        # The jobs as they stood, for the summary below the diagnostics.
        state=$(k get ddpjobs -A --request-timeout=20s 2>/dev/null || true)
    fi
    if [[ "${KEEP_CLUSTER:-0}" == 1 ]]; then
        log "KEEP_CLUSTER=1: leaving cluster $CLUSTER (export KUBECONFIG=$KUBECONFIG; kind delete cluster --name $CLUSTER)"
    else
        log "deleting cluster $CLUSTER"
        kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
        rm -rf "$WORK"
    fi
    restore_tunables
    if ((rc == 0)); then log "PASSED"; else report_failure "$rc" "$state"; fi
    exit "$rc"
}
trap cleanup EXIT

# ------------------------------------------------------------------------ cluster
# The cluster is made while the images build (33 to 49 s on two cores whenever the code
# changed): kind needs only the node image, and most of its minute is waiting on kubeadm.
NODE_IMAGE=${KIND_NODE_IMAGE:-$(PY=$PY hack/kind-node-image.sh)}
phase node-image
# shellcheck source=hack/kind/room.sh
source hack/kind/room.sh
# shellcheck source=hack/kind/images.sh
source hack/kind/images.sh
label() { docker image inspect -f "{{ index .Config.Labels \"$1\" }}" "$NODE_IMAGE" 2>/dev/null | grep -v '<no value>' || true; }
etcd_tag=$(label io.ddpjob.etcd-tag) coredns_tag=$(label io.ddpjob.coredns-tag)
config=$WORK/cluster.yaml
"$PY" - hack/kind/cluster.yaml "$SHARED" "$ARCHIVES" "$etcd_tag" "$coredns_tag" "$ENGINE_BLOBS" "$NODE_BLOBS" >"$config" <<'PYEOF'
import sys, yaml
path, shared, archives, etcd, coredns, blobs, node_blobs = sys.argv[1:]
docs = yaml.safe_load(open(path))
for node in docs["nodes"]:
    node["extraMounts"] = [{"hostPath": shared, "containerPath": "/var/ddpjob-shared"},
                           {"hostPath": archives, "containerPath": "/var/ddpjob-archives", "readOnly": True}]
    if blobs:
        node["extraMounts"].append({"hostPath": blobs, "containerPath": node_blobs, "readOnly": True})
patches = []
for patch in docs["kubeadmConfigPatches"]:
    if "@ETCD_TAG@" in patch and not (etcd and coredns):
        continue  # a released node image: kubeadm's own versions are the ones it holds
    patches.append(patch.replace("@ETCD_TAG@", etcd).replace("@COREDNS_TAG@", coredns))
docs["kubeadmConfigPatches"] = patches
yaml.safe_dump(docs, sys.stdout, sort_keys=False)
PYEOF
make_cluster() {
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true  # a leftover from an interrupted run
    mkdir -p "$ARCHIVES"
    log "creating kind cluster $CLUSTER ($NODE_IMAGE) while the images build"
    # No --wait: loading an image needs the nodes' containerd, not a Ready node; the nodes'
    # readiness is waited for before the chart's install (16 s of the load's time saved).
    kind create cluster --name "$CLUSTER" --image "$NODE_IMAGE" --config "$config" >"$WORK/kind-create.log" 2>&1 &
    creator=$!
}
build_images() {
    step images
    OPERATOR_IMAGE=$OPERATOR_IMAGE TRAINER_IMAGE=$TRAINER_IMAGE PY=$PY hack/build-images.sh
    phase images
}
room_then build_images make_cluster  # the room asked before the nodes take any (hack/kind/room.sh)

# The trainer's archive, kept between runs where the nodes cannot read the engine's blobs
# (hack/kind/room.sh); the trainer archives of other layers (and any cut short, and all
# where they are read) are removed here, nothing else.
TRAINER_ARCHIVE=$(trainer_archive)
keep=${TRAINER_ARCHIVE##*/}
[[ -z $ENGINE_BLOBS ]] || keep=
find "$ARCHIVES" -maxdepth 1 -type f -name 'trainer-*.tar*' ! -name "$keep" -delete
OPERATOR_ARCHIVE=$SHARED/.images/operator.tar
mkdir -p "${OPERATOR_ARCHIVE%/*}"
WANT_WORKERS=$(grep -c 'role: worker' hack/kind/cluster.yaml)
images_in "$TRAINER_ARCHIVE" -worker "$WANT_WORKERS" "$TRAINER_IMAGE" &
importer=$!
docker tag "$OPERATOR_IMAGE" "$OPERATOR_IMAGE_NEXT"
images_in "$OPERATOR_ARCHIVE" . $((WANT_WORKERS + 1)) "$OPERATOR_IMAGE" "$OPERATOR_IMAGE_NEXT" &
operator_importer=$!
step "creating kind cluster $CLUSTER ($NODE_IMAGE)"
rc=0
wait "$creator" || rc=$?
cat "$WORK/kind-create.log" >&2
((rc == 0)) || die "kind create cluster exited $rc: see above"
phase cluster
WORKERS=$(kind get nodes --name "$CLUSTER" | grep -- '-worker' | sort | paste -sd,)
step "the operator's image into every node"
wait "$operator_importer" || die "the operator's image into the nodes failed: see above"
rm -rf "$OPERATOR_ARCHIVE" "${OPERATOR_ARCHIVE%.tar}.layout"
phase load-operator-image

# ----------------------------------------------------------------------- operator
# Every node Ready first: the chart's spread of the operator's replicas over nodes is a
# preference, so replicas made while one node alone took Pods would share it (a run that
# went on without kind's --wait put both on one worker, and the operator scenario's loss
# of that node took both).
step "every node Ready"
k wait --for=condition=Ready nodes --all --timeout=300s >/dev/null
step "helm install $RELEASE"
# Progress is read every 2 s (default 30) so that a short job's status shows it.
helm install "$RELEASE" charts/ddpjob-operator --kube-context "$KCTX" \
    --namespace "$SYSTEM_NS" --create-namespace \
    --set image.repository="${OPERATOR_IMAGE%:*}" --set image.tag="${OPERATOR_IMAGE##*:}" \
    --set image.pullPolicy=Never --set networkPolicy.enabled=true \
    --set trainer.cpuImage="$TRAINER_IMAGE" --set trainer.imagePullPolicy=IfNotPresent \
    --set-json 'extraEnv=[{"name":"DDPJOB_PROGRESS_INTERVAL_SECONDS","value":"2"}]' \
    --wait --timeout 5m
k -n "$SYSTEM_NS" rollout status "deployment/$RELEASE" --timeout=3m
k wait crd/ddpjobs.ddpjob.io --for=condition=Established --timeout=60s
k -n "$SYSTEM_NS" get networkpolicy "$RELEASE" >/dev/null || die "the chart's NetworkPolicy was not installed"
log "NetworkPolicy $SYSTEM_NS/$RELEASE installed; this cluster's CNI (hack/kind/default-cni.yaml) does not enforce NetworkPolicy"
k create namespace "$JOB_NS"
k label namespace "$JOB_NS" pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/warn=restricted
phase operator
step "the trainer's image into every worker"
wait "$importer" || die "the trainer's image into the workers ($WORKERS) failed: see above"
phase load-trainer-image

# ---------------------------------------------------------------------- scenarios
# shellcheck source=hack/kind/jobs.sh
source hack/kind/jobs.sh
# shellcheck source=hack/kind/scenarios.sh
source hack/kind/scenarios.sh
# shellcheck source=hack/kind/node_scenarios.sh
source hack/kind/node_scenarios.sh
# shellcheck source=hack/kind/operator_scenarios.sh
source hack/kind/operator_scenarios.sh
# shellcheck source=hack/kind/bench_scenarios.sh
source hack/kind/bench_scenarios.sh
# shellcheck source=hack/kind/curves_scenario.sh
source hack/kind/curves_scenario.sh
# shellcheck source=hack/kind/lanes.sh
source hack/kind/lanes.sh
side=() alone=()
for scenario in $SCENARIOS; do
    if ((LANES > 1)) && [[ " $LANE_SCENARIOS " == *" $scenario "* ]]; then side+=("$scenario"); else alone+=("$scenario"); fi
done
if ((${#side[@]})); then
    step "scenarios side by side, $LANES at a time: ${side[*]}"
    run_lanes "$LANES" "${side[@]}"
    phase scenarios-side-by-side
fi
for scenario in "${alone[@]}"; do
    step "scenario: $scenario"
    "scenario_$scenario"
    phase "scenario-$scenario"
done
# The last node scenario's end, which went on in the background (hack/kind/lanes.sh).
step "the last scenario's end"
settle
phase scenario-end

# ------------------------------------------- optional: gang scheduling (E2E_GANG)
if [[ -n "${E2E_GANG:-}" ]]; then
    step "optional stage: gang scheduling with $E2E_GANG"
    KCTX=$KCTX JOB_NS=$JOB_NS SYSTEM_NS=$SYSTEM_NS RELEASE=$RELEASE EXAMPLE=$EXAMPLE TIMEOUT=$TIMEOUT PY=$PY \
        hack/e2e-gang.sh "$E2E_GANG"
fi
run_done
