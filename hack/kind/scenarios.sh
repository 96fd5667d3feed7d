# The kind tier's default scenarios, sourced by hack/e2e-kind.sh after hack/kind/jobs.sh
# (the jobs they make and the waits on them). Each is a function `scenario_<name>`; they run
# side by side (hack/kind/lanes.sh), each on jobs of its own.

# ------------------------------------------------------------------- the example
# The example across two worker nodes, spread as a user spreads a job's Pods (a required
# podAntiAffinity on the hostname in its template, hack/kind/spread.json): the rendezvous
# through the headless Service's name the operator renders (no address rewritten), and
# rank 0's log. (It trains for about 3 s: too short a window to see progress read while it
# runs, which the restart scenario's longer job shows.)
scenario_example() {
    local job=mnist-cpu
    job_from_example "$job" "$(<hack/kind/spread.json)" | k -n "$JOB_NS" apply -f -
    wait_for "$job: both Pods bound to nodes" 300 "bound_nodes $job 2 >/dev/null"
    local nodes
    nodes=$(bound_nodes "$job" 2)
    [[ $(wc -l <<<"$nodes") == 2 ]] || die "$job's 2 Pods are bound to $(wc -l <<<"$nodes") node(s): $nodes"
    wait_succeeded "$job"
    local addr
    addr=$(k -n "$JOB_NS" get pod "$job-1" -o jsonpath='{.spec.containers[0].env[?(@.name=="MASTER_ADDR")].value}')
    [[ "$addr" == "$job-0.$job.$JOB_NS.svc" ]] || die "MASTER_ADDR is '$addr', not the Service's name for Pod 0"
    [[ $(k -n "$JOB_NS" get service "$job" -o jsonpath='{.spec.clusterIP} {.spec.publishNotReadyAddresses}') == "None true" ]] \
        || die "the job's Service is not headless with not-ready addresses published"
    local rank0 epochs
    rank0=$(k -n "$JOB_NS" logs "$job-0" -c trainer)
    printf '%s\n' "$rank0" | tail -n 5
    epochs=$("$PY" -c 'import sys, yaml; a = yaml.safe_load(open(sys.argv[1]))["spec"]["args"]; print(a[a.index("--epochs") + 1])' "$EXAMPLE")
    grep -q "epoch $epochs/$epochs done: .*loss" <<<"$rank0" || die "rank 0's log has no final epoch metrics (epoch $epochs/$epochs)"
    grep -q "done: $epochs epoch(s)" <<<"$rank0" || die "rank 0's log has no final 'done: $epochs epoch(s)' line"
    log "$job: Succeeded on nodes $(paste -sd' ' <<<"$nodes"), MASTER_ADDR=$addr"
}

# ------------------------------------------------- a Pod deleted: the gang restarts
# Mid-run (training steps taken, and the progress the operator read from Pod 0's IP while
# the job ran: before any termination message exists), a Pod is deleted; the gang restarts
# and finishes. Each of its 128 steps lasts at least 0.3 s (the trainer's testing aid): the
# job outlasts the look at its progress however fast the machine, and sleeps instead of
# computing (it once trained 768 full steps of 4 ranks twice over, the side-by-side
# scenarios' heaviest load on two cores).
RESTART_STEP='[{"name": "DDPJOB_TEST_STEP_SECONDS", "value": "0.3"}]'
scenario_restart() {
    local job=mnist-restart
    job_from_example "$job" "{\"maxRestarts\": 3, \"restartBackoffSeconds\": 0, \"resources\": $SMALL, \"env\": $RESTART_STEP}" \
        '--epochs 4 --synthetic-size 8192 --log-every 10' | k -n "$JOB_NS" apply -f -
    k -n "$JOB_NS" wait "ddpjob/$job" --for=condition=Running --timeout="$TIMEOUT"
    # Mid-run means training steps are being taken: rank 0's first progress line.
    timeout "${TIMEOUT%s}" bash -c "until kubectl --context '$KCTX' -n '$JOB_NS' logs -f '$job-0' -c trainer 2>/dev/null | grep -m1 -q 'epoch 1/'; do sleep 1; done" \
        || die "$job never started training"
    progress_from_pod0 "$job" 120
    log "$job: progress step $PROGRESS_STEP read from Pod 0 while it ran; deleting pod $job-1"
    k -n "$JOB_NS" delete pod "$job-1" --wait=false
    k -n "$JOB_NS" wait "ddpjob/$job" --for=jsonpath='{.status.restarts}'=1 --timeout="$TIMEOUT"
    wait_succeeded "$job"
    local restarts label
    restarts=$(status "$job" '.restarts')
    ((restarts >= 1)) || die "$job succeeded without a recorded restart"
    label=$(k -n "$JOB_NS" get pod "$job-0" -o jsonpath='{.metadata.labels.ddpjob\.io/restart-count}')
    [[ "$label" == "$restarts" ]] || die "Pod $job-0 has restart-count label '$label', expected $restarts"
    k -n "$JOB_NS" logs "$job-0" -c trainer | grep "done: 4 epoch(s)" >/dev/null || die "$job rank 0 did not finish after the restart"
    log "$job: restart observed (restarts=$restarts) and the job succeeded"
}

# ------------------------------------- an elastic job loses a Pod and keeps training
# One Pod per worker (a required anti-affinity), and Pod 2 deleted with its node cordoned:
# its replacement has nowhere to go and waits Pending, so the two survivors must train on at
# world size 2 by themselves, in their own records, before anything can rejoin. Then the
# node takes Pods again and the job grows back to 3. (One node cordoned, not all: the
# scenarios beside this one go on scheduling their Pods.) Each step lasts at least 2 s until
# the scenario has seen the group of 3 (the trainer's testing aid, released by a file on the
# shared volume), so the job outlasts its replacement's start however slow the machine: once
# a replacement took longer than the rest of the training and the job ended before a group
# of 3 re-formed. 64 steps of 4 s hold it as long as 128 of 2 s (and 256 of 1 s) did, with
# half as many left to run once released (on two cores, beside the other scenarios, about
# 0.7 s each: 128 of them took the job 71 s after its release).
ELASTIC_REGROW_S=240
scenario_elastic() {
    local job=elastic release=release-steps
    shared_volume "$job"
    job_from_example "$job" "{\"nodes\": 3, \"nprocPerNode\": 1, \"elastic\": {\"minNodes\": 2, \"maxNodes\": 3},
        \"checkpoint\": {\"claimName\": \"elastic-checkpoints\"}, \"restartBackoffSeconds\": 2,
        \"template\": {\"spec\": {\"affinity\": {\"podAntiAffinity\": {\"requiredDuringSchedulingIgnoredDuringExecution\": [
            {\"topologyKey\": \"kubernetes.io/hostname\", \"labelSelector\": {\"matchLabels\": {\"ddpjob.io/job-name\": \"$job\"}}}]}}}},
        \"env\": [{\"name\": \"DDPJOB_TEST_STEP_SECONDS\", \"value\": \"4\"},
                {\"name\": \"DDPJOB_TEST_STEP_SECONDS_UNTIL\", \"value\": \"/checkpoints/$release\"}],
        \"resources\": {\"requests\": {\"cpu\": \"100m\", \"memory\": \"512Mi\"}, \"limits\": {\"memory\": \"2Gi\"}}}" \
        '--epochs 1 --synthetic-size 12288 --checkpoint-every-steps 10 --log-every 10 --sample-log /checkpoints' \
        | k -n "$JOB_NS" apply -f -
    wait_for "$job: training at world size 3" "${TIMEOUT%s}" "has_record $job 'r[\"event\"] == \"step\"'"
    local before
    before=$(k -n "$JOB_NS" get pods -l "ddpjob.io/job-name=$job" -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.uid} {end}')
    # The survivors' own words, kept past their Pods: a survivor that is replaced takes its
    # log with it, and that log is what says why it left.
    local n
    for n in 0 1; do
        k -n "$JOB_NS" logs -f "$job-$n" -c trainer >"$SHARED/$job-$n.log" 2>&1 &
    done
    local node
    node=$(k -n "$JOB_NS" get pod "$job-2" -o jsonpath='{.spec.nodeName}')
    [[ $(bound_nodes "$job" 3 | wc -l) == 3 ]] || die "$job's 3 Pods are not on 3 nodes: $(pod_nodes "$job" | paste -sd' ')"
    k cordon "$node" >/dev/null
    log "node $node cordoned; deleting pod $job-2 on it"
    local deleted
    deleted=$(date +%s.%N)
    k -n "$JOB_NS" delete pod "$job-2" --wait=false
    # And the Pod that replaces it, whose end is the job's too (it once ended 139 after the
    # training was over, and its log went with the gang restart that followed).
    local lost_uid=${before#*"$job-2="}
    follow_replacement "$job-2" "${lost_uid%% *}" >"$SHARED/$job-2.log" 2>&1 &
    # A crash's own dump (faulthandler's: every thread's stack) whole, wherever it is in the log.
    survivors_said() {
        local f
        for f in "$SHARED/$job"-[012].log; do
            log "$f"
            grep -B 30 -A 80 -m 1 '^Fatal Python error' "$f" || tail -n 40 "$f"
        done
    }
    # The trainer's own records, not a status that says so: steps at world size 2 after
    # the loss, while the replacement could not start.
    resized_since() { "$PY" hack/kind/node_checks.py resized "$SHARED/$job" --after "$deleted" --world 2 "$@" 2>&1; }
    wait_for "$job: a step at world size 2 with its replacement Pending" 120 "resized_since >/dev/null" \
        "survivors_said >&2; resized_since"
    # The deleted Pod may still be terminating on its node; a replacement must be unbound.
    local now_uid now_node
    read -r now_uid now_node < <(k -n "$JOB_NS" get pod "$job-2" -o jsonpath='{.metadata.uid} {.spec.nodeName}{"\n"}' 2>/dev/null) || true
    [[ -z "$now_uid" || "$now_uid" == "${lost_uid%% *}" || -z "$now_node" ]] \
        || die "the replacement $job-2 was placed on $now_node while it had nowhere to go: the steps at world size 2 prove nothing"
    k uncordon "$node" >/dev/null
    log "$job: $(resized_since); node $node uncordoned"
    wait_for "$job: grown back to world size 3" "$ELASTIC_REGROW_S" "resized_since --then 3 >/dev/null" \
        "survivors_said >&2; resized_since --then 3"
    touch "$SHARED/$job/$release"
    wait_succeeded "$job"
    [[ $(status "$job" '.restarts') == 0 ]] \
        || { survivors_said; die "$job restarted its gang ($(status "$job" '.restarts') restarts; last failure: $(status "$job" '.lastFailure.message')): elastic jobs keep training"; }
    local pod
    for pod in $before; do
        [[ "${pod%%=*}" == "$job-2" ]] && continue
        [[ $(k -n "$JOB_NS" get pod "${pod%%=*}" -o jsonpath='{.metadata.uid}') == "${pod#*=}" ]] \
            || { survivors_said; die "${pod%%=*} was replaced: a survivor must keep training"; }
    done
    k -n "$JOB_NS" get events --field-selector "involvedObject.name=$job" -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}' \
        | grep '^NodeLost: training at 2/3 nodes' >/dev/null || die "no NodeLost event for the lost Pod"
    log "$job: lost $job-2, kept training at 2/3 nodes ($(resized_since --then 3)), resizes=$(status "$job" '.resizes'), Succeeded"
}

# ------------------------------------------- a container over its memory limit
# The kernel's OOM killer ends a worker; the container reports OOMKilled and 137, and
# the ExitCode policy restarts the gang (128+N is retryable) until maxRestarts.
scenario_oom() {
    local job=oom
    job_from_example "$job" '{"nodes": 1, "restartPolicy": "ExitCode", "maxRestarts": 1, "restartBackoffSeconds": 0,
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "640Mi"}}}' \
        '--synthetic-size 400000' | k -n "$JOB_NS" apply -f -
    k -n "$JOB_NS" wait "ddpjob/$job" --for=condition=Failed --timeout="$TIMEOUT"
    local failure
    failure=$(status "$job" '.lastFailure')
    [[ $(status "$job" '.lastFailure.exitCode') == 137 && $(status "$job" '.lastFailure.reason') == OOMKilled ]] \
        || die "$job's last failure is not OOMKilled/137: $failure"
    [[ $(status "$job" '.restarts') == 1 ]] || die "$job was not restarted once under ExitCode: $(status "$job" '')"
    k -n "$JOB_NS" describe ddpjob "$job" | grep OOMKilled >/dev/null || die "kubectl describe ddpjob $job does not show OOMKilled"
    log "$job: OOMKilled, exit 137, restarted once under restartPolicy ExitCode, then Failed"
}

# --------------------------- a graceful delete: SIGTERM, a checkpoint, a resume
# Steps of at least 0.3 s (RESTART_STEP): three epochs of 32 steps left after the first,
# the delete's time, however fast the machine.
scenario_graceful() {
    local job=graceful
    shared_volume "$job"
    job_from_example "$job" "{\"checkpoint\": {\"claimName\": \"graceful-checkpoints\"}, \"restartBackoffSeconds\": 0, \"resources\": $SMALL, \"env\": $RESTART_STEP}" \
        '--epochs 4 --synthetic-size 8192 --log-every 10' | k -n "$JOB_NS" apply -f -
    wait_for "$job: first epoch" "${TIMEOUT%s}" "has_record $job 'r[\"event\"] == \"epoch\"'"
    local uid watch codes="$SHARED/$job-exit-codes" code
    uid=$(k -n "$JOB_NS" get pod "$job-0" -o jsonpath='{.metadata.uid}')
    follow_exit_codes "$job-0" "$codes" & watch=$!
    wait_for "$job: the watch of $job-0" 60 "grep -q '^$uid' '$codes'"
    log "deleting pod $job-0 (grace period $(k -n "$JOB_NS" get pod "$job-0" -o jsonpath='{.spec.terminationGracePeriodSeconds}')s)"
    k -n "$JOB_NS" delete pod "$job-0" --wait=false
    wait_succeeded "$job"
    kill "$watch" 2>/dev/null || true
    wait "$watch" 2>/dev/null || true
    # The container's exit code as the kubelet reported it, not the trainer's constant.
    code=$(exit_code_of "$codes" "$uid")
    [[ "$code" == 143 ]] || die "$job-0's trainer container ended with exit code '${code:-none seen}', not 143 (SIGTERM): $(cat "$codes")"
    # Rank 0 (in Pod 0) heard SIGTERM, saved, and said so with exit code 143; the next
    # attempt resumed at the step it saved.
    "$PY" - "$SHARED/$job/metrics.jsonl" <<'PYEOF' || die "$job: no checkpoint on SIGTERM and resume from it: $(metrics "$job")"
import json, sys
records = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
stopped = [r for r in records if r["event"] == "preempted" and r["restart"] == 0]
resumed = [r for r in records if r["event"] == "resume" and r["restart"] == 1]
print(f"preempted: {stopped}\nresumed: {resumed}")
sys.exit(0 if stopped and stopped[0]["exit_code"] == 143 and resumed and resumed[0]["step"] == stopped[0]["step"] else 1)
PYEOF
    log "$job: SIGTERM reached the trainer, which saved a checkpoint; its container exited $code; the gang resumed from it"
}
