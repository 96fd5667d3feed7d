# How the kind tier reports, sourced by hack/e2e-kind.sh: each step's name and seconds, and
# on failure the step, the reason and where, said again as the run's last lines. The
# diagnostics printed on failure are long, and a log read only by its tail (as CI's is)
# would otherwise end in the last Pod's log with the reason scrolled far above it.
#
# The reason is the first of: a check's own words (die), or the command that failed under
# errexit, with its exit status and line (the ERR trap; errtrace carries it into the
# scenarios' functions).

STEP=start
FAILED_WHY=
PHASE_START=$SECONDS

# Each line with the time of day (UTC): where a run's minutes went is read from its log.
log() { TZ=UTC printf '\n=== e2e-kind %(%H:%M:%S)T: %s\n' -1 "$*" >&2; }
step() { STEP=$*; log "$*"; }
die() {
    [[ -n "$FAILED_WHY" ]] || FAILED_WHY=$*
    log "FAILED: $*"
    exit 1
}

# The seconds since the last phase, under that phase's name (and in $E2E_TIMINGS).
phase() {
    local took=$((SECONDS - PHASE_START))
    log "$1 took ${took}s"
    [[ -z "${E2E_TIMINGS:-}" ]] || printf '%s %s\n' "$1" "$took" >>"$E2E_TIMINGS"
    PHASE_START=$SECONDS
}

# The ERR trap's half: the first command that failed, where (a function's file and line).
failed_command() {  # STATUS LINE COMMAND
    [[ -z "$FAILED_WHY" ]] || return 0
    FAILED_WHY="\`$3\` exited $1 (${BASH_SOURCE[1]##*/}, line $2)"
}
set -o errtrace
trap 'failed_command $? $LINENO "$BASH_COMMAND"' ERR

# Only a run that got to its end passed: a fatal signal (a TERM to the script alone, say)
# runs the EXIT trap too, with the last command's status, 0 as often as not.
RUN_DONE=0
run_done() { RUN_DONE=1; }
run_status() {  # STATUS: sets RUN_STATUS, a failure where STATUS is 0 but the run did not end
    RUN_STATUS=$1
    if ((RUN_STATUS == 0 && RUN_DONE == 0)); then
        RUN_STATUS=1
        [[ -n "$FAILED_WHY" ]] || FAILED_WHY="stopped before its end (a signal, or an exit that no check made)"
    fi
}

# The processes below PID, deepest first: what the run started (a kubectl wait or watch in
# the background, the foreground command a signal cut short) ends with it.
stop_children() {  # PID
    local child
    for child in $(pgrep -P "$1" 2>/dev/null); do
        stop_children "$child"
        kill -TERM "$child" 2>/dev/null || true
    done
}

# The run's last lines on failure: the exit status, the step, the reason, and STATE (what
# the caller saw of the cluster before deleting it, a few lines) under it.
report_failure() {  # STATUS [STATE]
    log "FAILED (exit $1) in step '$STEP': ${FAILED_WHY:-no reason recorded (a signal, or a command outside errexit)}"
    [[ -z "${2:-}" ]] || printf '%s\n' "$2" >&2
}
