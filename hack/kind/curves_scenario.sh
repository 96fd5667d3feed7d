# The kind tier's curves scenario, sourced by hack/e2e-kind.sh after hack/kind/jobs.sh
# and hack/kind/node_scenarios.sh (whose helpers it uses): a job with `tensorboard: true`
# trains on real Pods, and `ddpjob tensorboard`, run as a user runs it, opens its curves
# through a real `kubectl port-forward` to the TensorBoard Pod (the process kubelet of the
# other tiers serves none). The loss curve read through the printed URL is checked against
# the trainer's own metrics.jsonl (hack/kind/curve_check.py); the figures are the seconds
# from `kubectl apply` to the URL answering and to every logged point being served.

CURVE_CHECK=hack/kind/curve_check.py
CURVES_S=300  # the job's TensorBoard made, the URL printed, every point served

scenario_curves() {
    local job=curves t0 out pid url said
    shared_volume "$job"
    t0=$(now)
    job_from_example "$job" "$("$PY" -c 'import json, sys; print(json.dumps({
        "nodes": 2, "nprocPerNode": 1, "tensorboard": True, "checkpoint": {"claimName": sys.argv[1] + "-checkpoints"},
        "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}}))' "$job")" \
        "--epochs 1 --log-every 4" | k -n "$JOB_NS" apply -f -
    wait_for "$job: status.tensorboard set by the operator" "$CURVES_S" "[[ -n \$(status $job .tensorboard) ]]"
    # Its Pod serving (kubectl cannot forward to a Pod that is not running yet).
    k -n "$JOB_NS" rollout status "deployment/$job-tensorboard" --timeout="${CURVES_S}s"
    # The command a user runs, in the background until it is stopped as a user stops it (Ctrl-C).
    out=$WORK/curves-tensorboard.out
    "$PY" -m ddpjob.cli tensorboard "$job" --via port-forward -n "$JOB_NS" --context "$KCTX" >"$out" 2>&1 &
    pid=$!  # stopped with the tier's other commands if a check below fails (report.sh)
    wait_for "ddpjob tensorboard $job: its URL printed" "$CURVES_S" \
        "grep -q '^TensorBoard of ddpjob $job: http://' '$out' || ! kill -0 $pid 2>/dev/null"
    kill -0 "$pid" 2>/dev/null || die "ddpjob tensorboard $job ended: $(tail -5 "$out")"
    url=$(sed -n "s|^TensorBoard of ddpjob $job: \(http://[^ ]*\) .*|\1|p" "$out" | head -1)
    wait_for "TensorBoard of $job answering at $url" "$CURVES_S" "curl -fsS -o /dev/null '$url'"
    figure "curves: ddpjob tensorboard's URL answered $(since "$t0") s after kubectl apply"
    wait_succeeded "$job"
    # Every logged step's loss, served as logged, through the port-forward.
    # TensorBoard reads the event files again every few seconds: the last points come late.
    local deadline=$((SECONDS + CURVES_S))
    until said=$("$PY" "$CURVE_CHECK" "$url" "$job" "$SHARED/$job/metrics.jsonl" 2>&1); do
        ((SECONDS < deadline)) || die "the loss curve through ddpjob tensorboard $job: $said"
        sleep 2
    done
    figure "curves: every loss point ($said) served through the port-forward $(since "$t0") s after kubectl apply"
    kill -INT "$pid"
    local stopped=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null; do
        ((SECONDS < stopped)) || die "ddpjob tensorboard $job did not stop within 30 s of Ctrl-C"
        sleep 1
    done
    pgrep -f "kubectl.*port-forward.*$job" >/dev/null && die "a kubectl port-forward of $job outlived ddpjob tensorboard"
    k -n "$JOB_NS" delete ddpjob "$job" --wait=true --timeout=120s
}
