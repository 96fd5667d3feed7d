#!/usr/bin/env bash
# The real-cluster test: kind + both images + the Helm chart + two DDPJobs.
#
#   make e2e-kind          (or: hack/e2e-kind.sh; tests/deploy/test_e2e_kind.py runs it too)
#
# 1. creates a kind cluster (always deleted on exit, pass or fail);
# 2. builds the operator image and the trainer image (TRAINER_VARIANT=cpu) and
#    `kind load`s them, so nothing is pulled from a registry at run time;
# 3. `helm install`s charts/ddpjob-operator and waits for the operator to be ready;
# 4. applies manifests/examples/mnist-cpu.yaml, waits for its Succeeded condition and
#    checks rank 0's log for the final metrics;
# 5. starts a second, longer copy of it, deletes one training Pod mid-run and checks
#    that the operator restarts the gang (status.restarts, the Pods' restart-count
#    label) and that the job still succeeds.
# On failure it prints the operator's log, events, the DDPJobs and every Pod's log.
#
# Needs: bash >= 5.1, docker (a running daemon), kind, kubectl, helm on PATH (`make e2e-kind`
# puts .tools/bin and .venv/bin first: helm from hack/fetch-tools.sh, kubectl from
# the venv). Env knobs:
#   KIND_CLUSTER      cluster name (default ddpjob-e2e)
#   KIND_NODE_IMAGE   kind node image (default: kind's own default)
#   TORCH_INDEX_URL   pip index for torch in the CPU trainer image; PyTorch's CPU-only
#                     wheel index keeps the image small (default: pip's default index)
#   E2E_TIMEOUT       timeout of each job wait (default 900s)
#   KEEP_CLUSTER=1    do not delete the cluster (for debugging)
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
JOB=mnist-cpu
RESTART_JOB=mnist-restart
KCTX="kind-$CLUSTER"

log() { printf '\n=== e2e-kind: %s\n' "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }
k() { kubectl --context "$KCTX" "$@"; }

# ------------------------------------------------------------------ prerequisites
missing=()
for tool in docker kind kubectl helm; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
    echo "e2e-kind: missing on PATH: ${missing[*]} (see the README's 'Real-cluster test' section)" >&2
    exit 2
fi
docker info >/dev/null 2>&1 || { echo "e2e-kind: docker is installed but its daemon is not reachable" >&2; exit 2; }

# ------------------------------------------------------------ diagnostics, cleanup
dump() {
    log "diagnostics"
    k get ddpjobs -A -o yaml || true
    k get pods,services -A -o wide || true
    k get events -A --sort-by=.lastTimestamp || true
    log "operator log"
    k -n "$SYSTEM_NS" logs "deployment/$RELEASE" --all-containers --tail=-1 || true
    k -n "$SYSTEM_NS" logs "deployment/$RELEASE" --all-containers --previous --tail=200 2>/dev/null || true
    local pod
    for pod in $(k -n "$JOB_NS" get pods -o name 2>/dev/null); do
        log "log of $pod"
        k -n "$JOB_NS" logs "$pod" --all-containers --tail=300 || true
    done
}

cleanup() {
    local rc=$?
    ((rc == 0)) || dump
    if [[ "${KEEP_CLUSTER:-0}" == 1 ]]; then
        log "KEEP_CLUSTER=1: leaving cluster $CLUSTER (kind delete cluster --name $CLUSTER)"
    else
        log "deleting cluster $CLUSTER"
        kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
    fi
    if ((rc == 0)); then log "PASSED"; else log "FAILED (exit $rc)"; fi
    exit "$rc"
}
trap cleanup EXIT

# Waits for a DDPJob to reach Succeeded, failing as soon as it reaches Failed instead
# of waiting out the timeout: two `kubectl wait`s race, the first to finish decides.
wait_succeeded() {
    local job=$1 ok bad
    k -n "$JOB_NS" wait "ddpjob/$job" --for=condition=Succeeded --timeout="$TIMEOUT" & ok=$!
    k -n "$JOB_NS" wait "ddpjob/$job" --for=condition=Failed --timeout="$TIMEOUT" >/dev/null & bad=$!
    local first rc=0
    wait -n -p first "$ok" "$bad" || rc=$?
    kill "$ok" "$bad" 2>/dev/null || true
    wait "$ok" "$bad" 2>/dev/null || true
    if [[ "$first" == "$bad" && $rc == 0 ]]; then
        die "DDPJob $job failed: $(k -n "$JOB_NS" get ddpjob "$job" -o jsonpath='{.status}')"
    fi
    ((rc == 0)) || die "DDPJob $job did not succeed within $TIMEOUT (phase: $(k -n "$JOB_NS" get ddpjob "$job" -o jsonpath='{.status.phase}'))"
}

# ------------------------------------------------------------------------ cluster
log "creating kind cluster $CLUSTER"
kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true  # a leftover from an interrupted run
kind create cluster --name "$CLUSTER" --wait 180s ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"}

# ------------------------------------------------------------------------- images
log "building $OPERATOR_IMAGE and $TRAINER_IMAGE"
export DOCKER_BUILDKIT=1  # stage skipping and FROM trainer-base-${TRAINER_VARIANT}
docker build --target operator -t "$OPERATOR_IMAGE" .
docker build --target trainer --build-arg TRAINER_VARIANT=cpu \
    ${TORCH_INDEX_URL:+--build-arg "TORCH_INDEX_URL=$TORCH_INDEX_URL"} -t "$TRAINER_IMAGE" .
kind load docker-image --name "$CLUSTER" "$OPERATOR_IMAGE" "$TRAINER_IMAGE"

# ----------------------------------------------------------------------- operator
log "helm install $RELEASE"
helm install "$RELEASE" charts/ddpjob-operator --kube-context "$KCTX" \
    --namespace "$SYSTEM_NS" --create-namespace \
    --set image.repository="${OPERATOR_IMAGE%:*}" --set image.tag="${OPERATOR_IMAGE##*:}" \
    --set image.pullPolicy=Never \
    --set trainer.cpuImage="$TRAINER_IMAGE" --set trainer.imagePullPolicy=IfNotPresent \
    --wait --timeout 5m
k -n "$SYSTEM_NS" rollout status "deployment/$RELEASE" --timeout=3m
k wait crd/ddpjobs.ddpjob.io --for=condition=Established --timeout=60s
k create namespace "$JOB_NS"

# ------------------------------------------------------------- job 1: the example
log "job 1: $EXAMPLE"
k -n "$JOB_NS" apply -f "$EXAMPLE"
wait_succeeded "$JOB"
rank0_log=$(k -n "$JOB_NS" logs "$JOB-0" -c trainer)
printf '%s\n' "$rank0_log" | tail -n 5
epochs=$("$PY" -c 'import sys, yaml; a = yaml.safe_load(open(sys.argv[1]))["spec"]["args"]; print(a[a.index("--epochs") + 1])' "$EXAMPLE")
grep -q "epoch $epochs/$epochs done: .*loss" <<<"$rank0_log" || die "rank 0's log has no final epoch metrics (epoch $epochs/$epochs)"
grep -q "done: $epochs epoch(s)" <<<"$rank0_log" || die "rank 0's log has no final 'done: $epochs epoch(s)' line"

# ------------------------------------------- job 2: a Pod deleted mid-run restarts
log "job 2: $RESTART_JOB, delete a training Pod mid-run"
# The example, renamed and made long enough to be caught mid-run.
"$PY" - "$EXAMPLE" "$RESTART_JOB" <<'PYEOF' | k -n "$JOB_NS" apply -f -
import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
job["metadata"] = {"name": sys.argv[2]}
args = job["spec"]["args"]
args[args.index("--epochs") + 1] = "20"  # ~8x the example's work per epoch: a minute or more
job["spec"]["args"] = args + ["--synthetic-size", "32768", "--log-every", "10"]
job["spec"]["maxRestarts"] = 3
print(yaml.safe_dump(job))
PYEOF
k -n "$JOB_NS" wait "ddpjob/$RESTART_JOB" --for=condition=Running --timeout="$TIMEOUT"
# Mid-run means training steps are being taken, not just Pods existing: wait for
# rank 0's first progress line (`kubectl logs -f` ends when the line appears).
timeout "${TIMEOUT%s}" bash -c "until kubectl --context '$KCTX' -n '$JOB_NS' logs -f '$RESTART_JOB-0' -c trainer 2>/dev/null | grep -m1 -q 'epoch 1/'; do sleep 1; done" \
    || die "$RESTART_JOB never started training"
victim="$RESTART_JOB-1"
log "deleting pod $victim"
k -n "$JOB_NS" delete pod "$victim" --wait=false
k -n "$JOB_NS" wait "ddpjob/$RESTART_JOB" --for=jsonpath='{.status.restarts}'=1 --timeout="$TIMEOUT"
wait_succeeded "$RESTART_JOB"
restarts=$(k -n "$JOB_NS" get ddpjob "$RESTART_JOB" -o jsonpath='{.status.restarts}')
((restarts >= 1)) || die "$RESTART_JOB succeeded without a recorded restart"
label=$(k -n "$JOB_NS" get pod "$RESTART_JOB-0" -o jsonpath='{.metadata.labels.ddpjob\.io/restart-count}')
[[ "$label" == "$restarts" ]] || die "Pod $RESTART_JOB-0 has restart-count label '$label', expected $restarts"
k -n "$JOB_NS" logs "$RESTART_JOB-0" -c trainer | grep -q "done: 20 epoch(s)" || die "$RESTART_JOB rank 0 did not finish after the restart"
log "restart observed (restarts=$restarts) and the job succeeded"

# ------------------------------------------- optional: gang scheduling (E2E_GANG)
if [[ -n "${E2E_GANG:-}" ]]; then
    log "optional stage: gang scheduling with $E2E_GANG"
    KCTX=$KCTX JOB_NS=$JOB_NS SYSTEM_NS=$SYSTEM_NS RELEASE=$RELEASE EXAMPLE=$EXAMPLE TIMEOUT=$TIMEOUT PY=$PY \
        hack/e2e-gang.sh "$E2E_GANG"
fi
