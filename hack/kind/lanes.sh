# Scenarios side by side, sourced by hack/e2e-kind.sh after hack/kind/report.sh. The default
# scenarios fault only their own jobs (a Pod deleted, a container over its memory limit, a
# graceful delete, one node cordoned), and most of each one's time is waiting on Kubernetes
# (scheduling, a container's start, a gang restart), not this machine's cores: up to LANES
# of them run at once, each in a subshell of its own. Its output goes to a file, printed
# whole when it ends, so that a scenario's lines stay together in the log. The first to fail
# stops the others; its step and reason are the run's. The node scenarios take whole nodes
# away from every job on them, so they run one at a time, after these.

# Those that may run side by side, longest first (a lane that frees up takes the next).
LANE_SCENARIOS="elastic restart graceful curves example oom"

# SCENARIO... in LANES lanes (the queue in LANE_SCENARIOS' order), under WORK/lanes.
run_lanes() {  # LANES SCENARIO...
    local lanes=$1 dir=$WORK/lanes name pid done_pid rc why queue=()
    shift
    mkdir -p "$dir"
    for name in $LANE_SCENARIOS; do
        [[ " $* " != *" $name "* ]] || queue+=("$name")
    done
    declare -A running=()  # lane subshell pid -> scenario
    while ((${#queue[@]} + ${#running[@]})); do
        while ((${#queue[@]} && ${#running[@]} < lanes)); do
            name=${queue[0]}
            queue=("${queue[@]:1}")
            log "scenario: $name starts (beside: ${running[*]:-none})"
            lane "$name" >"$dir/$name.log" 2>&1 &
            running[$!]=$name
        done
        rc=0
        wait -n -p done_pid "${!running[@]}" || rc=$?
        name=${running[$done_pid]}
        unset "running[$done_pid]"
        log "scenario: $name, its output"
        cat "$dir/$name.log" >&2
        if ((rc != 0)); then
            for pid in "${!running[@]}"; do
                stop_children "$pid"
                kill -TERM "$pid" 2>/dev/null || true
            done
            wait 2>/dev/null || true
            STEP="scenario: $name"
            why=$(cat "$dir/$name.why" 2>/dev/null || true)
            die "${why:-its subshell exited $rc}"
        fi
        log "scenario-$name took $(<"$dir/$name.took")s, beside others"
        [[ -z "${E2E_TIMINGS:-}" ]] || printf 'scenario-%s %s\n' "$name" "$(<"$dir/$name.took")" >>"$E2E_TIMINGS"
    done
}

# One scenario in this (background) subshell: its reason kept on failure, its seconds on
# success. What it left running in the background (a `kubectl logs -f`) ends with it: once
# the subshell is gone they would belong to no one the run's cleanup can find.
lane() {  # SCENARIO
    local name=$1 started=$SECONDS
    STEP="scenario: $name"
    trap 'stop_children $BASHPID; printf "%s" "$FAILED_WHY" >"$WORK/lanes/'"$name"'.why"' EXIT
    "scenario_$name"
    echo $((SECONDS - started)) >"$WORK/lanes/$name.took"
}

# A node scenario's end (its jobs run to their end at full speed, then audited) goes on in
# the background while the next one makes its jobs and waits for their first checkpoint:
# 15 to 50 s each on two cores, which one after another cost the tier about 2 minutes. A
# scenario settles the one before it ahead of its first fault (a node killed, cut off,
# drained, marked), so no fault ever meets another scenario's job; the run settles the
# last one. Its output is printed whole when it is settled; its failure is the run's.
PENDING_PID= PENDING_NAME=
finish_later() {  # NAME COMMAND...
    settle
    PENDING_NAME=$1
    shift
    rm -f "$WORK/lanes/end.why"
    mkdir -p "$WORK/lanes"
    (
        STEP="scenario: $PENDING_NAME (its end)"
        trap 'stop_children $BASHPID; printf "%s" "$FAILED_WHY" >"$WORK/lanes/end.why"' EXIT
        "$@"
    ) >"$WORK/lanes/end.log" 2>&1 &
    PENDING_PID=$!
}
settle() {
    [[ -n $PENDING_PID ]] || return 0
    local pid=$PENDING_PID rc=0 started=$SECONDS why
    PENDING_PID=
    wait "$pid" || rc=$?
    log "scenario: $PENDING_NAME, its end (waited for $((SECONDS - started)) s)"
    cat "$WORK/lanes/end.log" >&2
    ((rc == 0)) && return 0
    STEP="scenario: $PENDING_NAME"
    why=$(cat "$WORK/lanes/end.why" 2>/dev/null || true)
    die "${why:-its end exited $rc}"
}
