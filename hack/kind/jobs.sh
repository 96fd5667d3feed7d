# The kind tier's jobs and how a scenario watches them, sourced by hack/e2e-kind.sh before
# the scenarios (hack/kind/scenarios.sh and the rest), which it defines k, PY, JOB_NS,
# TIMEOUT, EXAMPLE, SHARED and KCTX for, and log and die by sourcing hack/kind/report.sh.
# Every wait has a deadline and a Failed job ends its wait at once. Jobs other than the
# example are the example renamed and changed (job_from_example); one with checkpoints gets
# a ReadWriteMany volume on the folder every node mounts (shared_volume), whose metrics
# are read from here.

# What a scenario's job asks of a node, where the example's whole core would keep jobs that
# run side by side (hack/kind/lanes.sh) waiting for one another.
SMALL='{"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}'

# Waits for a DDPJob to reach Succeeded, failing as soon as it reaches Failed instead of
# waiting out the timeout: two `kubectl wait`s race, the first to finish decides.
wait_succeeded() {
    local job=$1 ok bad
    # kubectl itself in the background, not the function k: $! is then kubectl, and the
    # kill below ends the loser instead of a subshell that would leave it waiting.
    kubectl --context "$KCTX" -n "$JOB_NS" wait "ddpjob/$job" --for=condition=Succeeded --timeout="$TIMEOUT" & ok=$!
    kubectl --context "$KCTX" -n "$JOB_NS" wait "ddpjob/$job" --for=condition=Failed --timeout="$TIMEOUT" >/dev/null 2>&1 & bad=$!
    local first rc=0
    wait -n -p first "$ok" "$bad" || rc=$?
    kill "$ok" "$bad" 2>/dev/null || true
    wait "$ok" "$bad" 2>/dev/null || true
    if [[ "$first" == "$bad" && $rc == 0 ]]; then
        die "DDPJob $job failed: $(k -n "$JOB_NS" get ddpjob "$job" -o jsonpath='{.status}')"
    fi
    ((rc == 0)) || die "DDPJob $job did not succeed within $TIMEOUT (phase: $(status "$job" '{.phase}'))"
}

status() { k -n "$JOB_NS" get ddpjob "$1" -o jsonpath="{.status$2}"; }

# Polls CONDITION (a shell command) every 2 s until it holds or SECONDS pass; on the
# deadline, the failure says what the command EXPLAIN prints, if one is given.
wait_for() {
    local what=$1 seconds=$2 condition=$3 explain=${4:-} deadline=$((SECONDS + $2))
    until eval "$condition"; do
        ((SECONDS < deadline)) || die "$what: not within ${seconds}s${explain:+: $(eval "$explain")}"
        sleep 2
    done
}

# The example renamed to $1, with spec fields merged from the JSON $2 and trainer flags
# $3 appended (the example's own flags first, so later ones win).
job_from_example() {
    "$PY" - "$EXAMPLE" "$1" "$2" "${3:-}" <<'PYEOF'
import json, shlex, sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
job["metadata"] = {"name": sys.argv[2]}
job["spec"].update(json.loads(sys.argv[3]))
job["spec"]["args"] = job["spec"]["args"] + shlex.split(sys.argv[4])
print(yaml.safe_dump(job))
PYEOF
}

# A PersistentVolume on the shared folder and its claim <job>-checkpoints.
shared_volume() {
    local job=$1
    mkdir -m 0777 "$SHARED/$job"
    k apply -f - <<EOF
apiVersion: v1
kind: PersistentVolume
metadata: {name: $JOB_NS-$job}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Delete
  storageClassName: ""
  hostPath: {path: /var/ddpjob-shared/$job, type: Directory}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $job-checkpoints, namespace: $JOB_NS}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: $JOB_NS-$job
  resources: {requests: {storage: 1Gi}}
EOF
}

# The trainer's JSON-lines metrics of a job with a shared volume, as a Python list.
metrics() { "$PY" -c 'import json, sys; print([json.loads(l) for l in open(sys.argv[1]) if l.strip()])' "$SHARED/$1/metrics.jsonl"; }
has_record() {  # JOB, a Python expression over the record r
    [[ -f "$SHARED/$1/metrics.jsonl" ]] && "$PY" -c "import json, sys
sys.exit(0 if any(($2) for r in map(json.loads, filter(str.strip, open(sys.argv[1])))) else 1)" "$SHARED/$1/metrics.jsonl"
}
pod_nodes() { k -n "$JOB_NS" get pods -l "ddpjob.io/job-name=$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u; }

# The distinct nodes of JOB's Pods, once all WANT of them are bound: fails while any is not
# (an unscheduled Pod's empty nodeName is no node) or while there are not WANT Pods.
bound_nodes() {
    local job=$1 want=$2 listing
    listing=$(k -n "$JOB_NS" get pods -l "ddpjob.io/job-name=$job" -o jsonpath='{range .items[*]}{.metadata.name}={.spec.nodeName}{"\n"}{end}') || return 1
    awk -F= -v want="$want" 'NF { pods++; if ($2 != "") { bound++; nodes[$2] } }
        END { if (pods != want || bound != want) exit 1; for (n in nodes) print n }' <<<"$listing" | sort
    return "${PIPESTATUS[0]}"
}

# The uid of JOB's Pod 0 while its trainer container runs (no termination message can
# exist yet); fails once it has terminated, or before it started.
pod0_running() {
    local uid started
    read -r uid started < <(k -n "$JOB_NS" get pod "$1-0" -o jsonpath='{.metadata.uid} {.status.containerStatuses[?(@.name=="trainer")].state.running.startedAt}{"\n"}') || return 1
    [[ -n "$uid" && -n "$started" ]] && echo "$uid"
}

# The step in JOB's status.progress, read while the job is Running and Pod 0's trainer runs
# (the same Pod, running, before and after the read): a step the operator can only have
# fetched from Pod 0's IP, because the termination message it reads after the end does not
# exist yet. Fails while there is no such step.
progress_while_running() {
    local job=$1 before after phase step
    before=$(pod0_running "$job") || return 1
    read -r phase step < <(k -n "$JOB_NS" get ddpjob "$job" -o jsonpath='{.status.phase} {.status.progress.step}{"\n"}') || return 1
    after=$(pod0_running "$job") || return 1
    [[ "$before" == "$after" && "$phase" == Running && "$step" =~ ^[0-9]+$ ]] && ((step > 0)) && echo "$step"
}

# The exit codes a watch saw Pod POD's trainer container end with, as `uid code` lines, written to
# FILE until the watch is killed: a deleted Pod's last status is gone with it, so it is followed.
follow_exit_codes() {
    kubectl --context "$KCTX" -n "$JOB_NS" get pods --watch --field-selector "metadata.name=$1" \
        -o jsonpath='{.metadata.uid} {.status.containerStatuses[?(@.name=="trainer")].state.terminated.exitCode}{"\n"}' >"$2"
}
# The exit code FILE (follow_exit_codes) holds for the Pod of uid UID, or nothing.
exit_code_of() { awk -v uid="$2" '$1 == uid && $2 != "" { code = $2 } END { if (code != "") print code }' "$1"; }

# Waits until JOB's status shows a step the operator read from Pod 0's IP while the job ran
# (progress_while_running), checking each second (the operator reads Pod 0 every 2 s: the
# chart's extraEnv); fails once the job has ended, or after SECONDS. The step is left in
# PROGRESS_STEP (not printed: a die inside a command substitution would end only that).
progress_from_pod0() {
    local job=$1 deadline=$((SECONDS + $2)) phase
    until PROGRESS_STEP=$(progress_while_running "$job"); do
        phase=$(status "$job" '.phase')
        [[ "$phase" != Succeeded && "$phase" != Failed ]] \
            || die "$job ended ($phase) before the operator showed progress read from Pod 0 while it ran"
        ((SECONDS < deadline)) || die "$job: no progress read from Pod 0 while it ran within $2 s"
        sleep 1
    done
}

# The log of Pod POD once a Pod of another uid than OLD_UID holds its name, followed to its
# end (retried while its container is not started yet), for at most 300 s of waiting.
follow_replacement() {
    local deadline=$((SECONDS + 300)) uid
    until uid=$(k -n "$JOB_NS" get pod "$1" -o jsonpath='{.metadata.uid}' 2>/dev/null) && [[ -n "$uid" && "$uid" != "$2" ]]; do
        ((SECONDS < deadline)) || return 1
        sleep 1
    done
    until k -n "$JOB_NS" logs -f "$1" -c trainer 2>/dev/null; do
        ((SECONDS < deadline)) || return 1
        sleep 1
    done
}
