# The kind tier's node scenarios, sourced by hack/e2e-kind.sh after hack/kind/jobs.sh
# (whose helpers they use): a worker node killed, paused, cut off the network, drained or
# reported unhealthy while a job trains on it (docs/node-failures.md). A kind node is a
# container of the engine: `docker kill`, `pause` and `start` act on the whole node at once
# (kubelet, containerd and the Pods), and iptables inside it cuts it off while they live on.
#
# Each is judged by the trainer's own records (hack/kind/node_checks.py: its sample log and
# metrics.jsonl on the shared volume) and by the Pods and the job as the API server shows
# them, with the seconds each reaction took as `figure: ...` lines (benchmarks/ reads them).

CHECKS=hack/kind/node_checks.py
NODE_READY_S=240  # a node started again is Ready within this (its timings: hack/kind/cluster.yaml)

now() { date +%s.%N; }
since() { "$PY" -c 'import sys, time; print(f"{time.time() - float(sys.argv[1]):.1f}")' "$1"; }
check() { "$PY" "$CHECKS" "$@"; }
figure() { log "figure: $*"; [[ -z "${E2E_FIGURES:-}" ]] || printf '%s\n' "$*" >>"$E2E_FIGURES"; }
node_of() { k -n "$JOB_NS" get pod "$1" -o jsonpath='{.spec.nodeName}'; }
uid_of() { k -n "$JOB_NS" get pod "$1" -o jsonpath='{.metadata.uid}' 2>/dev/null; }
ready_of() { k get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'; }
events_of() { k -n "$JOB_NS" get events --field-selector "involvedObject.name=$1" -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}'; }

# A job of NODES nodes (one Pod per worker: a required anti-affinity on the hostname), with
# its checkpoints, metrics and sample log on the shared volume; extra spec fields as JSON
# (an `avoid` list adds a node affinity that keeps it off nodes; `step`, the least seconds
# of each step, 0.2 unless given: the trainer's testing aid). The slow steps last until
# release_steps: a scenario that must see the job through something (a node back, an
# upgrade) lets it run that long however slow the machine, then lets it finish at speed;
# every scenario releases its jobs once nothing it checks needs them still running.
node_job() {  # NAME NODES EXTRA-JSON TRAINER-FLAGS
    local job=$1
    shared_volume "$job"
    job_from_example "$job" "$("$PY" - "$job" "$2" "${3:-"{}"}" <<'PYEOF'
import json, sys
job, nodes, extra = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
avoid = extra.pop("avoid", [])
step = extra.pop("step", 0.2)
affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"ddpjob.io/job-name": job}}}]}}
if avoid:
    affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        # A node field selector takes one value per requirement: one per node (ANDed).
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": [n]} for n in avoid]}]}}
spec = {"nodes": nodes, "nprocPerNode": 1, "checkpoint": {"claimName": f"{job}-checkpoints"},
        "restartBackoffSeconds": 0, "template": {"spec": {"affinity": affinity}},
        "env": [{"name": "DDPJOB_TEST_STEP_SECONDS", "value": str(step)},
                {"name": "DDPJOB_TEST_STEP_SECONDS_UNTIL", "value": "/checkpoints/release-steps"}],
        "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}}
spec.update(extra)
print(json.dumps(spec))
PYEOF
)" "--batch-size 64 --checkpoint-every-steps 10 --log-every 10 --sample-log /checkpoints ${4:-}" | k -n "$JOB_NS" apply -f -
}

release_steps() { touch "$SHARED/$1/release-steps"; }  # JOB: its steps at full speed from now
# A rigid job held for its fault: 96 steps of 2 s (192 s), a checkpoint every 5. Its fault waits
# for the scenario before to settle (28-38 s here); 192 steps of 0.2 s were at step 70-110 then.
RIGID='--epochs 3 --synthetic-size 4096 --checkpoint-every-steps 5'

wait_checkpoint() {  # JOB: a checkpoint, so that a loss has something to resume from
    wait_for "$1: a first checkpoint" "${TIMEOUT%s}" "[[ \$(check newest-checkpoint '$SHARED/$1') != 0 ]]"
}

# Seconds from T until CONDITION holds (polled every second), left in TOOK; fails after LIMIT s.
# With JOB, a job that fails first ends the wait at once, with its message: CI once waited
# out 300 s for a job that had failed in its first minute, and said only "not within".
# EXPLAIN (as wait_for's) prints what was found instead, added to the failure's line: CI's
# log keeps only its tail, and once said only that a survivor's step was not within 10 s.
took_until() {  # WHAT T LIMIT CONDITION [JOB] [EXPLAIN]
    local what=$1 t=$2 limit=$3 condition=$4 job=${5:-} explain=${6:-}
    until eval "$condition"; do
        (($(since "$t" | cut -d. -f1) < limit)) || die "$what: not within ${limit}s of the loss${job:+ ($(status "$job" .phase): $(status "$job" .message))}${explain:+: $(eval "$explain" 2>&1 | tail -1)}"
        [[ -z $job || $(status "$job" .phase) != Failed ]] || die "$what: the job failed first: $(status "$job" .message)"
        sleep 1
    done
    TOOK=$(since "$t")
}

# Ready as its kubelet reports it after the start: right after a kill the API server may
# still show the Ready=True of before (a silent node is NotReady only after a grace period).
start_node() { restart_node "$1" && node_back "$1"; }  # NODE: started again, and Ready
restart_node() { NODE_STARTED=$(date -u +%s) && docker start "$1" >/dev/null; }  # NODE (node_back: Ready)
node_back() {  # NODE: Ready since restart_node
    wait_for "node $1 Ready again" "$NODE_READY_S" "[[ \$(ready_of $1) == True ]] && (( \$(heartbeat_of $1) >= $NODE_STARTED ))"
}
heartbeat_of() {  # NODE: its Ready condition's last heartbeat, in seconds since the epoch (0: none)
    local at
    at=$(k get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}')
    if [[ -n $at ]]; then date -u -d "$at" +%s; else echo 0; fi
}

partition() {  # NODE add|delete: iptables in its network namespace (nothing crosses its interface)
    local op=-I rule
    [[ $2 == add ]] || op=-D
    for rule in "INPUT -i eth0" "OUTPUT -o eth0" "FORWARD -i eth0" "FORWARD -o eth0"; do
        # shellcheck disable=SC2086  # the rule's words
        docker exec "$1" iptables $op $rule -j DROP
    done
}

runs_on() { [[ -n $(docker exec "$1" crictl ps -q --label "io.kubernetes.pod.uid=$2" 2>/dev/null) ]]; }  # NODE POD-UID

# ------------------------------- an elastic job's node frozen a few seconds, paused, killed
# Pause: nothing closes a connection, nothing answers; kill: kubelet, containerd and the Pod
# die at once, nothing writes their end. The job keeps off the acting operator's node (its
# loss is scenario_operator_loss's): a lost Pod comes back only with its node. Each time the
# survivor goes on alone within 10 s. A freeze (the node paused for as long as that takes,
# well under the node monitor's grace: a hung kernel, a VM's stall) leaves the Pod alive:
# its own trainer, thawed, finds the group went on without it and joins again. A longer
# pause and the kill: the job says so within 20 s (NodeLost, NODES 1/2: the node's
# NotReady), the lost Pod is force-deleted (an Event names the node), and the job grows back
# once the node returns (the killed one's minute: in the end, beside the next scenario's
# start). No gang restart, no survivor replaced, every sample trained once.
scenario_node_elastic() {
    # 320 steps of at least 0.64 s (205 s) until released, as 640 of 0.32 s were: fewer left.
    local job=node-elastic size=8192 epochs=5
    wait_for "a replica leads" 60 "leader_pod >/dev/null"
    node_job "$job" 2 "{\"avoid\": [\"$(leader_node)\"], \"elastic\": {\"minNodes\": 1, \"maxNodes\": 2}, \"restartBackoffSeconds\": 1, \"step\": 0.64}" \
        "--epochs $epochs --synthetic-size $size"
    wait_for "$job: steps at world size 2" "${TIMEOUT%s}" "check resized '$SHARED/$job' --world 2 >/dev/null 2>&1"
    local how victim t0=0 survivor lost first
    settle
    for how in freeze pause kill; do
        # Once the group of 2 took 3 steps: a node frozen in DDP's own syncs of a group's first
        # two holds the survivor for gloo's timeout (docs/node-failures.md, "Known limits").
        wait_for "$job: 3 steps at world size 2" 120 "check resized '$SHARED/$job' --after $t0 --world 2 --steps 3 >/dev/null 2>&1"
        victim=$(node_of "$job-1") survivor=$(uid_of "$job-0") lost=$(uid_of "$job-1")
        t0=$(now)
        log "$job: docker ${how/freeze/pause} $victim (Pod $job-1)"
        docker "${how/freeze/pause}" "$victim" >/dev/null
        # Judged by the trainer's own clock (its sample log): the harness's polling (a check
        # each second, each a Python start) adds up to 2 s of its own on a busy machine.
        took_until "$job: the survivor's step at world size 1 after the $how" "$t0" 30 \
            "check resized '$SHARED/$job' --after $t0 --world 1 >/dev/null 2>&1" "" "check resized '$SHARED/$job' --after $t0 --world 1"
        first=$(check resized "$SHARED/$job" --after "$t0" --world 1)
        first=${first#step at world size 1 } first=${first%% s after*}
        figure "elastic $how: next step at the smaller size $first s after the loss"
        [[ $first =~ ^[0-9]+\.[0-9]+$ ]] && ((${first%.*} < 10)) \
            || die "$job: the survivor's first step at world size 1 came $first s after the $how, by its own clock: not within 10 s"
        if [[ $how == freeze ]]; then
            docker unpause "$victim" >/dev/null
            thawed "$job" "$t0" "$survivor" "$lost"
            continue
        fi
        took_until "$job: NODES 1/2 and a NodeLost Event" "$t0" 20 \
            "[[ \$(status $job .nodes) == 1/2 ]] && events_of $job | grep '^NodeLost: training at 1/2 nodes' >/dev/null"
        figure "elastic $how: kubectl get ddpj says 1/2 and NodeLost $TOOK s after the loss"
        took_until "$job: the lost Pod force-deleted" "$t0" 30 \
            "events_of $job | grep '^ForceDeleted: force-deleted Pod $job-1: its node $victim' >/dev/null"
        if [[ $how == kill ]]; then
            restart_node "$victim"
            finish_later node_elastic node_elastic_end "$job" "$size" "$epochs" "$victim" "$t0" "$survivor"
            return 0
        fi
        docker unpause "$victim" >/dev/null
        grown_back "$job" "$how" "$t0" "$survivor"
    done
}
thawed() {  # JOB T SURVIVOR FROZEN: the frozen Pod's own trainer back in the group since T
    took_until "$1: the thawed node back at world size 2" "$2" 60 \
        "check resized '$SHARED/$1' --after $2 --world 1 --then 2 >/dev/null 2>&1" "$1"
    figure "elastic freeze: back at world size 2 $TOOK s after the freeze, in the same Pod"
    [[ $(uid_of "$1-0") == "$3" && $(uid_of "$1-1") == "$4" && $(status "$1" .restarts) == 0 ]] \
        || die "$1: a Pod was replaced or the gang restarted after a freeze of seconds ($(status "$1" ''))"
}
grown_back() {  # JOB HOW T SURVIVOR: the job at world size 2 again since the loss at T
    took_until "$1: grown back to 2/2" "$3" 300 \
        "[[ \$(status $1 .nodes) == 2/2 ]] && check resized '$SHARED/$1' --after $3 --world 2 >/dev/null 2>&1" "$1"
    figure "elastic $2: grown back to world size 2 $TOOK s after the loss, once the node was back"
    [[ $(uid_of "$1-0") == "$4" && $(status "$1" .restarts) == 0 ]] \
        || die "$1: the survivor was replaced or the gang restarted ($(status "$1" ''))"
}
node_elastic_end() {  # JOB SIZE EPOCHS NODE T SURVIVOR
    node_back "$4"
    grown_back "$1" kill "$5" "$6"
    release_steps "$1"
    wait_succeeded "$1"
    [[ $(status "$1" .restarts) == 0 ]] || die "$1 restarted its gang: elastic jobs keep training"
    log "$1: $(check exactly-once "$SHARED/$1" --size "$2" --epochs "$3")"
}

# ---------------------------------------------------------- a rigid job's node killed
# The survivor's collective fails; the gang restarts on the healthy nodes (the dead node's
# Pod force-deleted once its node is NotReady, an Event naming it) from the last
# checkpoint, within 90 s of the kill, nothing before the checkpoint lost. Then, with the
# node still dead, a job that needs every worker has nowhere to go: its status says why it
# waits; it starts once the node is back.
scenario_node_rigid() {
    local job=node-rigid
    node_job "$job" 2 '{"maxRestarts": 3, "step": 2}' "$RIGID"
    wait_checkpoint "$job"
    local victim saved t0
    # The node of a Pod that is not the acting operator's (its loss is tried on its own).
    victim=$(node_of "$job-1")
    [[ $victim != "$(leader_node)" ]] || victim=$(node_of "$job-0")
    settle
    saved=$(check newest-checkpoint "$SHARED/$job") t0=$(now)
    log "$job: docker kill $victim; newest checkpoint at step $saved"
    docker kill "$victim" >/dev/null
    took_until "$job: the node's Pod force-deleted" "$t0" 90 \
        "events_of $job | grep '^ForceDeleted: force-deleted Pod $job-[01]: its node $victim' >/dev/null"
    figure "rigid kill: the dead node's Pod force-deleted $TOOK s after the kill"
    # Nowhere to go: three nodes wanted, two workers Ready (the dead one NotReady and tainted
    # by now, so no Pod of it is bound there). Made while the first job resumes beside it.
    local wide=node-wide
    node_job "$wide" 3 '{}' "--epochs 1 --synthetic-size 1024"
    took_until "$job: resumed from its checkpoint" "$t0" 90 "check resumed '$SHARED/$job' --after $t0 --saved $saved >/dev/null 2>&1" "$job"
    figure "rigid kill: $(check resumed "$SHARED/$job" --after "$t0" --saved "$saved")"
    release_steps "$job"
    wait_for "$wide: its status says why it waits" 120 \
        "status $wide .message | grep -Eq 'not-ready|unreachable|anti-affinity|nodes are available'"
    log "$wide waits: $(status "$wide" .message)"
    # The node comes back while the first job finishes.
    finish_later node_rigid node_rigid_end "$victim" "$job" "$wide"
}
node_rigid_end() {  # NODE JOB WIDE
    start_node "$1"
    wait_succeeded "$2"
    wait_succeeded "$3"
}

# ------------------------------------------------------------------------ a partition
# Pod 0 (rank 0, which writes the checkpoints) is cut off with its node while both live on.
# The job moves on without it (NotReady: a gang restart on the other nodes, from the last
# checkpoint); when the partition heals, the kubelet ends the stale Pod, and nothing it did
# after the job moved on reached the checkpoints or the metrics (the fence).
scenario_partition() {
    local job=partition
    node_job "$job" 2 '{"maxRestarts": 3, "step": 2}' "$RIGID"
    wait_checkpoint "$job"
    local victim saved stale t0 resumed_at
    settle
    victim=$(node_of "$job-0") saved=$(check newest-checkpoint "$SHARED/$job") stale=$(uid_of "$job-0") t0=$(now)
    log "$job: cutting $victim (Pod $job-0) off the network; newest checkpoint at step $saved"
    partition "$victim" add
    took_until "$job: resumed without the cut-off node" "$t0" 150 "check resumed '$SHARED/$job' --after $t0 --saved $saved >/dev/null 2>&1" "$job"
    figure "rigid partition: $(check resumed "$SHARED/$job" --after "$t0" --saved "$saved")"
    runs_on "$victim" "$stale" || log "$job: the stale Pod had already ended on $victim"
    resumed_at=$(now)
    partition "$victim" delete
    took_until "$job: the stale Pod ended once the partition healed" "$resumed_at" 120 "! runs_on $victim $stale"
    figure "partition healed: the stale Pod ended $TOOK s after"
    release_steps "$job"
    finish_later partition partition_end "$job" "$resumed_at"
}
partition_end() {  # JOB HEALED
    wait_succeeded "$1"
    log "$1: fenced: $(check fenced "$SHARED/$1" --after "$2")"
}

# ----------------------------------------------------------------- a node reported unhealthy
# node-problem-detector's KernelDeadlock condition (the chart's default nodeHealth) on the
# node of Pod 1: the operator moves the job off before any Pod fails: SIGTERM (a
# checkpoint, exit 143), a gang restart not counted, the new Pods elsewhere.
scenario_node_unhealthy() {
    local job=unhealthy
    node_job "$job" 2 '{"maxRestarts": 1, "step": 2}' "$RIGID"
    wait_checkpoint "$job"
    local victim t0 condition
    settle
    victim=$(node_of "$job-1") t0=$(now)
    condition='{"type": "KernelDeadlock", "status": "True", "reason": "E2E", "message": "kind tier: reported unhealthy"}'
    log "$job: node $victim reports KernelDeadlock=True"
    k patch node "$victim" --subresource=status --type=json -p "[{\"op\": \"add\", \"path\": \"/status/conditions/-\", \"value\": $condition}]"
    took_until "$job: moved off $victim" "$t0" 60 "[[ \$(status $job .lastFailure.reason) == NodeUnhealthy ]]"
    figure "unhealthy node: the gang restart began $TOOK s after the condition"
    took_until "$job: resumed elsewhere" "$t0" 120 "check resumed '$SHARED/$job' --after $t0 >/dev/null 2>&1" "$job"
    figure "unhealthy node: $(check resumed "$SHARED/$job" --after "$t0")"
    has_record "$job" "r['event'] == 'preempted' and r['exit_code'] == 143 and r['time'] > $t0" \
        || die "$job: no checkpoint on SIGTERM before it moved: $(metrics "$job")"
    [[ $(node_of "$job-0") != "$victim" && $(node_of "$job-1") != "$victim" ]] || die "$job: a new Pod landed on $victim"
    release_steps "$job"
    k patch node "$victim" --subresource=status --type=json \
        -p "[{\"op\": \"replace\", \"path\": \"/status/conditions/$(k get node "$victim" -o json | "$PY" -c 'import json, sys; print(next(i for i, c in enumerate(json.load(sys.stdin)["status"]["conditions"]) if c["type"] == "KernelDeadlock"))')/status\", \"value\": \"False\"}]"
    finish_later node_unhealthy node_unhealthy_end "$job"
}
node_unhealthy_end() {  # JOB
    wait_succeeded "$1"
    [[ $(status "$1" .disruptions) -ge 1 && $(status "$1" .restarts) == "$(status "$1" .disruptions)" ]] \
        || die "$1: the move was counted against maxRestarts: $(status "$1" '')"
}

# --------------------------------------------------------------------------- a drain
# `kubectl drain` of a node that holds a Pod of a rigid job and one of an elastic job (two
# jobs of two Pods each, one per worker, on three workers: some node holds both), the
# operator's leader's own when it does: the Pods go before the standby leads. The
# eviction reaches each trainer as SIGTERM: the rigid one saves and the gang resumes from
# that very step on the other nodes (at most the step in flight repeated, not counted
# against maxRestarts); the elastic one shrinks, then grows back on another node.
scenario_node_drain() {
    local rigid=drain-rigid elastic=drain-elastic node t0 step leader shared
    node_job "$rigid" 2 '{"maxRestarts": 1, "step": 2}' "$RIGID"
    # 128 steps of at least 1 s (128 s) until released, as 256 of 0.5 s were: fewer left.
    node_job "$elastic" 2 '{"elastic": {"minNodes": 1, "maxNodes": 2}, "restartBackoffSeconds": 1, "step": 1}' \
        "--epochs 2 --synthetic-size 8192"
    wait_checkpoint "$rigid"
    wait_for "$elastic: steps at world size 2" "${TIMEOUT%s}" "check resized '$SHARED/$elastic' --world 2 >/dev/null 2>&1"
    settle
    shared=$(comm -12 <(pod_nodes "$rigid") <(pod_nodes "$elastic")) leader=$(leader_pod 2>/dev/null || true)
    node=$(grep -Fx "$(leader_node 2>/dev/null)" <<<"$shared" || head -1 <<<"$shared")
    [[ -n "$node" ]] || die "no node holds a Pod of both jobs: $(pod_nodes "$rigid") / $(pod_nodes "$elastic")"
    t0=$(now)
    log "kubectl drain $node (the operator's leader: ${leader:-none} on $(leader_node 2>/dev/null || echo '?'))"
    k drain "$node" --ignore-daemonsets --delete-emptydir-data --timeout=180s
    took_until "$rigid: saved on SIGTERM" "$t0" 60 "has_record $rigid \"r['event'] == 'preempted' and r['time'] > $t0\""
    step=$("$PY" -c 'import json, sys; print([r for r in map(json.loads, open(sys.argv[1])) if r["event"] == "preempted" and r["time"] > float(sys.argv[2])][0]["step"])' "$SHARED/$rigid/metrics.jsonl" "$t0")
    took_until "$rigid: resumed from the step it saved" "$t0" 120 "check resumed '$SHARED/$rigid' --after $t0 --saved $step >/dev/null 2>&1" "$rigid"
    figure "rigid drain: saved at step $step; $(check resumed "$SHARED/$rigid" --after "$t0" --saved "$step")"
    release_steps "$rigid"
    # The elastic job's figures come from its records, not from when this loop saw them: it
    # looks only once the rigid job resumed, which would bound them from below.
    took_until "$elastic: shrunk, then grown back elsewhere" "$t0" 180 \
        "check resized '$SHARED/$elastic' --after $t0 --world 1 --then 2 >/dev/null 2>&1" "$elastic"
    figure "elastic drain, from the drain's start: $(check resized "$SHARED/$elastic" --after "$t0" --world 1 --then 2)"
    release_steps "$elastic"
    k uncordon "$node"
    finish_later node_drain node_drain_end "$rigid" "$elastic" "$leader"
}
node_drain_end() {  # RIGID ELASTIC LEADER
    wait_succeeded "$1"
    wait_succeeded "$2"
    [[ $(status "$1" .disruptions) -ge 1 && $(status "$2" .restarts) == 0 ]] \
        || die "the drain was counted as a failure (leader before it: ${3:-none}): $1 $(status "$1" '') / $2 $(status "$2" '')"
}
