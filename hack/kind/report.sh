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

log() { printf '\n=== e2e-kind: %s\n' "$*" >&2; }
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

# The run's last lines on failure: the exit status, the step, the reason, and STATE (what
# the caller saw of the cluster before deleting it, a few lines) under it.
report_failure() {  # STATUS [STATE]
    log "FAILED (exit $1) in step '$STEP': ${FAILED_WHY:-no reason recorded (a signal, or a command outside errexit)}"
    [[ -z "${2:-}" ]] || printf '%s\n' "$2" >&2
}
