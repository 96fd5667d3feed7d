# The kind tier's operator scenarios, sourced by hack/e2e-kind.sh after
# hack/kind/node_scenarios.sh (whose helpers they use): the acting operator lost mid-job:
# its node killed, its process killed, and a `helm upgrade` to a new operator image. The
# chart's defaults (two replicas on different nodes, a Lease electing the acting one:
# docs/design.md, "The operator's replicas") keep the job training untouched, and its status
# moves again within 20 s of the loss: no Pod made twice, no restart counted.

LEASE_NS=${SYSTEM_NS:-ddpjob-system}

leader_pod() {  # the acting replica's Pod: the Lease's holder is "<pod name>_<pod uid>"
    local holder
    holder=$(k -n "$LEASE_NS" get lease "$RELEASE" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null) || return 1
    [[ -n "$holder" ]] && echo "${holder%_*}"
}
leader_node() { k -n "$LEASE_NS" get pod "$(leader_pod)" -o jsonpath='{.spec.nodeName}'; }
pod_uids() { k -n "$JOB_NS" get pods -l "ddpjob.io/job-name=$1" -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.uid} {end}'; }

# Seconds from T until a replica leads and the job's status.progress.step has moved past
# STEP (the leader read Pod 0 and wrote the status), in TOOK: with OLD, a replica other than
# OLD (its node is gone); with "" any (a killed process's container, started again in its
# Pod, is the holder it was and takes the Lease back at once: docs/design.md).
STATUS_RESUME_S=20
status_resumed() {  # JOB T OLD STEP
    took_until "$1: a leader writes its status" "$2" "$STATUS_RESUME_S" \
        "[[ -n \$(leader_pod) && \$(leader_pod) != '$3' && \$(status $1 .progress.step) -gt $4 ]]"
}
restarts_of() { k -n "$LEASE_NS" get pod "$1" -o jsonpath='{.status.containerStatuses[?(@.name=="operator")].restartCount}'; }

# Every second, the time and JOB's status.progress.step, into FILE, until killed.
sample_progress() {  # JOB FILE
    while true; do
        printf '%s %s\n' "$(now)" "$(status "$1" .progress.step 2>/dev/null)" >>"$2"
        sleep 1
    done
}

operator_replicas_ready() {
    local want ready
    want=$(k -n "$LEASE_NS" get deployment "$RELEASE" -o jsonpath='{.spec.replicas}')
    ready=$(k -n "$LEASE_NS" get deployment "$RELEASE" -o jsonpath='{.status.readyReplicas}')
    [[ -n $want && $ready == "$want" ]]
}

# The job trains on, untouched: the same Pods, no restart.
untouched() {  # JOB PODS
    [[ $(pod_uids "$1") == "$2" && $(status "$1" .restarts) == 0 ]] \
        || die "$1 was touched: Pods '$2' became '$(pod_uids "$1")', restarts $(status "$1" .restarts)"
}

scenario_operator_loss() {
    local job=steady first node pods t0 step old
    wait_for "a replica leads" 60 "leader_pod >/dev/null"
    first=$(leader_node)
    # The standby is on another node, or the node's loss takes both and proves nothing.
    local placed
    placed=$(k -n "$LEASE_NS" get pods -l "app.kubernetes.io/name=$RELEASE" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort)
    [[ $(wc -l <<<"$placed") -ge 2 && $(sort -u <<<"$placed" | wc -l) == $(wc -l <<<"$placed") ]] \
        || die "the operator's replicas are not each on a node of their own: $(paste -sd' ' <<<"$placed")"
    # The job keeps off the leader's node: it is the operator's loss that is tried here.
    # At least 1 s a step until every loss was seen: the job outlasts the three however
    # slow the machine (384 steps, 384 s and more), then finishes at speed; fewer, slower
    # steps than 768 of 0.5 s leave fewer for its end. Its progress published at every step:
    # at every tenth (node_job's), the status could move only every 10 s, which the figures
    # below would have measured instead of the operator's loss.
    node_job "$job" 2 "{\"avoid\": [\"$first\"], \"maxRestarts\": 1, \"step\": 1}" "--epochs 3 --synthetic-size 16384 --log-every 1"
    k -n "$JOB_NS" wait "ddpjob/$job" --for=condition=Running --timeout="$TIMEOUT"
    wait_for "$job: progress in its status" 120 "[[ \$(status $job .progress.step) -gt 0 ]]"
    pods=$(pod_uids "$job")

    # Its node killed: no Lease release, the standby waits out the lease. The step it moves
    # past is read once the kill returned: read before, a write the acting replica made
    # between the read and the kill (every 2 s) once passed for its successor's (0.6 s).
    settle
    old=$(leader_pod) t0=$(now)
    log "docker kill $first (the node of the acting operator, $old)"
    docker kill "$first" >/dev/null
    step=$(status "$job" .progress.step)
    status_resumed "$job" "$t0" "$old" "$step"
    figure "operator node killed: $(leader_pod) leads and the status moves $TOOK s after"
    untouched "$job" "$pods"
    # The node starts again while the next loss is tried (it needs no standby).
    restart_node "$first"

    # Its process killed (a crash), on a live node: its container starts again in the same
    # Pod and takes the Lease back, or a standby takes it, whichever is first.
    local restarts
    old=$(leader_pod) node=$(leader_node)
    restarts=$(restarts_of "$old")
    log "killing the operator process of $old on $node"
    t0=$(now)
    docker exec "$node" sh -c "kill -9 \$(crictl inspect -o go-template --template '{{.info.pid}}' \$(crictl ps -q --label io.kubernetes.pod.name=$old --name operator))"
    step=$(status "$job" .progress.step)
    status_resumed "$job" "$t0" "" "$step"
    figure "operator process killed: $(leader_pod) leads and the status moves $TOOK s after"
    wait_for "$old: its operator container started again" 60 "[[ \$(restarts_of $old) -gt $restarts ]]"
    untouched "$job" "$pods"
    # The upgrade from a whole set: the node back, every replica Ready (the one on that node,
    # or its replacement where the not-ready taint evicted it).
    node_back "$first"
    wait_for "every operator replica Ready" 180 "operator_replicas_ready"

    # An upgrade to a new image: each old replica releases the Lease as it stops. The
    # status is sampled every second meanwhile: its longest stand-still is the figure.
    local samples=$SHARED/$job-status-samples sampler
    sample_progress "$job" "$samples" & sampler=$!
    log "helm upgrade to $OPERATOR_IMAGE_NEXT"
    helm upgrade "$RELEASE" charts/ddpjob-operator --kube-context "$KCTX" --namespace "$LEASE_NS" --reuse-values \
        --set image.tag="${OPERATOR_IMAGE_NEXT##*:}" --wait --timeout 5m
    k -n "$LEASE_NS" rollout status "deployment/$RELEASE" --timeout=3m
    wait_for "a replica of the new image leads" 60 \
        "[[ \$(k -n $LEASE_NS get pod \$(leader_pod) -o jsonpath='{.spec.containers[0].image}') == $OPERATOR_IMAGE_NEXT ]]"
    step=$(status "$job" .progress.step)
    wait_for "$job: the new leader writes its status" 20 "[[ \$(status $job .progress.step) -gt $step ]]"
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    local still
    still=$("$PY" - "$samples" <<'PYEOF'
import sys
rows = [line.split() for line in open(sys.argv[1]) if len(line.split()) == 2]
changes = [float(t) for (t, s), (_, before) in zip(rows[1:], rows) if s != before]
print(f"{max((b - a for a, b in zip(changes, changes[1:])), default=0):.1f}")
PYEOF
)
    figure "helm upgrade: the status stood still at most $still s while the replicas were replaced"
    "$PY" -c 'import sys; sys.exit(float(sys.argv[1]) > 20)' "$still" || die "$job's status stood still $still s during the upgrade"
    untouched "$job" "$pods"
    release_steps "$job"
    finish_later operator_loss operator_loss_end "$job" "$pods"
}
operator_loss_end() {  # JOB PODS
    wait_succeeded "$1"
    untouched "$1" "$2"
}
