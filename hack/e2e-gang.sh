#!/usr/bin/env bash
# The optional gang-scheduling stage of the kind e2e test (hack/e2e-kind.sh runs it with
# E2E_GANG=coscheduling or E2E_GANG=volcano, after its own jobs):
#
# 1. installs the scheduler from its released manifests:
#    coscheduling: the scheduler-plugins Helm chart (as a second scheduler, named
#                  scheduler-plugins-scheduler, with its controller and PodGroup CRD);
#    volcano:      Volcano's released installer manifest (volcano-system namespace);
# 2. waits for its PodGroup CRD to be Established and its Deployments to be ready;
# 3. upgrades the ddpjob operator with gang.<integration>.enabled=true (the PodGroup
#    RBAC and the operator's DDPJOB_GANG_INTEGRATIONS);
# 4. applies a 2-node DDPJob with spec.scheduling.gang=<integration>, waits for it to
#    succeed, and checks that its Pods named the scheduler and the PodGroup.
#
#   hack/e2e-gang.sh [--dry-run] [--render DIR] coscheduling|volcano
#
# --dry-run prints each step's command instead of running it (no cluster, no tools);
# --render DIR writes the objects the stage applies (the DDPJob, the Helm values) to DIR.
# tests/deploy/test_e2e_gang.py checks both, and lints what --render writes.
# Env: KCTX (kubectl context), JOB_NS, SYSTEM_NS, RELEASE, EXAMPLE, TIMEOUT, PY,
#      SCHEDULER_PLUGINS_VERSION (chart, default 0.35.7), VOLCANO_VERSION (default v1.11.0).
set -euo pipefail
cd "$(dirname "$0")/.."

DRY_RUN=0
RENDER=""
while [[ $# -gt 0 && "$1" == --* ]]; do
    case "$1" in
        --dry-run) DRY_RUN=1; shift ;;
        --render) RENDER=${2:?--render needs a directory}; shift 2 ;;
        *) echo "e2e-gang: unknown option $1" >&2; exit 2 ;;
    esac
done
GANG=${1:-}
case "$GANG" in
    coscheduling|volcano) ;;
    *) echo "usage: hack/e2e-gang.sh [--dry-run] [--render DIR] coscheduling|volcano" >&2; exit 2 ;;
esac

KCTX=${KCTX:-kind-ddpjob-e2e}
JOB_NS=${JOB_NS:-ddpjob-e2e}
SYSTEM_NS=${SYSTEM_NS:-ddpjob-system}
RELEASE=${RELEASE:-ddpjob-operator}
EXAMPLE=${EXAMPLE:-manifests/examples/mnist-cpu.yaml}
[[ -f "$EXAMPLE" ]] || EXAMPLE=tests/deploy/fixtures/mnist-cpu.yaml
TIMEOUT=${TIMEOUT:-900s}
PY=${PY:-python3}
SCHEDULER_PLUGINS_VERSION=${SCHEDULER_PLUGINS_VERSION:-0.35.7}
VOLCANO_VERSION=${VOLCANO_VERSION:-v1.11.0}
JOB=gang-$GANG

log() { printf '\n=== e2e-gang: %s\n' "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }
# Every step goes through `step`: printed, and run unless --dry-run.
step() {
    printf '+ %s\n' "$*"
    ((DRY_RUN)) || "$@"
}
k() { step kubectl --context "$KCTX" "$@"; }

case "$GANG" in
    coscheduling)
        SCHED_NS=scheduler-plugins
        CRD=podgroups.scheduling.x-k8s.io
        SCHEDULER_NAME=scheduler-plugins-scheduler ;;
    volcano)
        SCHED_NS=volcano-system
        CRD=podgroups.scheduling.volcano.sh
        SCHEDULER_NAME=volcano ;;
esac

workdir=${RENDER:-$(mktemp -d)}
mkdir -p "$workdir"
# The operator's values for this stage, and the gang job: the example, renamed, 2 nodes.
cat >"$workdir/operator-values.yaml" <<EOF
gang:
  $GANG:
    enabled: true
    schedulerName: $SCHEDULER_NAME
EOF
"$PY" - "$EXAMPLE" "$JOB" "$GANG" >"$workdir/job.yaml" <<'PYEOF'
import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
job["metadata"] = {"name": sys.argv[2]}
job["spec"]["nodes"] = 2
job["spec"]["scheduling"] = {"gang": sys.argv[3], "scheduleTimeoutSeconds": 600}
print(yaml.safe_dump(job, sort_keys=False), end="")
PYEOF
[[ -n "$RENDER" ]] && log "wrote $workdir/operator-values.yaml and $workdir/job.yaml"

# ------------------------------------------------------------ 1. the scheduler
log "installing $GANG"
case "$GANG" in
    coscheduling)
        step helm install scheduler-plugins scheduler-plugins \
            --repo https://scheduler-plugins.sigs.k8s.io --version "$SCHEDULER_PLUGINS_VERSION" \
            --kube-context "$KCTX" --namespace "$SCHED_NS" --create-namespace --wait --timeout 5m ;;
    volcano)
        k apply --server-side -f \
            "https://raw.githubusercontent.com/volcano-sh/volcano/$VOLCANO_VERSION/installer/volcano-development.yaml" ;;
esac

# ------------------------------------------------------------ 2. ready
k wait "crd/$CRD" --for=condition=Established --timeout=120s
k -n "$SCHED_NS" wait deployment --all --for=condition=Available --timeout=5m

# ------------------------------------------------------------ 3. the operator serves it
log "enabling gang.$GANG in the operator"
step helm upgrade "$RELEASE" charts/ddpjob-operator --kube-context "$KCTX" --namespace "$SYSTEM_NS" \
    --reuse-values --values "$workdir/operator-values.yaml" --wait --timeout 5m
k -n "$SYSTEM_NS" rollout status "deployment/$RELEASE" --timeout=3m

# ------------------------------------------------------------ 4. a gang job
log "job $JOB (spec.scheduling.gang=$GANG)"
((DRY_RUN)) || kubectl --context "$KCTX" get namespace "$JOB_NS" >/dev/null 2>&1 || k create namespace "$JOB_NS"
k -n "$JOB_NS" apply -f "$workdir/job.yaml"
k -n "$JOB_NS" wait "ddpjob/$JOB" --for=condition=Succeeded --timeout="$TIMEOUT"
if ((DRY_RUN)); then
    log "dry run: done"
    exit 0
fi
scheduler=$(kubectl --context "$KCTX" -n "$JOB_NS" get pod "$JOB-0" -o jsonpath='{.spec.schedulerName}')
[[ "$scheduler" == "$SCHEDULER_NAME" ]] || die "Pod $JOB-0 has schedulerName '$scheduler', expected $SCHEDULER_NAME"
case "$GANG" in
    coscheduling) group=$(kubectl --context "$KCTX" -n "$JOB_NS" get pod "$JOB-0" \
                      -o jsonpath='{.metadata.labels.scheduling\.x-k8s\.io/pod-group}') ;;
    volcano) group=$(kubectl --context "$KCTX" -n "$JOB_NS" get pod "$JOB-0" \
                 -o jsonpath='{.metadata.annotations.scheduling\.k8s\.io/group-name}') ;;
esac
[[ "$group" == "$JOB-attempt-0" ]] || die "Pod $JOB-0 names PodGroup '$group', expected $JOB-attempt-0"
scheduled=$(kubectl --context "$KCTX" -n "$JOB_NS" get ddpjob "$JOB" -o jsonpath='{.status.scheduledNodes}')
[[ "$scheduled" == 2 ]] || die "DDPJob $JOB reports scheduledNodes '$scheduled', expected 2"
log "gang job $JOB placed by $SCHEDULER_NAME through PodGroup $group and succeeded"
